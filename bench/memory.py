"""Training's peak memory on a stream of N messages, for docs/speed.md ("Memory").

The stream is SpamAssassin, enron1 and the SMS texts (16,792 messages, from the corpora in
``../shared/corpora``), repeated until N, every copy after the first changed by a header
line (``X-Copy: k``) so that it is a distinct message; written as one file a message into
``ham/`` and ``spam/`` of a temporary folder. Then, for each ``--jobs``, a fresh
``nbspam train FOLDER -o MODEL`` whose peak is ``ru_maxrss`` from ``wait4`` (the largest
peak resident set of the command or of a worker it waited for); and with ``--phases`` one
more training in a child process that prints its own peak (``VmHWM``) and resident set
(``VmRSS``) at the end of each phase of `training.train`, for each ``--jobs`` given:

    python bench/memory.py 10000 40000 --jobs 1 --jobs 2 --phases
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"
SOURCES = ("spamassassin", "enron1", "sms-spam-collection")

PHASES = r"""
import sys
from nbspam.fit import selection
from nbspam.models import model as m

def status():
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024

TRACE = int(sys.argv.pop(1))
if TRACE:
    import tracemalloc
    tracemalloc.start()

def top(limit=TRACE):
    # the largest holders traced now, by line, and the traced total and peak
    if not limit:
        return
    snapshot = tracemalloc.take_snapshot()
    now, peak = tracemalloc.get_traced_memory()
    print("    traced %.1f MB, traced peak %.1f MB" % (now / 1e6, peak / 1e6))
    for stat in snapshot.statistics("lineno")[:limit]:
        frame = stat.traceback[0]
        name = frame.filename.rsplit("/nbspam/", 1)[-1].rsplit("/", 1)[-1]
        print("    %7.1f MB %s:%d" % (stat.size / 1e6, name, frame.lineno))
    tracemalloc.reset_peak()

def probe(name, function):
    def probed(*args, **kwargs):
        result = function(*args, **kwargs)
        print("%-34s peak %6.1f MB, resident %6.1f MB" % ((name,) + status()), flush=True)
        top()
        return result
    return probed

print("%-34s peak %6.1f MB, resident %6.1f MB" % (("imports",) + status()), flush=True)
from nbspam.fit import crossval
m.ClassCountsBuilder.totals = probe("counted (every chunk)", m.ClassCountsBuilder.totals)
m.fit_counted = probe("the model fitted", m.fit_counted)
m.SampledRows.matrix = probe("the sample's rows stacked", m.SampledRows.matrix)
crossval.Folds.__init__ = probe("the folds' counts", crossval.Folds.__init__)
selection.internal_cv = probe("internal cross-validation", selection.internal_cv)
"""


def build(folder: Path, n: int) -> int:
    """Write N messages into ``folder``/ham and /spam; returns their bytes."""
    sources = []
    for name in SOURCES:
        for label in ("ham", "spam"):
            base = CORPORA / name / label
            sources += [(label, p) for p in sorted(base.iterdir()) if p.is_file()]
    for label in ("ham", "spam"):
        (folder / label).mkdir(parents=True)
    size = 0
    for i in range(n):
        label, path = sources[i % len(sources)]
        data = path.read_bytes()
        copy = i // len(sources)
        if copy:
            data = b"X-Copy: %d\n" % copy + data
        (folder / label / f"{i:06d}").write_bytes(data)
        size += len(data)
    return size


def train(
    folder: Path, model: Path, jobs: int | None, more: Sequence[str] = ()
) -> tuple[float, float]:
    """(wall seconds, peak RSS of the largest process in MB) of one ``nbspam train``
    (``more``: options of train)."""
    argv = [sys.executable, "-m", "nbspam", "train", str(folder), "-o", str(model), "-q", *more]
    if jobs is not None:
        argv += ["--jobs", str(jobs)]
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    if status:
        raise SystemExit(f"{' '.join(argv)} failed with status {status}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def phases(
    folder: Path, model: Path, jobs: int | None, trace: int = 0, more: Sequence[str] = ()
) -> None:
    """One training in a child that prints its memory at each phase's end (with ``trace``,
    the largest holders that `tracemalloc` saw, by line; ``more``: options of train)."""
    more = [*more] if jobs is None else ["--jobs", str(jobs), *more]
    print(f"phases, --jobs {jobs or 'default'}:", flush=True)
    code = PHASES + (
        "from nbspam.cli.commands import main\n"
        f"sys.argv = {['nbspam', 'train', str(folder), '-o', str(model), '-q', *more]!r}\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('%-34s peak %6.1f MB, resident %6.1f MB' % (('written',) + status()))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(trace)], cwd=ROOT, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("messages", nargs="+", type=int, help="numbers of messages")
    parser.add_argument(
        "--jobs", type=int, action="append", help="--jobs of nbspam train [default: its own]"
    )
    parser.add_argument("--phases", action="store_true", help="also each phase's memory")
    parser.add_argument(
        "--folder", type=Path, help="keep the messages here (and reuse them if it exists)"
    )
    parser.add_argument(
        "--only-phases", action="store_true", help="each phase's memory, not the trainings"
    )
    parser.add_argument(
        "--trace", type=int, default=0, help="with the phases, this many top holders by line"
    )
    parser.add_argument(
        "--train-option", action="append", default=[], help="an option of train (repeat)"
    )
    args = parser.parse_args()
    for n in args.messages:
        with tempfile.TemporaryDirectory() as tmp:
            folder, model = Path(tmp) / "mail", Path(tmp) / "model.nbm"
            if args.folder is not None:
                folder = args.folder / str(n)
            if folder.exists():
                size = sum(p.stat().st_size for p in folder.glob("*/*"))
            else:
                size = build(folder, n)
            for jobs in [] if args.only_phases else args.jobs or [None]:
                seconds, peak = train(folder, model, jobs, args.train_option)
                print(
                    f"{n:,} messages ({size / 1e6:.0f} MB), --jobs {jobs or 'default'}: "
                    f"peak {peak:.0f} MB (largest process), {seconds:.1f} s, "
                    f"model {model.stat().st_size / 1e6:.1f} MB",
                    flush=True,
                )
            if args.phases or args.only_phases:
                for jobs in args.jobs or [None]:
                    phases(folder, model, jobs, args.trace, args.train_option)


if __name__ == "__main__":
    main()
