"""The one-message cold start beside ``python -c pass``, in one run: wall and CPU time, peak RSS.

Each command is a fresh process with the message on stdin; the commands take turns (one run
of each, then again), so that all see the same load, and the medians are compared as
ratios to ``python -c pass`` of the same run. A model is named ``NAME=PATH``; a second
checkout (the code before a change, with its modules compiled) is run with ``--before
FOLDER``, from that folder, on models it reads. Each checkout's modules are compiled first
(where PYTHONDONTWRITEBYTECODE is set, a module changed since its last compiling would
otherwise be compiled again in every run):

    python bench/coldstart.py sample_data/new/001.eml small=small.nbm sa=sa.nbm
    python bench/coldstart.py MSG sa=sa.nbm --before ../old-checkout --before-model sa=sa-old.nbm
    python bench/coldstart.py MSG sa=sa.nbm --filter       # and `nbspam filter -m MODEL`
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(argv: list[str], message: Path, cwd: Path | None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one process scoring ``message``, run
    in ``cwd`` (whose nbspam, if any, ``python -m nbspam`` imports)."""
    with message.open("rb") as stdin:
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.DEVNULL, cwd=cwd)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    if status:
        raise SystemExit(f"{' '.join(argv)} failed with status {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("message", type=Path, help="the message scored on stdin")
    parser.add_argument("models", nargs="+", help="NAME=MODEL, scored by this checkout")
    parser.add_argument("--runs", type=int, default=21, help="runs of each [default: 21]")
    parser.add_argument(
        "--filter", action="store_true", help="also `nbspam filter -m MODEL` on each model"
    )
    parser.add_argument("--before", type=Path, help="another checkout, run on --before-model")
    parser.add_argument("--before-model", action="append", default=[], help="NAME=MODEL")
    args = parser.parse_args()
    python = sys.executable
    commands: dict[str, tuple[list[str], Path | None]] = {
        "python -c pass": ([python, "-c", "pass"], ROOT)
    }
    verbs = ["predict", "filter"] if args.filter else ["predict"]
    for spec in args.models:
        name, _, model = spec.partition("=")
        for verb in verbs:
            argv = [python, "-m", "nbspam", verb, "-m", str(Path(model).resolve())]
            commands[name if verb == "predict" else f"{name} filter"] = (argv, ROOT)
    for spec in args.before_model if args.before is not None else []:
        name, _, model = spec.partition("=")
        for verb in verbs:
            argv = [python, "-m", "nbspam", verb, "-m", str(Path(model).resolve())]
            what = name if verb == "predict" else f"{name} filter"
            commands[f"{what} (before)"] = (argv, args.before.resolve())
    for folder in {cwd for _, cwd in commands.values()}:  # each run reads compiled modules
        subprocess.run([python, "-m", "compileall", "-q", "nbspam"], cwd=folder, check=True)
    message = args.message.resolve()
    times: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, (argv, cwd) in commands.items():
            times[name].append(run(argv, message, cwd))
    base = [statistics.median(column) for column in zip(*times["python -c pass"])]
    print(
        f"| command ({args.runs} interleaved runs, medians) | wall | x pass | CPU | x pass "
        "| peak RSS |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, rows in times.items():
        wall, cpu, rss = (statistics.median(column) for column in zip(*rows))
        print(
            f"| {name} | {wall * 1e3:.1f} ms | {wall / base[0]:.2f} | {cpu * 1e3:.1f} ms "
            f"| {cpu / base[1]:.2f} | {rss:.1f} MB |"
        )


if __name__ == "__main__":
    main()
