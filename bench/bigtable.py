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
of one run.

    python bench/bigtable.py                  # 1,000,000 rows
    python bench/bigtable.py --rows 100000    # a quick run
"""

from __future__ import annotations

import argparse
import json
import os
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
    args = parser.parse_args()
    py, nbspam = str(BIN / "python"), str(BIN / "nbspam")
    with tempfile.TemporaryDirectory(prefix="nbspam-bigtable-") as tmp:
        data, t = Path(tmp) / "big.csv", Path(tmp)
        print(f"generating {args.rows:,} rows ...", file=sys.stderr)
        write_table(data, args.rows)
        (t / "train.py").write_text(SKLEARN_TRAIN)
        (t / "predict.py").write_text(SKLEARN_PREDICT)
        given = ["--column", "g*=gaussian", "--column", "c*=categorical"]
        phases = {
            "train, kinds given": (
                [nbspam, "train", data, "-o", t / "given.nbm", *given],
                [py, t / "train.py", data, t / "sk.pkl"],
            ),
            "predict": (
                [nbspam, "predict", "-m", t / "given.nbm", data],
                [py, t / "predict.py", data, t / "sk.pkl"],
            ),
        }
        if not args.no_auto:  # the reference run again beside it: the load may have changed
            phases["train, auto"] = (
                [nbspam, "train", data, "-o", t / "auto.nbm"],
                [py, t / "train.py", data, t / "sk.pkl"],
            )
        results = {}
        for phase, (ours, theirs) in phases.items():
            print(f"{phase} ...", file=sys.stderr)
            results[phase] = {"nbspam": run(ours), "scikit-learn": run(theirs)}
    print(f"\n{args.rows:,} rows (10 Gaussian, 5 categorical columns), whole processes\n")
    print("| phase | nbspam | scikit-learn | ratio time | ratio memory |")
    print("|---|---|---|---|---|")
    for phase, r in results.items():
        (a, am), (b, bm) = r["nbspam"], r["scikit-learn"]
        print(
            f"| {phase} | {a:.1f} s, {am:.0f} MB | {b:.1f} s, {bm:.0f} MB "
            f"| {a / b:.2f} | {am / bm:.2f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
