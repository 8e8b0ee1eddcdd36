"""Training's peak memory on a stream of N messages, for docs/speed.md ("Memory").

The stream is SpamAssassin, enron1 and the SMS texts (16,792 messages, from the corpora in
``../shared/corpora``; ``--source`` picks some of them, ``--source spamassassin`` a stream of
mail with its headers, every message dated), repeated until N, every copy after the first changed by a header
line (``X-Copy: k``) so that it is a distinct message; written as one file a message into
``ham/`` and ``spam/`` of a temporary folder. Then, for each ``--jobs``, a fresh
``nbspam train FOLDER -o MODEL`` measured three ways: ``ru_maxrss`` from ``wait4`` (the
largest peak resident set of the command or of a worker it waited for), and, sampled every
50 ms from /proc, the peak of the sum over the command's process tree (the command and its
``--jobs`` workers) of their proportional set sizes (PSS: a page shared after a fork is
split between the processes that share it) and of their resident sets (RSS: counted in
each), with each process's PSS at the moment of the tree's PSS peak; with its CPU time
(user + system, of the command and the workers it waited for). ``--corpus`` trains on a
folder of ham/ and spam/ as it is instead (``../shared/corpora/spamassassin``); ``--runs``
repeats each training and prints each run. With ``--phases`` one
more training in a child process that prints its own peak (``VmHWM``) and resident set
(``VmRSS``) at the end of each phase of `training.train`, for each ``--jobs`` given:

    python bench/memory.py 10000 40000 --jobs 1 --jobs 2 --phases
    python bench/memory.py 18138 --source spamassassin --jobs 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

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


def build(folder: Path, n: int, corpora: Sequence[str] = SOURCES) -> int:
    """Write N messages of ``corpora`` into ``folder``/ham and /spam; returns their bytes."""
    sources = []
    for name in corpora:
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


class TreeSampler:
    """The peak, over samples taken every ``every`` seconds in a thread, of the sums of PSS
    and of RSS over a process and its descendants (found through
    /proc/PID/task/*/children: no scan of all of /proc), in kB; ``at_peak``: the PSS of
    each process (pid, kB) when the PSS sum peaked, the root first; ``peak_second``: when,
    in seconds from the start."""

    def __init__(self, root: int, every: float = 0.05) -> None:
        self.root = root
        self.every = every
        self.pss_kb = self.rss_kb = 0
        self.at_peak: list[tuple[int, int]] = []
        self.peak_second = 0.0
        self._done = threading.Event()
        self._start = time.perf_counter()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self.every):
            sizes = [(pid, *rollup(pid)) for pid in descendants(self.root)]
            pss = sum(p for _, p, _ in sizes)
            self.rss_kb = max(self.rss_kb, sum(r for _, _, r in sizes))
            if pss > self.pss_kb:
                self.pss_kb, self.at_peak = pss, [(pid, p) for pid, p, _ in sizes]
                self.peak_second = time.perf_counter() - self._start


def descendants(root: int) -> list[int]:
    """``root`` and every process under it (those that can still be read)."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo += [int(child) for child in f.read().split()]
        except (OSError, ValueError):
            pass
    return found


def rollup(pid: int) -> tuple[int, int]:
    """(PSS, RSS) of a process in kB, from /proc/PID/smaps_rollup; 0s once it is gone."""
    pss = rss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return pss, rss


class Run(NamedTuple):
    """One training's measures (MB, seconds)."""

    seconds: float
    cpu: float
    largest: float
    tree_pss: float
    tree_rss: float
    at_peak: list[float]  # each process's PSS when the tree's PSS peaked, the command first
    peak_second: float

    def line(self) -> str:
        at = " / ".join(f"{mb:.0f}" for mb in self.at_peak)
        return (
            f"tree peak PSS {self.tree_pss:.0f} MB (at {self.peak_second:.1f} s: {at}), "
            f"RSS sum {self.tree_rss:.0f} MB, largest process {self.largest:.0f} MB; "
            f"{self.seconds:.1f} s, CPU {self.cpu:.2f} s"
        )


def train(folder: Path, model: Path, jobs: int | None, more: Sequence[str] = ()) -> Run:
    """The measures of one ``nbspam train`` (``more``: options of train)."""
    argv = [sys.executable, "-m", "nbspam", "train", str(folder), "-o", str(model), "-q", *more]
    if jobs is not None:
        argv += ["--jobs", str(jobs)]
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=ROOT)
    sampler = TreeSampler(process.pid)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    sampler.stop()
    process.returncode = status  # reaped here, not by Popen
    if status:
        raise SystemExit(f"{' '.join(argv)} failed with status {status}")
    return Run(
        seconds,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,
        sampler.pss_kb / 1024,
        sampler.rss_kb / 1024,
        [kb / 1024 for _, kb in sampler.at_peak],
        sampler.peak_second,
    )


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
    parser.add_argument("messages", nargs="*", type=int, help="numbers of messages")
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
    parser.add_argument(
        "--corpus", type=Path, help="train on this folder of ham/ and spam/ instead (no N)"
    )
    parser.add_argument("--runs", type=int, default=1, help="trainings of each [default: 1]")
    parser.add_argument(
        "--source",
        action="append",
        choices=SOURCES,
        help="the corpora the stream repeats (repeat the option) [default: all three]; "
        "spamassassin alone is mail with its headers, every message dated",
    )
    args = parser.parse_args()
    if args.corpus is not None and args.source:
        parser.error("--source picks the corpora of a stream; --corpus trains on a folder as it is")
    if args.source:
        args.source = list(dict.fromkeys(args.source))  # each once
    if args.corpus is not None:
        size = sum(p.stat().st_size for p in args.corpus.glob("*/*") if p.is_file())
        measure(args, args.corpus, f"{args.corpus.name} ({size / 1e6:.0f} MB)")
        return
    for n in args.messages:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "mail"
            corpora = tuple(args.source or SOURCES)
            if args.folder is not None:
                folder = args.folder / "-".join((str(n), *(args.source or ())))
            if folder.exists():
                size = sum(p.stat().st_size for p in folder.glob("*/*"))
            else:
                size = build(folder, n, corpora)
            measure(args, folder, f"{n:,} messages ({size / 1e6:.0f} MB)")


def measure(args: argparse.Namespace, folder: Path, name: str) -> None:
    """The trainings (and phases) that ``args`` ask for on ``folder``."""
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model.nbm"
        for _ in range(args.runs):
            for jobs in [] if args.only_phases else args.jobs or [None]:
                run = train(folder, model, jobs, args.train_option)
                print(
                    f"{name}, --jobs {jobs or 'default'}: {run.line()}, "
                    f"model {model.stat().st_size / 1e6:.1f} MB",
                    flush=True,
                )
        if args.phases or args.only_phases:
            for jobs in args.jobs or [None]:
                phases(folder, model, jobs, args.trace, args.train_option)


if __name__ == "__main__":
    main()
