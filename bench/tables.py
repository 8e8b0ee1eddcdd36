"""Cross-validated ROC AUC of nbspam's table models on Spambase, with the protocol of the peer
comparison: StratifiedKFold(5, shuffle=True, random_state=42) over the rows in file order,
pooled log-odds. Every fold's model (bin edges included) is fitted on its training part
only; auto chooses by an internal cross-validation of the training part alone (nested).

    python bench/tables.py ../shared/corpora/spambase/spambase.csv
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbspam.fit.metrics import roc_auc  # noqa: E402
from nbspam.fit.table_training import auto_fit  # noqa: E402
from nbspam.models.table_model import TableSettings, fit_table, subset  # noqa: E402
from nbspam.text.tables import read_table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cv import folds  # noqa: E402


def pooled(table, labels, splits, fit) -> tuple[np.ndarray, list[str]]:
    """Pooled out-of-fold log-odds, and what auto chose in each fold."""
    scores = np.zeros(len(labels))
    chosen = []
    for train, test in splits:
        model, info = fit(subset(table, train))
        jll = model.joint_log_likelihood(subset(table, test), Counter())
        p = model.positive_index
        scores[test] = jll[:, p] - jll[:, 1 - p]
        changed = len(info.get("columns", {}))
        chosen.append(f"{info['chose']} + {changed} columns otherwise" if info else "")
    return scores, chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("table", help="the Spambase CSV (57 numbers, then the label column)")
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--sklearn", action="store_true", help="also scikit-learn's models")
    args = parser.parse_args()
    table = read_table(args.table)
    base = TableSettings(label_column=args.label_column)
    labels = table.column(args.label_column)
    is_pos = np.array(labels) == "1"
    splits = folds(labels)
    gaussian = dataclasses.replace(base, kinds={"*": "gaussian"})
    candidates = {
        "gaussian": lambda t: (fit_table(t, gaussian), {}),
        "quantile bins: zero + quartiles": lambda t: (
            fit_table(t, dataclasses.replace(base, bins=4)),
            {},
        ),
        "bernoulli on x > 0": lambda t: (
            fit_table(t, dataclasses.replace(base, kinds={"*": "bernoulli"})),
            {},
        ),
        "auto (nested internal 5-fold CV)": lambda t: auto_fit(t, base),
    }
    print(f"{len(labels):,} rows; 5-fold stratified CV (random_state 42), pooled log-odds")
    for name, fit in candidates.items():
        started = time.perf_counter()
        scores, chosen = pooled(table, labels, splits, fit)
        took = time.perf_counter() - started
        note = f"  chose: {dict(Counter(chosen))}" if any(chosen) else ""
        print(f"nbspam {name:<36} ROC AUC {roc_auc(scores, is_pos):.4f}  {took:5.1f} s{note}")
    if args.sklearn:
        from sklearn.naive_bayes import CategoricalNB, GaussianNB

        X = np.array([[float(v) for v in row[:-1]] for row in table.rows])
        y = is_pos.astype(int)
        scores = np.zeros(len(y))
        for train, test in splits:
            model = GaussianNB().fit(X[train], y[train])
            jll = model.predict_joint_log_proba(X[test])
            scores[test] = jll[:, 1] - jll[:, 0]
        print(f"scikit-learn GaussianNB{'':<30} ROC AUC {roc_auc(scores, is_pos):.4f}")
        for train, test in splits:
            codes = np.zeros_like(X, dtype=np.int64)
            for j in range(X.shape[1]):
                x = X[train, j]
                edges = (
                    np.unique(np.quantile(x[x != 0], [0.25, 0.5, 0.75])) if (x != 0).any() else []
                )
                codes[:, j] = np.where(
                    X[:, j] == 0, 0, 1 + np.searchsorted(edges, X[:, j], "right")
                )
            model = CategoricalNB(min_categories=5).fit(codes[train], y[train])
            jll = model.predict_joint_log_proba(codes[test])
            scores[test] = jll[:, 1] - jll[:, 0]
        print(
            f"scikit-learn CategoricalNB, zero + quartiles{'':<9} ROC AUC {roc_auc(scores, is_pos):.4f}"
        )


if __name__ == "__main__":
    main()
