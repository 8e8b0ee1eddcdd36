"""Why the model decides as it does: per-word log-odds weights, globally and for one message
(for a Robinson–Fisher model, each clue's spam probability and log terms)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import NbspamError
from ..text.vocabulary import count_rows
from . import naive_bayes as nb
from .decision import verdict
from .fisher import log_chi2_sf
from .scoring_forms import FisherForm, predict_counts

Model = Any
"""A `model.Model`, which this module does not import: `Model.explain` calls it."""


@dataclass(frozen=True)
class TermWeight:
    """One kept term: its log-odds weight toward ``toward`` against ``against``, its counts."""

    term: str
    weight: float
    counts: tuple[int, ...]


@dataclass(frozen=True)
class ClassTerms:
    """The terms that push hardest toward class ``toward`` (against class ``against``)."""

    toward: str
    against: str
    terms: tuple[TermWeight, ...]


@dataclass(frozen=True)
class Contribution:
    """One word of a message: f(x_a) (count, or 1 for presence), w_a and f(x_a) w_a."""

    term: str
    count: int
    weight: float
    contribution: float


@dataclass(frozen=True)
class MessageExplanation:
    """A message's log-odds of ``positive`` against ``negative`` as bias + contributions.

    ``verdict`` is what `predict` says (`decision.verdict` at the model's ``cutoffs``: the
    negative label, 'unsure' or the positive label; for more classes the label); ``label``
    is the Bayes decision (log-odds > 0)."""

    id: str
    label: str
    positive: str
    negative: str
    log_odds: float
    bias: float
    contributions: tuple[Contribution, ...]
    unknown_tokens: int
    verdict: str = ""
    cutoffs: tuple[float, float] | None = None


@dataclass(frozen=True)
class Clue:
    """One clue of a Robinson–Fisher score: a word with its spam probability f and the two
    log terms it adds to the chi-square statistics."""

    term: str
    f: float
    log_f: float
    log_not_f: float


@dataclass(frozen=True)
class FisherExplanation:
    """A Robinson–Fisher score from its clues (docs/math.md, "Robinson–Fisher combining"): the sums of ln f and ln(1 - f)
    over the k clues, the log tails ln H = ln Q(-2 sum ln f, 2k) and ln S = ln Q(-2 sum
    ln(1 - f), 2k), and log_odds = logit(I), I = (1 + H - S) / 2, what `predict` reports."""

    id: str
    label: str
    positive: str
    negative: str
    log_odds: float
    clues: tuple[Clue, ...]
    sum_log_f: float
    sum_log_not_f: float
    log_h: float
    log_s: float
    unknown_tokens: int
    verdict: str = ""
    cutoffs: tuple[float, float] | None = None


def count_kind(model: Model) -> str:
    """Which counts the weights come from: 'documents' (presence) or 'occurrences'."""
    return "documents" if model.form.binary else "occurrences"


def top_terms(model: Model, n: int, *, against: str | None = None) -> list[ClassTerms]:
    """For each class, the ``n`` kept terms of largest weight toward it.

    Two classes: the positive class against the negative and the negative against the
    positive (w and -w). More classes: each class against ``against`` or, by default, against
    the largest other class (docs/math.md, "The linear form: weights and bias": weights per pair against a reference class).
    Ties in weight are broken by term order, so the output is deterministic.
    """
    sc = model.form
    counts = (model.doc_count if sc.binary else model.term_count)[:, sc.kept]
    out = []
    for c, label in enumerate(model.labels):
        ref = _reference(model, c, against)
        w, _ = nb.pair_weights(sc.coef, sc.intercept, c, ref)
        order = np.lexsort((np.arange(w.size), -w))[:n]
        terms = tuple(
            TermWeight(sc.terms[a], float(w[a]), tuple(int(k) for k in counts[:, a])) for a in order
        )
        out.append(ClassTerms(label, model.labels[ref], terms))
    if model.is_binary:
        out.sort(key=lambda ct: ct.toward != model.training.positive)
    return out


def explain_message(
    model: Model, message_id: str, tokens: Sequence[str], *, against: str | None = None
) -> MessageExplanation | FisherExplanation:
    """Split one message's log-odds into the bias and one contribution per known word.

    Two classes: positive against negative, and ``log_odds`` is exactly what `predict`
    reports. More classes: the predicted class against ``against`` or, by default, the
    runner-up. Contributions are sorted by size (largest |f(x_a) w_a| first, then by term);
    ``bias + sum(contributions)`` equals ``log_odds`` up to float rounding.
    """
    sc = model.form
    if isinstance(sc, FisherForm):
        return _explain_fisher(model, sc, message_id, tokens)
    X = count_rows([tokens], model.form.index, grow=False)
    log_posts, log_odds_all = predict_counts(model.form, X)
    log_odds = None if log_odds_all is None else float(log_odds_all[0])
    order = np.argsort(-log_posts[0])
    if model.is_binary:
        pos, neg = model.positive_index, model.negative_index
    else:
        pos = int(order[0])
        neg = model.labels.index(against) if against else int(order[1])
        if neg == pos:
            neg = int(order[1])
    w, bias = nb.pair_weights(sc.coef, sc.intercept, pos, neg)
    row = X.getrow(0)
    f = np.ones_like(row.data) if sc.binary else row.data
    contributions = sorted(
        (
            Contribution(sc.terms[a], int(k), float(w[a]), float(k * w[a]))
            for a, k in zip(row.indices, f)
        ),
        key=lambda c: (-abs(c.contribution), c.term),
    )
    if log_odds is None:
        log_odds = bias + float(np.dot(f, w[row.indices]))
    known = sum(1 for t in tokens if t in sc.index.ids)
    if model.is_binary:
        label = verdict(log_odds, None, model.labels[pos], model.labels[neg])
        said = verdict(log_odds, model.cutoffs, model.labels[pos], model.labels[neg])
    else:
        label = said = model.labels[pos]
    return MessageExplanation(
        id=message_id,
        label=label,
        positive=model.labels[pos],
        negative=model.labels[neg],
        log_odds=float(log_odds),
        bias=bias,
        contributions=tuple(contributions),
        unknown_tokens=len(tokens) - known,
        verdict=said,
        cutoffs=model.cutoffs if model.is_binary else None,
    )


def _explain_fisher(
    model: Model, form: FisherForm, message_id: str, tokens: Sequence[str]
) -> FisherExplanation:
    """The clues of one message and how its Robinson–Fisher score follows from them."""
    row = count_rows([tokens], model.form.index, grow=False).getrow(0)
    clues = sorted(
        (
            Clue(
                form.terms[a],
                math.exp(form.log_f[a]),
                float(form.log_f[a]),
                float(form.log_not_f[a]),
            )
            for a in row.indices.tolist()
        ),
        key=lambda c: (-abs(c.log_f - c.log_not_f), c.term),
    )
    k = len(clues)
    sum_f = math.fsum(c.log_f for c in clues)
    sum_not = math.fsum(c.log_not_f for c in clues)
    log_odds = float(predict_counts(model.form, row)[1][0])
    positive, negative = model.labels[model.positive_index], model.labels[model.negative_index]
    known = sum(1 for t in tokens if t in model.form.index.ids)
    return FisherExplanation(
        id=message_id,
        label=verdict(log_odds, None, positive, negative),
        verdict=verdict(log_odds, model.cutoffs, positive, negative),
        cutoffs=model.cutoffs,
        positive=positive,
        negative=negative,
        log_odds=log_odds,
        clues=tuple(clues),
        sum_log_f=sum_f,
        sum_log_not_f=sum_not,
        log_h=log_chi2_sf(-sum_f, k) if k else 0.0,
        log_s=log_chi2_sf(-sum_not, k) if k else 0.0,
        unknown_tokens=len(tokens) - known,
    )


def _reference(model: Model, c: int, against: str | None) -> int:
    if against is not None:
        if against not in model.labels:
            raise NbspamError(
                f"--against {against!r} is not one of the labels {list(model.labels)}"
            )
        ref = model.labels.index(against)
        if ref != c:
            return ref
    if model.is_binary:
        return 1 - c
    sizes = [(-int(model.class_count[k]), k) for k in range(len(model.labels)) if k != c]
    return min(sizes)[1]
