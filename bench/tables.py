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

from nbspam.core.settings import Settings  # noqa: E402
from nbspam.fit.metrics import roc_auc  # noqa: E402
from nbspam.fit.table_training import fit_with_rule, table_rule  # noqa: E402
from nbspam.models.table_model import TableSettings, subset  # noqa: E402
from nbspam.text.tables import read_table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cv import folds  # noqa: E402


def pooled(table, labels, splits, fit) -> tuple[np.ndarray, np.ndarray, list[str], list]:
    """Pooled out-of-fold log-odds, the verdicts of each fold's model (by its own cutoffs:
    1 positive, 0 negative, -1 unsure), what auto chose in each fold, and the cutoffs."""
    scores = np.zeros(len(labels))
    verdicts = np.zeros(len(labels), dtype=np.int64)
    chosen, cutoffs = [], []
    for train, test in splits:
        model = fit(subset(table, train))
        info = model.info.get("auto", {})
        jll = model.joint_log_likelihood(subset(table, test), Counter())
        p = model.positive_index
        scores[test] = jll[:, p] - jll[:, 1 - p]
        low, high = model.cutoffs or (0.0, 0.0)
        cutoffs.append((low, high))
        verdicts[test] = (
            np.where(scores[test] >= high, 1, np.where(scores[test] < low, 0, -1))
            if model.cutoffs
            else (scores[test] > 0).astype(np.int64)
        )
        changed = len(info.get("columns", {}))
        chosen.append(f"{info['chose']} + {changed} columns otherwise" if info else "")
    return scores, verdicts, chosen, cutoffs


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
    cfg = table_rule(Settings())  # train's defaults for a table: its own decision rule
    gaussian = dataclasses.replace(base, kinds={"*": "gaussian"})
    candidates = {
        "gaussian": (gaussian, False),
        "quantile bins: zero + quartiles": (dataclasses.replace(base, bins=4), False),
        "bernoulli on x > 0": (dataclasses.replace(base, kinds={"*": "bernoulli"}), False),
        "auto (nested internal 5-fold CV)": (base, True),
    }
    print(f"{len(labels):,} rows; 5-fold stratified CV (random_state 42), pooled log-odds;")
    print("verdicts by each fold's own cutoffs (train's defaults), accuracy of the sure ones")
    for name, (settings, auto) in candidates.items():
        started = time.perf_counter()
        scores, verdicts, chosen, cutoffs = pooled(
            table,
            labels,
            splits,
            lambda t, s=settings, a=auto: fit_with_rule(t, s, auto=a, cfg=cfg),
        )
        took = time.perf_counter() - started
        sure = verdicts >= 0
        accuracy = float((verdicts[sure] == is_pos[sure]).mean())
        bayes = float(((scores > 0) == is_pos).mean())
        spam_cut = max(c[1] for c in cutoffs)
        note = f"  chose: {dict(Counter(chosen))}" if any(chosen) else ""
        print(
            f"nbspam {name:<36} ROC AUC {roc_auc(scores, is_pos):.4f}  accuracy {accuracy:.3f}  "
            f"unsure {1 - sure.mean():.1%}  (Bayes {bayes:.3f}; highest spam cutoff "
            f"{spam_cut:+,.1f})  {took:5.1f} s{note}"
        )
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
