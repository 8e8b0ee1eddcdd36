"""Cross-validated accuracy of nbspam settings, with the protocol of the peer comparison.

Stratified 5-fold cross-validation (scikit-learn's StratifiedKFold(5, shuffle=True,
random_state=42)) over the message files sorted by path; scores are pooled log-odds.
Messages are tokenized once per tokenizer setting and each fold is fitted from counts.
Each fold's training part also gets the cutoffs `train` would give it (its own internal
cross-validation), and the false positives, false negatives and unsure messages at them are
counted. With --by-date the corpus is also split by date where its messages carry one
(SpamAssassin by the Date header, enron1 by the date in its file names): each label's older
half trains, the newer half is judged; a corpus without dates (SMS) gets a file-order split
instead, labelled as such: each label's first half in the corpus's order (its files sorted by
path) trains, its second half is judged. bogofilter is judged at its shipped cutoffs (ham up
to 0.45, spam from 0.99). With --train-cost each run's settings also train one model on the
whole corpus with `nbspam train` in a process of its own (one job), whose CPU seconds (user
and system) and terms kept and seen are printed.

    python bench/cv.py ../shared/corpora/spamassassin
    python bench/cv.py ../shared/corpora/enron1 --by-date --bogofilter
    python bench/cv.py ../shared/corpora/sms-spam-collection --set event-model=bernoulli --set mail=never
    python bench/cv.py CORPUS --sklearn       # also the scikit-learn CountVectorizer pipelines
    python bench/cv.py CORPUS --bogofilter    # also bogofilter, where Debian's package is installed
    python bench/cv.py CORPUS --variant "pairs:word-pairs=all" --train-cost
"""

from __future__ import annotations

import argparse
import datetime
import re
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
from nbspam.mail.headers import message_time  # noqa: E402
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


#: bogofilter's shipped cutoffs on its spamicity less 1/2: ham up to 0.45, spam from 0.99.
BOGOFILTER_CUTOFFS = (0.45 - 0.5, 0.99 - 0.5)


def report(
    name: str,
    scores: np.ndarray,
    is_spam: np.ndarray,
    seconds: float,
    cutoffs: np.ndarray | None = None,
) -> None:
    """One line: ranking measures on the messages scored (not NaN), and with ``cutoffs``
    (n, 2: the ham and spam cutoff each message was judged by) the false positives, false
    negatives and unsure messages at them; without, the errors at log-odds 0."""
    tested = ~np.isnan(scores)
    scores, is_spam = scores[tested], is_spam[tested]
    auc = roc_auc(scores, is_spam)
    r01, _ = recall_at_fpr(scores, is_spam, 0.001)
    r1, _ = recall_at_fpr(scores, is_spam, 0.01)
    ham = int((~is_spam).sum())
    if cutoffs is None:
        fp = int(((scores > 0) & ~is_spam).sum())
        fn = int(((scores <= 0) & is_spam).sum())
        decided = "at 0"
    else:
        ham_cut, spam_cut = cutoffs[tested, 0], cutoffs[tested, 1]
        spam_side, ham_side = scores >= spam_cut, scores < ham_cut
        fp = int((spam_side & ~is_spam).sum())
        fn = int((ham_side & is_spam).sum())
        unsure = int((~spam_side & ~ham_side).sum())
        decided = f"unsure {unsure:>4}"
    print(
        f"{name:<40} AUC {auc:.5f}  (1-ROCA)% {100 * (1 - auc):.3f}  R@0.1% {r01:.3f}  "
        f"R@1% {r1:.3f}  FP {fp:>3} ({100 * fp / max(ham, 1):.3f}% of {ham} ham)  FN {fn:>3}  "
        f"{decided}  {seconds:6.1f} s",
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


def nbspam_scores(data, labels, splits, values: dict) -> tuple[np.ndarray, np.ndarray]:
    """(log-odds, cutoffs): each split's test part scored by the model train fits on its
    training part, and judged by the cutoffs train fits there (an internal cross-validation
    of that part alone); with --event-model auto, the event model chosen there (nested),
    printed per split. Messages of no test part score NaN."""
    settings = resolve_settings(values, source="--set")
    X, terms = count_matrix(data, settings.tokenizer)
    y = np.array(labels, dtype=object)
    scores = np.full(len(labels), np.nan)
    cutoffs = np.full((len(labels), 2), np.nan)
    chosen = []
    first = first_copies(data)
    for train_idx, test_idx in splits:
        train_idx = train_idx[first[train_idx]]  # as train does, a repeated message counts once
        part = Tokenized([str(i) for i in train_idx], list(y[train_idx]), X[train_idx], terms)
        dated = header_times(data, settings.tokenizer.mail)[train_idx]
        choice = internal_cv(part, settings, times=None if np.isnan(dated).all() else dated)
        fold_settings = settings.replace(training=choice.training)
        if settings.training.event_model == AUTO:
            chosen.append(choice.chosen)
        model = fit(X[train_idx], list(y[train_idx]), terms, fold_settings, sorted_terms=True)
        _, log_odds = predict_matrix(model, X[test_idx][:, model.form.kept])
        scores[test_idx] = log_odds
        cutoffs[test_idx] = choice.rule.cutoffs if choice.rule.cutoffs else (0.0, 0.0)
    if chosen:
        print(f"  auto chose, split by split: {'; '.join(chosen)}", flush=True)
    return scores, cutoffs


_HEADER_TIMES: dict = {}


def header_times(data: list[bytes], mail: str) -> np.ndarray:
    """Each message's Date header as `train` reads it (NaN where none), once per setting."""
    if mail not in _HEADER_TIMES:
        found = [message_time(d, mail) for d in data]
        _HEADER_TIMES[mail] = np.array([np.nan if t is None else t for t in found])
    return _HEADER_TIMES[mail]


_DATE_IN_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})")


def message_times(paths: list[str], data: list[bytes]) -> np.ndarray | None:
    """Seconds since 1970 of each message (NaN where unknown): the date in its file name
    (enron1: 0001.1999-12-10.farmer.ham.txt), else its Date header; None where no message
    has one (SMS)."""
    times = header_times(data, "auto").copy()
    for i, path in enumerate(paths):
        named = _DATE_IN_NAME.search(Path(path).name)
        if named:
            day = datetime.date.fromisoformat(named.group(1))
            times[i] = datetime.datetime(
                day.year, day.month, day.day, tzinfo=datetime.UTC
            ).timestamp()
    return None if np.isnan(times).all() else times


def by_date(labels: list[str], times: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """One split: each label's older half (by time, then by path; undated messages left
    out) trains, its newer half is judged."""
    y = np.array(labels, dtype=object)
    train, test = [], []
    for label in sorted(set(labels)):
        idx = np.flatnonzero((y == label) & ~np.isnan(times))
        idx = idx[np.argsort(times[idx], kind="stable")]
        train.append(idx[: len(idx) // 2])
        test.append(idx[len(idx) // 2 :])
    return [(np.sort(np.concatenate(train)), np.sort(np.concatenate(test)))]


def file_order(labels: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """One split for a corpus without dates: each label's first half in the corpus's order
    (the files sorted by path) trains, its second half is judged."""
    y = np.array(labels, dtype=object)
    train, test = [], []
    for label in sorted(set(labels)):
        idx = np.flatnonzero(y == label)
        train.append(idx[: len(idx) // 2])
        test.append(idx[len(idx) // 2 :])
    return [(np.sort(np.concatenate(train)), np.sort(np.concatenate(test)))]


def train_cost(corpus: Path, values: dict) -> str:
    """CPU seconds (user + system) of `nbspam train` on the whole corpus with ``values``
    as its options (one job, a process of its own), and the model's terms kept and seen."""
    import resource
    import subprocess
    import tempfile

    from nbspam.api import load

    options = []
    for key, value in values.items():
        options += [f"--{key.replace('_', '-')}", str(value)]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "cost.nbm"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        command = [sys.executable, "-m", "nbspam", "train", str(corpus), "-o", str(out)]
        subprocess.run([*command, "-q", "--jobs", "1", *options], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        info = load(out).model.describe()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return (
        f"  train on all {info['messages']:,}: {cpu:.1f} CPU s, "
        f"terms {info['terms_kept']:,} kept of {info['terms_seen']:,} seen"
    )


def sklearn_scores(data, labels, splits, bernoulli: bool) -> np.ndarray:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import BernoulliNB, MultinomialNB

    texts = [d.decode("latin-1") for d in data]
    y = np.array([lab == "spam" for lab in labels])
    scores = np.full(len(labels), np.nan)
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
    scores = np.full(len(labels), np.nan)
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
    parser.add_argument(
        "--by-date",
        action="store_true",
        help="also split by date (each label's older half trains, the newer half is judged); "
        "without dates, by the files' order (each label's first half trains)",
    )
    parser.add_argument(
        "--train-cost",
        action="store_true",
        help="also train each run's settings on the whole corpus with `nbspam train` "
        "(one job) and print its CPU seconds and the model's terms",
    )
    args = parser.parse_args()

    paths, data, labels = load_corpus(args.corpus)
    is_spam = np.array([lab == "spam" for lab in labels])
    protocols = [("5 folds", folds(labels))]
    if args.by_date:
        times = message_times(paths, data)
        if times is None:
            protocols.append(
                ("file order: no dates; each label's first half trains", file_order(labels))
            )
        else:
            split = by_date(labels, times)
            undated = int(np.isnan(times).sum())
            protocols.append((f"by date ({undated} undated left out)", split))
    print(f"{args.corpus}: {len(paths)} messages, {is_spam.sum()} spam", flush=True)
    runs = [("nbspam " + " ".join(args.set), args.set)] if args.set or not args.variant else []
    for variant in args.variant:
        name, _, rest = variant.partition(":")
        runs.append((name, [s for s in rest.split(";") if s]))
    for protocol, splits in protocols:
        print(f"-- {protocol}", flush=True)
        for name, sets in runs:
            values = {}
            for item in sets:
                key, _, value = item.partition("=")
                values[key.replace("-", "_")] = yaml.safe_load(value)
            started = time.perf_counter()
            scores, cutoffs = nbspam_scores(data, labels, splits, values)
            report(name, scores, is_spam, time.perf_counter() - started, cutoffs)
            if args.train_cost and protocol == protocols[0][0]:
                print(train_cost(args.corpus, values), flush=True)
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
                fixed = np.tile(BOGOFILTER_CUTOFFS, (len(labels), 1))
                report(
                    "bogofilter, shipped defaults",
                    scores,
                    is_spam,
                    time.perf_counter() - started,
                    fixed,
                )


if __name__ == "__main__":
    main()
