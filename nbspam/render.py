"""Output: predictions and explanations as text, JSON Lines or TSV, one line at a time.

Names that are not valid UTF-8 (file names are bytes on Unix) reach nbspam as strings with
lone surrogates (Python's surrogateescape), and every format gives them back exactly:
text output writes the name's own bytes, as ls and find do; JSON writes each such character
as a ``\\uDCxx`` escape (`json_line`); TSV escapes it as ``\\xNN`` (`tsv_cell`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal

from .decision import Prediction

if TYPE_CHECKING:  # explain needs numpy; rendering a prediction must not
    from .explain import ClassTerms, MessageExplanation

Format = Literal["text", "jsonl", "tsv"]


def predictions(items: Iterable[Prediction], labels: Sequence[str], fmt: Format) -> Iterator[str]:
    """One line per prediction (TSV starts with a header row).

    jsonl keys: path, label, probability (posterior of that label), probabilities
    (label -> posterior) and, for two-class models, log_odds, verdict and calibrated.
    """
    if fmt == "tsv":
        yield "\t".join(
            ["path", "label", "probability", "log_odds", "verdict", "calibrated"]
            + [f"p_{x}" for x in labels]
        )
    for p in items:
        prob = p.probabilities[labels.index(p.label)]
        if fmt == "jsonl":
            record = {
                "path": p.id,
                "label": p.label,
                "probability": prob,
                "probabilities": dict(zip(labels, p.probabilities)),
            }
            if p.log_odds is not None:
                record.update(log_odds=p.log_odds, verdict=p.verdict, calibrated=p.calibrated)
            yield json_line(record)
        elif fmt == "tsv":
            cells = [
                tsv_cell(p.id),
                tsv_cell(p.label),
                repr(prob),
                _number(p.log_odds),
                p.verdict or "",
            ]
            cells += [_number(p.calibrated), *map(repr, p.probabilities)]
            yield "\t".join(cells)
        elif p.log_odds is None:
            yield f"{p.id}: {p.label} (probability {prob:.4f})"
        else:
            calibrated = ""
            if p.calibrated is not None:
                calibrated = f", calibrated P({_positive(p, labels)}) {p.calibrated:.4f}"
            yield (
                f"{p.id}: {p.verdict} (log-odds {p.log_odds:+.3f}, probability of "
                f"{p.label} {prob:.4f}{calibrated})"
            )


def top_terms(
    groups: Sequence[ClassTerms], labels: Sequence[str], kind: str, fmt: Format
) -> Iterator[str]:
    """The global explanation: per class, its strongest terms with weight and counts."""
    if fmt == "tsv":
        yield "\t".join(["toward", "against", "term", "weight", *[f"{kind}_{x}" for x in labels]])
    for group in groups:
        if fmt == "text":
            yield f"toward {group.toward} (against {group.against}): log-odds weight, {kind} per label"
            yield "  " + "  ".join([f"{'weight':>9}", *[f"{x:>9.9}" for x in labels], "term"])
        for t in group.terms:
            if fmt == "jsonl":
                yield json_line(
                    {
                        "toward": group.toward,
                        "against": group.against,
                        "term": t.term,
                        "weight": t.weight,
                        kind: dict(zip(labels, t.counts)),
                    }
                )
            elif fmt == "tsv":
                yield "\t".join(
                    [
                        tsv_cell(group.toward),
                        tsv_cell(group.against),
                        tsv_cell(t.term),
                        repr(t.weight),
                        *map(str, t.counts),
                    ]
                )
            else:
                counts = [f"{k:>9}" for k in t.counts]
                yield "  " + "  ".join([f"{t.weight:>+9.4f}", *counts, t.term])
        if fmt == "text":
            yield ""


def message_explanation(e: MessageExplanation, fmt: Format, top: int | None) -> Iterator[str]:
    """One message's log-odds split into bias and word contributions, largest first."""
    shown = e.contributions if top is None else e.contributions[:top]
    if fmt == "jsonl":
        yield json_line(
            {
                "path": e.id,
                "label": e.label,
                "positive": e.positive,
                "negative": e.negative,
                "log_odds": e.log_odds,
                "bias": e.bias,
                "unknown_tokens": e.unknown_tokens,
                "contributions": [
                    {
                        "term": c.term,
                        "count": c.count,
                        "weight": c.weight,
                        "contribution": c.contribution,
                    }
                    for c in shown
                ],
            }
        )
        return
    if fmt == "tsv":
        yield "\t".join(["path", "term", "count", "weight", "contribution"])
        yield "\t".join([tsv_cell(e.id), "(bias)", "", "", repr(e.bias)])
        for c in shown:
            yield "\t".join(
                [
                    tsv_cell(e.id),
                    tsv_cell(c.term),
                    str(c.count),
                    repr(c.weight),
                    repr(c.contribution),
                ]
            )
        return
    yield f"{e.id}: {e.label} (log-odds {e.positive} vs {e.negative}: {e.log_odds:+.4f})"
    yield f"  {'contribution':>12}  {'count':>5}  {'weight':>9}  term"
    yield f"  {e.bias:>+12.4f}  {'':>5}  {'':>9}  (bias: prior and absent words)"
    for c in shown:
        yield f"  {c.contribution:>+12.4f}  {c.count:>5}  {c.weight:>+9.4f}  {c.term}"
    hidden = len(e.contributions) - len(shown)
    if hidden:
        rest = sum(c.contribution for c in e.contributions[len(shown) :])
        yield f"  {rest:>+12.4f}  {'':>5}  {'':>9}  ({hidden} more words)"
    yield f"  {e.log_odds:>+12.4f}  {'':>5}  {'':>9}  = log-odds ({e.unknown_tokens} tokens not in the model)"


def _positive(p: Prediction, labels: Sequence[str]) -> str:
    """The positive label of a two-class prediction: the one its log-odds point to."""
    other = labels[1 - labels.index(p.label)]
    return p.label if p.log_odds > 0 else other


def _number(value: float | None) -> str:
    return "" if value is None else repr(value)


def json_line(value: object, **options: object) -> str:
    """``json.dumps(value, ensure_ascii=False)``, but lone surrogates (a file name's bytes
    that are not UTF-8) written as ``\\udcxx`` escapes: the line is valid UTF-8, and
    ``os.fsencode(json.loads(line)["path"])`` gives back the name's bytes."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def tsv_cell(text: str) -> str:
    """A TSV cell, escaped as PostgreSQL's text format and Linear TSV do: backslash, tab,
    line feed and carriage return as ``\\\\``, ``\\t``, ``\\n``, ``\\r``; a byte of a name
    that is not UTF-8 as ``\\xNN``, any other lone surrogate as ``\\uXXXX``."""
    return _TSV_SPECIAL.sub(_tsv_escape, text)


_TSV_SPECIAL = re.compile("[\\\\\t\n\r\ud800-\udfff]")
_TSV_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _tsv_escape(match: re.Match[str]) -> str:
    char = match.group()
    escape = _TSV_ESCAPES.get(char)
    if escape is not None:
        return escape
    code = ord(char)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
