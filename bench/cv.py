"""Cross-validated accuracy of nbspam settings, with the protocol of the peer comparison.

Stratified 5-fold cross-validation (scikit-learn's StratifiedKFold(5, shuffle=True,
random_state=42)) over the message files sorted by path; scores are pooled log-odds.
Messages are tokenized once per tokenizer setting and each fold is fitted from counts.

    python bench/cv.py ../shared/corpora/spamassassin
    python bench/cv.py ../shared/corpora/sms-spam-collection --set event-model=bernoulli --set mail=never
    python bench/cv.py CORPUS --sklearn       # also the scikit-learn CountVectorizer pipelines
    python bench/cv.py CORPUS --bogofilter    # also bogofilter, where Debian's package is installed
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbspam.core.settings import AUTO  # noqa: E402
from nbspam.fit.crossval import Tokenized  # noqa: E402
from nbspam.fit.metrics import recall_at_fpr, roc_auc  # noqa: E402
from nbspam.fit.run_settings import resolve_settings  # noqa: E402
from nbspam.fit.selection import internal_cv  # noqa: E402
from nbspam.models.model import fit, predict_matrix  # noqa: E402
from nbspam.text.features import Analyzer  # noqa: E402
from nbspam.text.vocabulary import TermIndex, count_rows, sorted_order  # noqa: E402


def load_corpus(root: Path) -> tuple[list[str], list[bytes], list[str]]:
    """Files below root/<label>/ sorted by path: (paths, raw bytes, labels)."""
    paths = sorted(p for p in root.glob("*/*") if p.is_file() and p.parent.name in ("ham", "spam"))
    return [str(p) for p in paths], [p.read_bytes() for p in paths], [p.parent.name for p in paths]


def folds(labels: list[str], k: int = 5) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import StratifiedKFold

    skf = StratifiedKFold(k, shuffle=True, random_state=42)
    return list(skf.split(np.zeros(len(labels)), labels))


def report(name: str, scores: np.ndarray, is_spam: np.ndarray, seconds: float) -> None:
    auc = roc_auc(scores, is_spam)
    r01, _ = recall_at_fpr(scores, is_spam, 0.001)
    r1, _ = recall_at_fpr(scores, is_spam, 0.01)
    fp = int(((scores > 0) & ~is_spam).sum())
    fn = int(((scores <= 0) & is_spam).sum())
    print(
        f"{name:<48} AUC {auc:.5f}  (1-ROCA)% {100 * (1 - auc):.3f}  R@0.1% {r01:.3f}  "
        f"R@1% {r1:.3f}  FP {fp:>3}  FN {fn:>3}  {seconds:6.1f} s",
        flush=True,
    )


_MATRICES: dict = {}


def count_matrix(data, tokenizer) -> tuple:
    """(X, terms) of the corpus for one tokenizer setting, computed once per setting."""
    if tokenizer not in _MATRICES:
        analyzer = Analyzer(tokenizer)
        index = TermIndex()
        X = count_rows((analyzer.tokens(d) for d in data), index)
        order = sorted_order(index.terms)
        _MATRICES[tokenizer] = (X[:, order].tocsr(), [index.terms[i] for i in order])
    return _MATRICES[tokenizer]


def first_copies(data: list[bytes]) -> np.ndarray:
    """Boolean mask (n,): the first copy of each distinct message; `nbspam train` counts a
    message repeated in its input once (SMS: 5,574 files, 5,171 distinct)."""
    seen: set[bytes] = set()
    mask = np.zeros(len(data), dtype=bool)
    for i, d in enumerate(data):
        if d not in seen:
            seen.add(d)
            mask[i] = True
    return mask


def nbspam_scores(data, labels, splits, values: dict) -> np.ndarray:
    """Each fold's test part scored by the model train fits on its training part; with
    --event-model auto, the event model chosen there (nested), printed per fold."""
    settings = resolve_settings(values, source="--set")
    X, terms = count_matrix(data, settings.tokenizer)
    y = np.array(labels, dtype=object)
    scores = np.zeros(len(labels))
    chosen = []
    first = first_copies(data)
    for train_idx, test_idx in splits:
        train_idx = train_idx[first[train_idx]]  # as train does, a repeated message counts once
        fold_settings = settings
        if settings.training.event_model == AUTO:
            part = Tokenized([str(i) for i in train_idx], list(y[train_idx]), X[train_idx], terms)
            choice = internal_cv(part, settings)
            fold_settings = dataclasses.replace(settings, training=choice.training)
            chosen.append(choice.chosen)
        model = fit(X[train_idx], list(y[train_idx]), terms, fold_settings, sorted_terms=True)
        _, log_odds = predict_matrix(model, X[test_idx][:, model.form.kept])
        scores[test_idx] = log_odds
    if chosen:
        print(f"  auto chose, fold by fold: {'; '.join(chosen)}", flush=True)
    return scores


def sklearn_scores(data, labels, splits, bernoulli: bool) -> np.ndarray:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import BernoulliNB, MultinomialNB

    texts = [d.decode("latin-1") for d in data]
    y = np.array([lab == "spam" for lab in labels])
    scores = np.zeros(len(labels))
    for train_idx, test_idx in splits:
        vec = CountVectorizer()
        Xtr = vec.fit_transform([texts[i] for i in train_idx])
        clf = (BernoulliNB() if bernoulli else MultinomialNB()).fit(Xtr, y[train_idx])
        jll = clf.predict_joint_log_proba(vec.transform([texts[i] for i in test_idx]))
        scores[test_idx] = jll[:, 1] - jll[:, 0]
    return scores


def bogofilter_scores(paths, labels, splits) -> np.ndarray | None:
    """bogofilter's spamicity of each message, less 1/2 (so that > 0 is its spam side), from
    a word list trained afresh on each fold's training part (-s and -n, in bulk) and -TT (16
    significant digits) on its test part; None where bogofilter is not installed."""
    import shutil
    import subprocess
    import tempfile

    if shutil.which("bogofilter") is None:
        return None
    is_spam = np.array([lab == "spam" for lab in labels])
    scores = np.zeros(len(labels))
    for train_idx, test_idx in splits:
        with tempfile.TemporaryDirectory() as wordlist:
            for flag, chosen in (
                ("-s", train_idx[is_spam[train_idx]]),
                ("-n", train_idx[~is_spam[train_idx]]),
            ):
                for i in range(0, len(chosen), 500):
                    files = [paths[j] for j in chosen[i : i + 500]]
                    subprocess.run(["bogofilter", "-d", wordlist, flag, "-B", *files], check=True)
            for i in range(0, len(test_idx), 500):
                chunk = test_idx[i : i + 500]
                out = subprocess.run(
                    ["bogofilter", "-d", wordlist, "-TT", "-v", "-B", *[paths[j] for j in chunk]],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout
                spamicity = {line.split()[0]: float(line.split()[-1]) for line in out.splitlines()}
                scores[chunk] = [spamicity[paths[j]] - 0.5 for j in chunk]
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("corpus", type=Path)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting (YAML value); give several --set for one run",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE;...",
        help="a named run with its own settings (repeatable)",
    )
    parser.add_argument(
        "--sklearn", action="store_true", help="also run the scikit-learn pipelines"
    )
    parser.add_argument(
        "--bogofilter",
        action="store_true",
        help="also run bogofilter (Debian's package) with its shipped defaults, if installed",
    )
    args = parser.parse_args()

    paths, data, labels = load_corpus(args.corpus)
    is_spam = np.array([lab == "spam" for lab in labels])
    splits = folds(labels)
    print(f"{args.corpus}: {len(paths)} messages, {is_spam.sum()} spam", flush=True)
    runs = [("nbspam " + " ".join(args.set), args.set)] if args.set or not args.variant else []
    for variant in args.variant:
        name, _, rest = variant.partition(":")
        runs.append((name, [s for s in rest.split(";") if s]))
    for name, sets in runs:
        values = {}
        for item in sets:
            key, _, value = item.partition("=")
            values[key.replace("-", "_")] = yaml.safe_load(value)
        started = time.perf_counter()
        scores = nbspam_scores(data, labels, splits, values)
        report(name, scores, is_spam, time.perf_counter() - started)
    if args.sklearn:
        for bern in (False, True):
            started = time.perf_counter()
            scores = sklearn_scores(data, labels, splits, bern)
            report(
                f"sklearn CountVectorizer + {'Bernoulli' if bern else 'Multinomial'}NB",
                scores,
                is_spam,
                time.perf_counter() - started,
            )
    if args.bogofilter:
        started = time.perf_counter()
        scores = bogofilter_scores(paths, labels, splits)
        if scores is None:
            print("bogofilter: not installed (apt-get install bogofilter), skipped", flush=True)
        else:
            report("bogofilter, shipped defaults", scores, is_spam, time.perf_counter() - started)


if __name__ == "__main__":
    main()
