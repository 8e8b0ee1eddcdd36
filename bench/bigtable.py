"""Speed and memory of typed tables beside scikit-learn, as whole processes: a generated CSV
of ROWS rows (10 Gaussian columns, 5 categorical ones, a label of two classes) in a
temporary folder, then

| phase | nbspam | reference |
|---|---|---|
| train, kinds given | `nbspam train big.csv --column 'g*=gaussian' --column 'c*=categorical'` | read the CSV (csv module), GaussianNB + CategoricalNB fit, pickle |
| train, auto | `nbspam train big.csv` (kinds detected, auto chooses) | (the same script, run again beside it) |
| predict | `nbspam predict -m model.nbm big.csv` | unpickle, read the CSV, predict, one line per row |

Each phase is one fresh process; its time is the wall clock and its memory the peak resident
set (`os.wait4`'s rusage of that process alone). The machine may be loaded: compare the ratios
of one run. With --repeat N each phase runs N times, nbspam and the reference in turns, and
the medians are shown; --nbspam names another nbspam command to measure (the code before a
change, say), run in turns with the one beside this Python as a third column.

    python bench/bigtable.py                  # 1,000,000 rows
    python bench/bigtable.py --rows 100000    # a quick run
    python bench/bigtable.py --repeat 3 --nbspam /path/to/old/nbspam
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BIN = Path(sys.executable).parent

SKLEARN_TRAIN = r"""
import csv, pickle, sys
import numpy as np
from sklearn.naive_bayes import CategoricalNB, GaussianNB

with open(sys.argv[1], newline="") as f:
    reader = csv.reader(f)
    names = next(reader)
    g = [j for j, n in enumerate(names) if n.startswith("g")]
    c = [j for j, n in enumerate(names) if n.startswith("c")]
    label = names.index("label")
    numbers, cats, y = [], [], []
    for row in reader:
        numbers.append([float(row[j]) for j in g])
        cats.append([row[j] for j in c])
        y.append(row[label])
X = np.array(numbers)
del numbers
cats = np.array(cats)
codes, categories = np.empty(cats.shape, np.int64), []
for j in range(cats.shape[1]):
    values, codes[:, j] = np.unique(cats[:, j], return_inverse=True)
    categories.append(values)
y = np.array(y)
gauss = GaussianNB().fit(X, y)
cat = CategoricalNB().fit(codes, y)
with open(sys.argv[2], "wb") as f:
    pickle.dump((gauss, cat, categories), f)
"""

SKLEARN_PREDICT = r"""
import csv, pickle, sys
import numpy as np

with open(sys.argv[2], "rb") as f:
    gauss, cat, categories = pickle.load(f)
with open(sys.argv[1], newline="") as f:
    reader = csv.reader(f)
    names = next(reader)
    g = [j for j, n in enumerate(names) if n.startswith("g")]
    c = [j for j, n in enumerate(names) if n.startswith("c")]
    numbers, cats = [], []
    for row in reader:
        numbers.append([float(row[j]) for j in g])
        cats.append([row[j] for j in c])
X = np.array(numbers)
del numbers
cats = np.array(cats)
codes = np.empty(cats.shape, np.int64)
for j in range(cats.shape[1]):
    codes[:, j] = np.searchsorted(categories[j], cats[:, j])
jll = gauss.predict_joint_log_proba(X) + cat.predict_joint_log_proba(codes) - gauss.class_prior_
jll = jll - np.log(np.exp(jll - jll.max(1, keepdims=True)).sum(1, keepdims=True)) - jll.max(1, keepdims=True)
out = sys.stdout
for i, (label, p) in enumerate(zip(gauss.classes_[jll.argmax(1)], np.exp(jll.max(1)))):
    out.write(f"{sys.argv[1]}#{i + 2}\t{label}\t{p:.4f}\n")
"""


def write_table(path: Path, rows: int, seed: int = 0) -> None:
    """ROWS rows: g0..g9 normal with a class shift, c0..c4 of 3 to 40 categories, label."""
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        f.write(",".join([*(f"g{j}" for j in range(10)), *(f"c{j}" for j in range(5))]))
        f.write(",label\n")
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            y = rng.integers(0, 2, n)
            X = rng.normal(size=(n, 10)) * 3.0 + y[:, None] * 0.5
            C = [rng.integers(0, k, n) + y * (j % 2) for j, k in enumerate((3, 5, 10, 20, 40))]
            cols = [list(map(repr, X[:, j].tolist())) for j in range(10)]
            cols += [[f"v{v}" for v in c.tolist()] for c in C]
            cols.append(["spam" if v else "ham" for v in y.tolist()])
            f.writelines(",".join(row) + "\n" for row in zip(*cols))


def run(argv: list[str], stdout=subprocess.DEVNULL) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one process, which must succeed."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed ({proc.returncode}):\n{err}")
    return took, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--json", help="also write the measurements to this file")
    parser.add_argument("--no-auto", action="store_true", help="leave out the auto phase")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each phase (medians)")
    parser.add_argument("--nbspam", help="another nbspam command, measured in turns beside")
    args = parser.parse_args()
    py, nbspam = str(BIN / "python"), str(BIN / "nbspam")
    programs = {"nbspam": nbspam, **({"other": args.nbspam} if args.nbspam else {})}
    with tempfile.TemporaryDirectory(prefix="nbspam-bigtable-") as tmp:
        data, t = Path(tmp) / "big.csv", Path(tmp)
        print(f"generating {args.rows:,} rows ...", file=sys.stderr)
        write_table(data, args.rows)
        (t / "train.py").write_text(SKLEARN_TRAIN)
        (t / "predict.py").write_text(SKLEARN_PREDICT)
        given = ["--column", "g*=gaussian", "--column", "c*=categorical"]
        reference = {
            "train, kinds given": [py, t / "train.py", data, t / "sk.pkl"],
            "predict": [py, t / "predict.py", data, t / "sk.pkl"],
            "train, auto": [py, t / "train.py", data, t / "sk.pkl"],
        }

        def ours(phase: str, name: str, program: str) -> list:
            if phase == "predict":
                return [program, "predict", "-m", t / f"given-{name}.nbm", data]
            if phase == "train, auto":
                return [program, "train", data, "-o", t / f"auto-{name}.nbm"]
            return [program, "train", data, "-o", t / f"given-{name}.nbm", *given]

        phases = [p for p in reference if not (args.no_auto and p == "train, auto")]
        results: dict[str, dict[str, list[tuple[float, float]]]] = {}
        for phase in phases:  # the reference again beside each: the load may have changed
            runs = results[phase] = {name: [] for name in [*programs, "scikit-learn"]}
            for i in range(args.repeat):
                print(f"{phase} ({i + 1} of {args.repeat}) ...", file=sys.stderr)
                for name, program in programs.items():
                    runs[name].append(run(ours(phase, name, program)))
                runs["scikit-learn"].append(run(reference[phase]))
    medians = {
        phase: {name: _median(r) for name, r in runs.items()} for phase, runs in results.items()
    }
    print(f"\n{args.rows:,} rows (10 Gaussian, 5 categorical columns), whole processes", end="")
    print(f", medians of {args.repeat} runs in turns" if args.repeat > 1 else "", end="\n\n")
    other = " | other | ratio time | ratio memory" if args.nbspam else ""
    print(f"| phase | nbspam | scikit-learn | ratio time | ratio memory{other} |")
    print("|---|---|---|---|---" + ("|---|---|---" if args.nbspam else "") + "|")
    for phase, m in medians.items():
        (a, am), (b, bm) = m["nbspam"], m["scikit-learn"]
        line = f"| {phase} | {a:.1f} s, {am:.0f} MB | {b:.1f} s, {bm:.0f} MB | {a / b:.2f} | {am / bm:.2f}"
        if args.nbspam:
            c, cm = m["other"]
            line += f" | {c:.1f} s, {cm:.0f} MB | {c / b:.2f} | {cm / bm:.2f}"
        print(line + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": results, "medians": medians}, indent=1))


def _median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The median time and the median memory of runs."""
    return statistics.median(t for t, _ in runs), statistics.median(m for _, m in runs)


if __name__ == "__main__":
    main()
