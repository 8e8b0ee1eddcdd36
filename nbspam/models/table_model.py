"""The `TableModel`: naive Bayes over the columns of a table, whose joint log-likelihood adds
the log prior and every column's log P(x_a | c) (`columns`); its exact statistics, learning
and forgetting rows, explaining them and merging. Its model file is `store.tablefile`'s.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..core.settings import MAX_LABELS, TokenizerConfig
from ..errors import ConfigError, InputError, TrainingError
from ..text.tables import (
    DEFAULT_BINS,
    RowIds,
    Table,
    Words,
    detect_kind,
    parse_number,
)
from . import columns as col
from . import naive_bayes as nb
from .decision import UNSURE

# --------------------------------------------------------------------------------------------
# Columns
# --------------------------------------------------------------------------------------------


@dataclass
class TextStats:
    """A text column: per class the rows with text (C,) and, for each term, the rows of each
    class holding it (C,)."""

    rows: list[int]
    terms: dict[str, list[int]]

    def add(self, c: int, tokens: Iterable[str], sign: int = 1) -> None:
        self.rows[c] += sign
        for term in set(tokens):
            counts = self.terms.setdefault(term, [0] * len(self.rows))
            counts[c] += sign
            if sign < 0 and not any(counts):
                del self.terms[term]


@dataclass
class Column:
    """One column of a TableModel: its name, kind, statistics, and for a binned column the
    bin edges (``zero_bin``: exact zero is a bin of its own, the others cut the rest)."""

    name: str
    kind: str
    stats: Any = None
    edges: list[float] | None = None
    zero_bin: bool = False

    def value(self, cell: str, where: str, analyzer: Any = None) -> Any:
        """A cell as this column scores it: a float (NaN missing), a category ('' missing)
        or a list of tokens."""
        if self.kind == "gaussian":
            return parse_number(cell, where, self.name)
        if self.kind == "bernoulli":
            x = parse_number(cell, where, self.name)
            return "" if math.isnan(x) else ("1" if x > 0 else "0")
        if self.kind == "text":
            return analyzer.tokens(cell) if cell else []
        if self.edges is not None:
            x = parse_number(cell, where, self.name)
            return "" if math.isnan(x) else bin_of(x, self.edges, self.zero_bin)
        return cell

    def bin_range(self, category: str) -> str:
        """The values a bin holds, as text."""
        if self.edges is None:
            return category
        if category == "z":
            return "= 0"
        k, e = int(category), self.edges
        lo = "-inf" if k == 0 else f"{e[k - 1]:.6g}"
        hi = "inf" if k == len(e) else f"{e[k]:.6g}"
        return f"[{lo}, {hi})"


def bin_of(x: float, edges: Sequence[float], zero_bin: bool) -> str:
    """The bin of x: 'z' for zero with a zero bin, else the number of edges at or below x."""
    if zero_bin and x == 0:
        return "z"
    lo, hi = 0, len(edges)
    while lo < hi:
        mid = (lo + hi) // 2
        if edges[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return str(lo)


def bin_edges(values: np.ndarray, bins: int, binning: str) -> tuple[list[float], bool]:
    """(edges, zero_bin) cutting ``values`` (missing dropped) into ``bins`` bins.

    uniform: bins - 1 equally spaced edges between the smallest and the largest value.
    quantile: where the column holds zeros (as counts and frequencies do), zero is a bin of
    its own and the other values are cut at their quantiles into ``bins`` bins (Spambase's
    "zero plus quartiles" with 4); edges that coincide are merged."""
    values = values[~np.isnan(values)]
    if binning == "uniform":
        if not values.size:
            return [], False
        lo, hi, t = values.min(), values.max(), np.arange(1, bins) / bins
        edges = lo * (1 - t) + hi * t  # not lo + (hi - lo) t: hi - lo may overflow
        return sorted(set(edges.tolist())), False
    zero_bin = bool((values == 0).any())
    rest = values[values != 0] if zero_bin else values
    if not rest.size:
        return [], zero_bin
    with np.errstate(invalid="ignore", over="ignore"):  # between ±1.7e308: inf or NaN
        edges = np.quantile(rest, np.arange(1, bins) / bins)
    return sorted(set(edges[np.isfinite(edges)].tolist())), zero_bin


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


@dataclass
class TableModel:
    """Naive Bayes over the columns of a table.

    labels (C,) sorted; class_count (C,) rows per class; columns in table order (kind
    'ignore' kept, so that a table is read by name). J_c = log pi_c + sum_a log P(x_a | c)
    with the fitted prior pi_c = N_c / N."""

    labels: tuple[str, ...]
    class_count: list[int]
    columns: list[Column]
    label_column: str
    alpha: float = 1.0
    positive: str | None = None
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    info: dict[str, Any] = field(default_factory=dict)
    cutoffs: tuple[float, float] | None = None
    """Two classes: the (negative, positive) cutoffs on the log-odds, as a Model's."""
    calibration: tuple[float, float] | None = None
    """Two classes: the Platt calibration (a, b), as a Model's."""
    prior: Any = "fitted"
    """The class prior, as a Model's (--prior): 'fitted' (N_c / N), 'uniform' or
    ((label, weight), ...)."""
    notes: list[str] = field(default_factory=list, repr=False, compare=False)
    """What training has to say of the table (not kept in the model file)."""

    @property
    def is_binary(self) -> bool:
        return len(self.labels) == 2

    @property
    def positive_index(self) -> int:
        return self.labels.index(self.positive) if self.positive else len(self.labels) - 1

    def analyzer(self) -> Any:
        from ..text.features import Analyzer

        return Analyzer(self.tokenizer)

    def epsilon(self) -> float:
        """The variance floor: `columns.VAR_SMOOTHING` times the largest total variance of
        a Gaussian column (0 without one)."""
        variances = [c.stats.total_var() for c in self.columns if c.kind == "gaussian"]
        return col.VAR_SMOOTHING * max(variances, default=0.0)

    def gaussian_params(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per Gaussian column (mu (C,), sigma2 + epsilon (C,))."""
        eps = self.epsilon()
        out = {}
        for c in self.columns:
            if c.kind == "gaussian":
                mu, var = c.stats.mean_var()
                out[c.name] = (mu, var + eps)
        return out

    def log_prior(self) -> np.ndarray:
        """log pi_c (C,): fitted N_c / N, or the weights of --prior normalised."""
        if self.prior != "fitted":
            return nb.class_log_prior(
                np.array(self.class_count, dtype=np.float64),
                nb.prior_weights(self.prior, self.labels),
            )
        counts = np.array(self.class_count, dtype=np.float64)
        return np.log(counts) - np.log(counts.sum())

    def column_log_likelihoods(
        self, table: Table, unseen: Counter | None = None
    ) -> tuple[list[str], list[np.ndarray]]:
        """(names, log P(x_a | c) (n, C) for each scored column) of a table's rows. Values
        of a categorical column never seen in training add nothing (counted in ``unseen``
        per column)."""
        names, parts = [], []
        for name, part in self.column_parts(table, unseen):
            names.append(name)
            parts.append(part)
        return names, parts

    def column_parts(
        self, table: Table, unseen: Counter | None = None, columns: Iterable[Column] | None = None
    ) -> Iterator[tuple[str, np.ndarray]]:
        """(name, log P(x_a | c) (n, C)) of each scored column (of ``columns``, some of the
        model's), one at a time, as `column_log_likelihoods` gives them."""
        missing = [c.name for c in self.columns if c.kind != "ignore" and not table.has(c.name)]
        if missing:
            raise InputError(f"the table lacks the model's column {missing[0]!r}")
        columns = self.columns if columns is None else list(columns)
        analyzer = self.analyzer() if any(c.kind == "text" for c in columns) else None
        gauss = self.gaussian_params() if any(c.kind == "gaussian" for c in columns) else {}
        for column in columns:
            if column.kind == "ignore":
                continue
            if column.kind == "gaussian":
                mu, var = gauss[column.name]
                part = col.gaussian_log_likelihood(column_numbers(column, table), mu, var)
            elif column.kind == "text":
                values = [
                    analyzer.tokens(cell) if cell else [] for cell in table.column(column.name)
                ]
                part = _text_log_likelihood(column.stats, values, self.alpha)
            else:
                part = _categorical_log_likelihood(column, table, self.alpha, unseen)
            yield column.name, part

    def joint_log_likelihood(self, table: Table, unseen: Counter | None = None) -> np.ndarray:
        """J (n, C): the log prior plus every column's log-likelihood (added in column
        order, one column held at a time)."""
        total = np.zeros((len(table), len(self.labels)))
        for _, part in self.column_parts(table, unseen):
            total += part
        return self.log_prior()[None, :] + total

    # -- the model interface (`interface.NaiveBayesModel`) ------------------------------------

    kind: ClassVar[str] = "table"

    def predict(
        self, tables: Table | Iterable[Table], unseen: Counter | None = None
    ) -> Iterator[Any]:
        """A `decision.Prediction` per row of each table (its ``id`` PATH#LINE), as
        `predict` prints them. Categories never seen in training are counted in
        ``unseen`` (`column_log_likelihoods`)."""
        for table in [tables] if isinstance(tables, Table) else tables:
            yield from self.predict_table(table, unseen)

    def explain(self, tables: Table | Iterable[Table] | None = None, **options: Any) -> Any:
        """Without tables, each column's statistics (`column_statistics`); with them, each
        row's log-odds as a bias plus one contribution per column (`explain_rows`)."""
        if tables is None:
            return column_statistics(self)
        return (
            e
            for table in ([tables] if isinstance(tables, Table) else tables)
            for e in explain_rows(self, table)
        )

    def merge(self, others: Sequence[TableModel]) -> TableModel:
        """`merge_table_models` of this model and ``others``."""
        return merge_table_models([self, *others])

    def describe(self) -> dict[str, Any]:
        """What `info` shows: rows per class, positive class, label column, each column's
        kind (and bin edges), alpha, decision rule and history."""
        return {
            "kind": self.kind,
            "labels": {label: int(n) for label, n in zip(self.labels, self.class_count)},
            "positive": self.positive if self.is_binary else None,
            "label_column": self.label_column,
            "columns": [
                {"column": c.name, "kind": c.kind, **({"bin_edges": c.edges} if c.edges else {})}
                for c in self.columns
            ],
            "alpha": self.alpha,
            "prior": self.prior if isinstance(self.prior, str) else dict(self.prior),
            "cutoffs": None if self.cutoffs is None else list(self.cutoffs),
            "calibration": None if self.calibration is None else list(self.calibration),
            "history": self.info,
        }

    def text_columns(self) -> set[str]:
        """The columns whose cells scoring reads as text (categories, tokens), not numbers:
        `text.tables.read_table` need keep no other column's text."""
        return {
            c.name for c in self.columns if c.kind in ("categorical", "text") and c.edges is None
        }

    def predict_table(self, table: Table, unseen: Counter | None = None) -> Iterator[Any]:
        """A `decision.Prediction` per row of one table."""
        for block in self.predict_blocks(table, unseen):
            yield from block

    def predict_blocks(self, table: Table, unseen: Counter | None = None) -> Iterator[Any]:
        """The predictions of one table's rows as `decision.Predictions`, `PREDICT_ROWS`
        rows a block, each value as `decision.prediction` gives it for one row (the
        posteriors exponentiated by `math.exp`, the verdicts and calibrated probabilities
        by the same operations on arrays)."""
        from .decision import Predictions

        jll = self.joint_log_likelihood(table, unseen)
        positive = self.positive_index if self.is_binary else None
        log_post, log_odds = posteriors(jll, positive)
        for start in range(0, len(table), PREDICT_ROWS):
            rows = slice(start, start + PREDICT_ROWS)
            ids = table.ids
            ids = ids.part(rows) if isinstance(ids, RowIds) else ids[rows]
            probs = [list(map(math.exp, p.tolist())) for p in log_post[rows].T]
            if log_odds is None:
                best = np.argmax(log_post[rows], axis=1).tolist()
                yield Predictions(ids, self.labels, best, probs)
                continue
            s = log_odds[rows]
            side = _sides(s, self.cutoffs)
            best = np.where(s > 0, positive, 1 - positive).tolist()
            names = np.array([self.labels[1 - positive], UNSURE, self.positive], dtype=object)
            yield Predictions(
                ids,
                self.labels,
                best,
                probs,
                s.tolist(),
                names[side + 1].tolist(),
                None if self.calibration is None else _calibrated(s, side, self.calibration),
                self.positive,
            )


PREDICT_ROWS = 1 << 16
"""Rows are predicted (and printed) a block of this many at a time."""


def _sides(log_odds: np.ndarray, cutoffs: tuple[float, float] | None) -> np.ndarray:
    """Each row's verdict as `decision.verdict` gives it, -1 negative, 0 unsure, 1 positive."""
    if cutoffs is None or cutoffs == (0.0, 0.0):
        return np.where(log_odds > 0, 1, -1)
    ham, spam = cutoffs
    return np.where(log_odds >= spam, 1, np.where(log_odds < ham, -1, 0))


def _calibrated(
    log_odds: np.ndarray, side: np.ndarray, calibration: tuple[float, float]
) -> list[float]:
    """`decision.calibrated_probability` of each row: the same floating-point operations,
    each exponential by `math.exp`, so that every value is the one row by row."""
    a, b = calibration
    z = a * log_odds + b
    e = np.array(list(map(math.exp, (-np.abs(z)).tolist())), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        p = np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    p = np.where(side > 0, np.maximum(p, 0.5), np.where(side < 0, np.minimum(p, 0.5), p))
    return p.tolist()


def posteriors(jll: np.ndarray, positive: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(log posteriors (n, C) (`naive_bayes.log_posterior`), log-odds J_pos - J_neg (n,) or
    None)."""
    log_post = nb.log_posterior(jll)
    if positive is None:
        return log_post, None
    return log_post, jll[:, positive] - jll[:, 1 - positive]


def _categorical_log_likelihood(
    column: Column, table: Table, alpha: float, unseen: Counter | None
) -> np.ndarray:
    stats = column.stats
    logp = col.categorical_log_prob(stats.matrix(), alpha)  # (C, K)
    names, codes = column_categories(column, table)
    where = np.array([stats.index.get(name, -1) for name in names] + [-1], dtype=np.int64)
    j = where[codes]  # codes -1 (missing) take the last: -1
    if unseen is not None and (where[:-1] < 0).any():
        seen = np.bincount(codes[codes >= 0], minlength=len(names)).tolist()
        for name, k, n in zip(names, where.tolist(), seen):
            if k < 0 and n:
                unseen[(column.name, name)] += n
    logp = np.concatenate([logp, np.zeros((logp.shape[0], 1))], axis=1)  # -1: adds nothing
    return logp[:, j].T


def text_log_prob(stats: TextStats, alpha: float) -> tuple[list[str], np.ndarray]:
    """(terms, log theta (C, V)): theta_tc = (df_tc + alpha) / (sum_t df_tc + alpha V)."""
    terms = sorted(stats.terms)
    df = np.array([stats.terms[t] for t in terms], dtype=np.float64).T.reshape(len(stats.rows), -1)
    alpha = max(alpha, 1e-10)
    return terms, np.log(df + alpha) - np.log(df.sum(axis=1, keepdims=True) + alpha * len(terms))


def _text_log_likelihood(stats: TextStats, values: list[list[str]], alpha: float) -> np.ndarray:
    terms, logp = text_log_prob(stats, alpha)
    where = {t: k for k, t in enumerate(terms)}
    out = np.zeros((len(values), len(stats.rows)))
    for i, tokens in enumerate(values):
        ks = [where[t] for t in set(tokens) if t in where]
        if ks:
            out[i] = logp[:, ks].sum(axis=1)
    return out


# --------------------------------------------------------------------------------------------
# Training, learning and forgetting
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSettings:
    """How a table is modelled: the label column, kinds given by --column, --bins and
    --binning for the continuous columns, --alpha, --positive and the tokenizer."""

    label_column: str = "label"
    kinds: dict[str, str] = field(default_factory=dict)
    bins: int | None = None
    binning: str = "quantile"
    alpha: float = 1.0
    positive: str | None = None
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    prior: Any = "fitted"


def given_kinds(patterns: dict[str, str], names: Iterable[str]) -> dict[str, str]:
    """The kind --column gives each of ``names`` that it names: that of the last NAME (or
    pattern) matching it. Linear in the names: a NAME without *, ? or [ is looked up, and
    only the patterns are matched against every name."""
    order = {pattern: i for i, pattern in enumerate(patterns)}
    globs = [p for p in patterns if any(ch in p for ch in "*?[")]
    kinds = list(patterns.values())
    out = {}
    for name in names:
        last = max(
            [order.get(name, -1), *(order[g] for g in globs if fnmatch.fnmatchcase(name, g))]
        )
        if last >= 0:
            out[name] = kinds[last]
    return out


def choose_kinds(table: Table, settings: TableSettings, path: str) -> dict[str, str]:
    """The kind of each column but the label's: --column where given, else detected; a
    column named 'id' is ignored."""
    for pattern in settings.kinds:
        if not (table.has(pattern) or fnmatch.filter(table.names, pattern)):
            raise ConfigError(f"--column {pattern}: the table has no such column")
    given = given_kinds(settings.kinds, table.names)
    kinds = {}
    for name in table.names:
        if name == settings.label_column:
            continue
        if name in given:
            kinds[name] = given[name]
        elif name.lower() == "id":
            kinds[name] = "ignore"
        else:
            kinds[name] = detect_kind(table, name)
    return kinds


def fit_table(table: Table, settings: TableSettings, path: str = "the table") -> TableModel:
    """Train a TableModel on a table: its columns (`empty_model`), then every row added
    (`add_rows`)."""
    model = empty_model(table, settings, path)
    add_rows(model, table, +1)
    return model


def empty_model(table: Table, settings: TableSettings, path: str = "the table") -> TableModel:
    """The TableModel of a table with no row counted yet: its labels, the kinds of its
    columns (`choose_kinds`) and the bin edges of the continuous columns with --bins."""
    if not table.has(settings.label_column):
        raise InputError(
            f"{path}: no label column {settings.label_column!r} (columns: "
            f"{', '.join(table.names[:8])}{' ...' if len(table.names) > 8 else ''}); "
            "name it with --label-column"
        )
    if settings.bins is not None and settings.bins < 1:
        raise ConfigError("--bins must be at least 1")
    y_cells = table.column(settings.label_column)
    labels = tuple(sorted({v for v in y_cells if v}))
    if len(labels) < 2:
        raise TrainingError(f"need rows of at least two labels to train, found {list(labels)}")
    _check_label_count(labels, settings.label_column)
    positive = settings.positive
    if positive is not None and positive not in labels:
        raise TrainingError(f"--positive {positive!r} is not one of the labels {list(labels)}")
    if len(labels) == 2 and positive is None:
        positive = "spam" if "spam" in labels else ("1" if "1" in labels else labels[-1])
    nb.prior_weights(settings.prior, labels)  # names the labels it must
    kinds = choose_kinds(table, settings, path)
    columns = []
    for name, kind in kinds.items():
        column = Column(name, kind)
        if kind == "binned" or (kind == "gaussian" and settings.bins is not None):
            x = table.numbers(name)
            column.kind = "categorical"
            bins = settings.bins or DEFAULT_BINS
            edges, zero_bin = bin_edges(x, bins, settings.binning)
            column.edges, column.zero_bin = edges, zero_bin
        columns.append(column)
    C = len(labels)
    for column in columns:
        column.stats = empty_stats(column.kind, C)
    model = TableModel(
        labels=labels,
        class_count=[0] * C,
        columns=columns,
        label_column=settings.label_column,
        alpha=settings.alpha,
        positive=positive,
        tokenizer=settings.tokenizer,
        prior=settings.prior,
    )
    return model


def _check_label_count(labels: Sequence[str], label_column: str) -> None:
    """Refuse more labels than a model holds (`settings.MAX_LABELS`, as for messages): a
    categorical column's counts are labels times categories, so a label column of distinct
    values (an id, say) would make the model grow as the square of the rows."""
    if len(labels) > MAX_LABELS:
        raise TrainingError(
            f"found {len(labels):,} labels in column {label_column!r}; a model holds at most "
            f"{MAX_LABELS:,} (is the label column another? name it with --label-column)"
        )


def add_rows(model: TableModel, table: Table, sign: int) -> int:
    """Learn (sign 1) or forget (sign -1) every labelled row of a table, in place; returns
    the rows counted. Exact: forgetting rows learned gives back the same statistics. Each
    column is counted in bulk (`column_counts`)."""
    if not table.has(model.label_column):
        raise InputError(f"the table has no label column {model.label_column!r}")
    missing = [c.name for c in model.columns if c.kind != "ignore" and not table.has(c.name)]
    if missing:
        raise InputError(f"the table lacks the model's column {missing[0]!r}")
    ys = classes_of(model, table)
    if not (ys >= 0).all():
        table = subset(table, np.flatnonzero(ys >= 0))
        ys = ys[ys >= 0]
    for column in model.columns:
        if column.kind != "ignore":
            column.stats = column_counts(model, column, table, ys, sign)
    for c, n in enumerate(np.bincount(ys, minlength=len(model.labels)).tolist()):
        model.class_count[c] += sign * n
    if sign < 0 and not _non_negative(model):
        raise InputError("these rows were not all learned by the model: nothing forgotten")
    return len(ys)


def classes_of(model: TableModel, table: Table) -> np.ndarray:
    """Each row's class as its place among the model's labels (n,), -1 where it has none."""
    names, codes = table_categories(table, model.label_column)
    present = np.bincount(codes[codes >= 0], minlength=len(names)).tolist()
    for label, n in zip(names, present):
        if n and label not in model.labels:
            raise InputError(f"label {label!r} is not one of the model's {list(model.labels)}")
    where = {label: c for c, label in enumerate(model.labels)}
    index = np.array([where.get(v, -1) for v in names] + [-1], dtype=np.int64)
    return index[codes]


def column_counts(
    model: TableModel, column: Column, table: Table, ys: np.ndarray, sign: int
) -> Any:
    """A column's statistics with the rows of ``table`` (every one labelled, of classes
    ``ys``) added (sign 1) or taken away (-1), in bulk: Gaussian sums by `columns.exact_sums`,
    counts of categories by one bincount."""
    C, stats = len(model.labels), column.stats
    if column.kind == "text":
        analyzer = model.analyzer()
        for c, cell in zip(ys.tolist(), table.column(column.name)):
            stats.add(c, analyzer.tokens(cell) if cell else [], sign)
        return stats
    if column.kind == "gaussian":
        x = check_range(column, table)
        ok = ~np.isnan(x)
        return stats.combine(col.Gaussian.of(x[ok], ys[ok], C), sign)
    names, codes = column_categories(column, table)
    present = np.bincount(codes[codes >= 0], minlength=len(names)).tolist()
    for j, name in enumerate(names):
        if present[j] and name not in stats.index and (sign < 0 or stats.fixed):
            i = int(np.flatnonzero(codes == j)[0])
            raise InputError(f"{table.ids[i]}: {column.name}={name!r} was never learned")
    return stats.combine(category_counts(names, codes, ys, C), sign)


def check_range(column: Column, table: Table) -> np.ndarray:
    """A Gaussian column's numbers, every one within ±`columns.MAX_VALUE`: the first beyond
    is an InputError naming its row."""
    x = column_numbers(column, table)
    big = np.flatnonzero(np.abs(x) > col.MAX_VALUE)
    if big.size:
        i = int(big[0])
        raise InputError(
            f"{table.ids[i]}, column {column.name!r}: {table.cell(i, column.name)[:40]} "
            "is beyond ±1e150, the range of a gaussian column; rescale the column (its "
            f"logarithm, say) or give --column {column.name}=binned"
        )
    return x


def category_counts(names: list[str], codes: np.ndarray, ys: np.ndarray, C: int) -> Any:
    """The `columns.Categorical` of rows of categories ``codes`` (places in ``names``, -1
    missing) and classes ``ys``."""
    ok = codes >= 0
    K = len(names)
    counts = np.bincount(ys[ok] * K + codes[ok], minlength=C * K).reshape(C, K)
    return col.Categorical(names, counts.tolist())


def empty_stats(kind: str, classes: int) -> Any:
    """The statistics of a column of this kind with no row counted."""
    if kind == "gaussian":
        return col.Gaussian.empty(classes)
    if kind == "bernoulli":
        return col.Categorical.empty(classes, ["0", "1"])
    if kind == "categorical":
        return col.Categorical.empty(classes)
    if kind == "text":
        return TextStats([0] * classes, {})
    return None


def column_numbers(column: Column, table: Table) -> np.ndarray:
    """A numeric column's cells as floats (NaN missing), each read as `parse_number` does."""
    return table.numbers(column.name)


def column_categories(column: Column, table: Table) -> tuple[list[str], np.ndarray]:
    """(the categories of a column's cells in order of first appearance, each row's category
    as its place among them (-1 missing)), the categories as `Column.value` gives them:
    the cells of a categorical column, '0'/'1' of a Bernoulli one, the bins of a binned one."""
    if column.kind == "categorical" and column.edges is None:
        return table_categories(table, column.name)
    return number_categories(column, column_numbers(column, table))


def table_categories(table: Table, name: str) -> tuple[list[str], np.ndarray]:
    """The distinct cells of a column but '' in order of first appearance, and each row's
    place among them (-1 where empty), as the table keeps them (`tables.Words`): a part of
    the table keeps the categories of the whole (some perhaps in none of its rows)."""
    return table.categories(name)


def number_categories(column: Column, x: np.ndarray) -> tuple[list[str], np.ndarray]:
    """`column_categories` of a Bernoulli or binned column from its numbers x (NaN missing)."""
    if column.kind == "bernoulli":
        value = (x > 0).astype(np.int64)
    else:
        value = bin_places(x, column.edges)
        if column.zero_bin:
            value[x == 0] = -1  # the bin 'z'
    present = ~np.isnan(x)
    if len(x) <= col.SMALL:  # fewer values than numpy's calls cost
        seen: dict[int, int] = {}
        codes = [
            seen.setdefault(v, len(seen)) if ok else -1
            for v, ok in zip(value.tolist(), present.tolist())
        ]
        return ["z" if v < 0 else str(v) for v in seen], np.array(codes, dtype=np.int64)
    whole = bool(present.all())  # no number missing: no mask to copy through
    shifted = (value if whole else value[present]) + 1  # 0 the bin 'z', else the bin + 1
    size = int(shifted.max()) + 1 if len(shifted) else 0
    if size > FEW_BINS:
        distinct, first, inverse = np.unique(shifted, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        found = rank[inverse.reshape(-1)]
    else:  # a pass per bin, not a sort; each value's place by one lookup
        distinct = np.flatnonzero(np.bincount(shifted, minlength=size))
        first = np.array([np.argmax(shifted == v) for v in distinct.tolist()], dtype=np.int64)
        order = np.argsort(first, kind="stable")
        place = np.zeros(size, dtype=np.int64)
        place[distinct[order]] = np.arange(len(order))
        found = place[shifted]
    if whole:
        codes = found
    else:
        codes = np.full(len(x), -1, dtype=np.int64)
        codes[present] = found
    names = ["z" if v == 0 else str(v - 1) for v in distinct[order].tolist()]
    return names, codes


def bin_places(x: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Each number's bin among the sorted ``edges``: how many edges are at most it,
    ``np.searchsorted(edges, x, side="right")`` but for NaN, which is in bin 0 here (the
    callers leave missing values out). Up to `COMPARED_EDGES` edges, a comparison with
    each is counted in bytes: for the 3 or 4 edges of quantile bins, a seventh of the time
    of numpy's binary search of each number (2 ms a million numbers, not 15)."""
    if len(edges) > COMPARED_EDGES:
        return np.searchsorted(np.array(edges, dtype=np.float64), x, side="right")
    count = np.zeros(len(x), dtype=np.int8)
    for edge in edges:
        count += x >= edge
    return count.astype(np.int64)


COMPARED_EDGES = 100
"""Up to this many edges `bin_places` compares each number with each (at most 127 fit the
bytes it counts in)."""
FEW_BINS = 64
"""Up to this many bins, `number_categories` finds the first row of each by a pass per bin."""


def _non_negative(model: TableModel) -> bool:
    """Whether every count of the model is >= 0 (after forgetting rows)."""
    if min(model.class_count) < 0:
        return False
    for c in model.columns:
        if c.kind == "gaussian" and not c.stats.consistent():
            return False
        if c.kind in ("categorical", "bernoulli") and min(map(min, c.stats.counts), default=0) < 0:
            return False
        if c.kind == "text" and (
            min(c.stats.rows) < 0 or any(min(v) < 0 for v in c.stats.terms.values())
        ):
            return False
    return True


def relabelled(
    model: TableModel, table: Table, label: str | None, where: str = "the model"
) -> Table:
    """The table with every row labelled ``label`` (one of the labels of the model, called
    ``where`` in the error), in the model's label column; the table itself for None."""
    if label is None:
        return table
    if label not in model.labels:
        raise InputError(f"{where} has no label {label!r} (its labels: {', '.join(model.labels)})")
    kept = [j for j, n in enumerate(table.names) if n != model.label_column]
    every = Words([label], np.zeros(len(table), dtype=np.int64))
    return Table(
        [table.names[j] for j in kept] + [model.label_column],
        ids=table.ids,
        cells=[table.cells[j] for j in kept] + [every],
    )


def subset(table: Table, rows: Iterable[int]) -> Table:
    return table.subset(list(rows))


# --------------------------------------------------------------------------------------------
# Explaining
# --------------------------------------------------------------------------------------------


def explain_rows(model: TableModel, table: Table) -> Iterator[dict[str, Any]]:
    """Per row of a two-class model: the bias (log prior ratio) and each column's
    contribution log P(x_a | +) - log P(x_a | -); they add up to the log-odds."""
    if not model.is_binary:
        raise InputError("explaining a row needs a two-class model")
    p = model.positive_index
    names, parts = model.column_log_likelihoods(table)
    prior = model.log_prior()
    bias = float(prior[p] - prior[1 - p])
    for i, row_id in enumerate(table.ids):
        contrib = [(name, float(part[i, p] - part[i, 1 - p])) for name, part in zip(names, parts)]
        contrib.sort(key=lambda t: -abs(t[1]))
        yield {
            "path": row_id,
            "log_odds": bias + math.fsum(v for _, v in contrib),
            "bias": bias,
            "contributions": contrib,
        }


def column_statistics(model: TableModel) -> list[dict[str, Any]]:
    """The model's columns: per Gaussian column the mean and variance per class (and for two
    classes whether its boundary is linear, equal variances, or quadratic); per categorical
    or Bernoulli column each category's log-odds weight (two classes) or log theta."""
    gauss = model.gaussian_params()
    p = model.positive_index
    out = []
    for column in model.columns:
        entry: dict[str, Any] = {"column": column.name, "kind": column.kind}
        if column.kind == "gaussian":
            mu, var = gauss[column.name]
            entry["mean"] = dict(zip(model.labels, mu.tolist()))
            entry["variance"] = dict(zip(model.labels, var.tolist()))
            if model.is_binary:
                entry["boundary"] = "linear" if var[0] == var[1] else "quadratic"
        elif column.kind in ("categorical", "bernoulli"):
            logp = col.categorical_log_prob(column.stats.matrix(), model.alpha)
            cats = column.stats.categories
            if column.edges is not None:  # bins in the order of their values
                order = sorted(
                    range(len(cats)), key=lambda j: -1 if cats[j] == "z" else int(cats[j])
                )
                logp, cats = logp[:, order], [cats[j] for j in order]
            if model.is_binary:
                w = logp[p] - logp[1 - p]
                entry["weights"] = {column.bin_range(c): float(w[j]) for j, c in enumerate(cats)}
            else:
                entry["log_theta"] = {
                    column.bin_range(c): dict(zip(model.labels, logp[:, j].tolist()))
                    for j, c in enumerate(cats)
                }
        elif column.kind == "text":
            entry["terms"] = len(column.stats.terms)
        out.append(entry)
    return out


def merge_table_models(models: Sequence[TableModel]) -> TableModel:
    """Add table models trained on disjoint rows with the same columns (names, kinds, bin
    edges), labels and settings: the result equals training on all the rows, with no
    decision rule (it was fitted on the parts)."""
    first = models[0]

    def layout(m: TableModel) -> Any:
        return (
            m.labels,
            m.label_column,
            m.alpha,
            m.positive,
            m.tokenizer,
            m.prior,
            [(c.name, c.kind, c.edges, c.zero_bin) for c in m.columns],
        )

    for other in models[1:]:
        if layout(other) != layout(first):
            raise TrainingError(
                "cannot merge table models with other labels, settings or columns (kinds and "
                "bin edges must be the same: train the parts with the same --column and no auto)"
            )
    columns = []
    for j, column in enumerate(first.columns):
        stats = column.stats
        for other in models[1:]:
            o = other.columns[j].stats
            if column.kind == "text":
                terms = {t: list(v) for t, v in stats.terms.items()}
                for t, v in o.terms.items():
                    terms[t] = [a + b for a, b in zip(terms.get(t, [0] * len(v)), v)]
                stats = TextStats([a + b for a, b in zip(stats.rows, o.rows)], terms)
            elif stats is not None:
                stats = stats.combine(o)
        columns.append(dataclasses.replace(column, stats=stats))
    counts = [sum(m.class_count[c] for m in models) for c in range(len(first.labels))]
    return dataclasses.replace(
        first,
        class_count=counts,
        columns=columns,
        info={"merged": len(models)},
        cutoffs=None,
        calibration=None,
    )
