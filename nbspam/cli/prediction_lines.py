"""Predictions as lines: text, TSV or JSON Lines, one line a prediction (`predictions`) or a
block of a table's rows at once (`prediction_blocks`), the same bytes either way.

Names that are not valid UTF-8 (file names are bytes on Unix) reach nbspam as strings with
lone surrogates (Python's surrogateescape), and every format gives them back exactly:
text output writes the name's own bytes, as ls and find do; JSON writes each such character
as a ``\\uDCxx`` escape (`json_line`); TSV escapes it as ``\\xNN`` (`tsv_cell`). Scoring one
message imports this module and not `render`, whose other outputs are five times its size.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence

from ..core.jsonl import json_line
from ..models.decision import Prediction, Predictions
from .printable import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

    Format = Literal["text", "jsonl", "tsv"]


def predictions(items: Iterable[Prediction], labels: Sequence[str], fmt: Format) -> Iterator[str]:
    """One line per prediction (TSV starts with a header row).

    jsonl keys: path, label, probability (posterior of that label), probabilities
    (label -> posterior) and, for two-class models, log_odds, verdict and calibrated.
    """
    if fmt == "tsv":
        yield _tsv_header(labels)
    for p in items:
        yield _prediction_line(p, labels, fmt)


def prediction_blocks(
    items: Iterable[Prediction | Predictions], labels: Sequence[str], fmt: Format
) -> Iterator[tuple[str, int]]:
    """(text, rows) of the `predictions` lines: one line per `Prediction`, and a block of
    `decision.Predictions` (the rows of a table) as all its lines at once, the same text
    made by one format per block rather than per row."""
    if fmt == "tsv":
        yield _tsv_header(labels), 0
    for p in items:
        if isinstance(p, Predictions):
            if len(p):
                yield _block_text(p, labels, fmt), len(p)
        else:
            yield _prediction_line(p, labels, fmt), 1


def _tsv_header(labels: Sequence[str]) -> str:
    return "\t".join(
        ["path", "label", "probability", "log_odds", "verdict", "calibrated"]
        + [f"p_{x}" for x in labels]
    )


def _prediction_line(p: Prediction, labels: Sequence[str], fmt: Format) -> str:
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
        return json_line(record)
    if fmt == "tsv":
        cells = [
            tsv_cell(p.id),
            tsv_cell(p.label),
            repr(prob),
            _number(p.log_odds),
            p.verdict or "",
        ]
        cells += [_number(p.calibrated), *map(repr, p.probabilities)]
        return "\t".join(cells)
    if p.log_odds is None:
        return f"{printable(p.id)}: {p.label} (probability {prob:.4f})"
    calibrated = ""
    if p.calibrated is not None:
        calibrated = f", calibrated P({_positive(p, labels)}) {p.calibrated:.4f}"
    return (
        f"{printable(p.id)}: {p.verdict} (log-odds {p.log_odds:+.3f}, probability of "
        f"{p.label} {prob:.4f}{calibrated})"
    )


def _block_text(block: Predictions, labels: Sequence[str], fmt: Format) -> str:
    """The lines of `_prediction_line` of every row of a block, joined: one %-format per
    line, its fixed parts (labels, the path of a table's rows) escaped once. JSON Lines
    with a value that is not finite (which JSON writes its own way) go row by row."""
    values = [
        *block.probabilities,
        *([] if block.log_odds is None else [block.log_odds]),
        *([] if block.calibrated is None else [block.calibrated]),
    ]
    if fmt == "jsonl" and not all(all(map(math.isfinite, v)) for v in values):
        return "\n".join(_prediction_line(p, labels, fmt) for p in block)
    escape = {"jsonl": json_line, "tsv": tsv_cell, "text": printable}[fmt]
    path = getattr(block.ids, "path", None)
    if path is not None:  # PATH#LINE: the path escaped once, the line a number
        if fmt == "jsonl":
            ids_format, ids = _literal(escape(path)[:-1]) + '#%d"', block.ids.lines.tolist()
        else:
            ids_format, ids = _literal(escape(path)) + "#%d", block.ids.lines.tolist()
    else:
        ids_format, ids = "%s", list(map(escape, block.ids))
    rows = list(zip(*block.probabilities))
    prob = [row[b] for b, row in zip(block.best, rows)]
    label = [labels[b] for b in block.best]
    two = block.log_odds is not None
    calibrated = block.calibrated is not None
    columns: list[Any] = [ids]
    if fmt == "text":
        columns += [block.verdicts, block.log_odds, label, prob] if two else [label, prob]
        if not two:
            line = ids_format + ": %s (probability %.4f)"
        else:
            line = ids_format + ": %s (log-odds %+.3f, probability of %s %.4f"
            if calibrated:
                line += _literal(f", calibrated P({block.positive})") + " %.4f"
                columns.append(block.calibrated)
            line += ")"
    elif fmt == "tsv":
        names = {x: tsv_cell(x) for x in labels}
        columns += [[names[x] for x in label], prob]
        line = ids_format + "\t%s\t%r"
        if two:
            line += "\t%r\t%s\t" + ("%r" if calibrated else "")
            columns += [block.log_odds, block.verdicts]
            if calibrated:
                columns.append(block.calibrated)
        else:
            line += "\t\t\t"
        line += "\t%r" * len(labels)
        columns += block.probabilities
    else:
        names = {x: json_line(x) for x in {*labels, *(block.verdicts or ())}}
        columns += [[names[x] for x in label], prob, *block.probabilities]
        line = '{"path": ' + ids_format + ', "label": %s, "probability": %r, "probabilities": {'
        line += ", ".join(_literal(json_line(x)) + ": %r" for x in labels) + "}"
        if two:
            line += ', "log_odds": %r, "verdict": %s, "calibrated": ' + (
                "%r" if calibrated else "null"
            )
            columns += [block.log_odds, [names[v] for v in block.verdicts]]
            if calibrated:
                columns.append(block.calibrated)
        line += "}"
    return "\n".join(map(line.__mod__, zip(*columns)))


def _literal(text: str) -> str:
    """Text as a literal part of a %-format."""
    return text.replace("%", "%%")


def _positive(p: Prediction, labels: Sequence[str]) -> str:
    """The positive label of a two-class prediction: the one its log-odds point to."""
    other = labels[1 - labels.index(p.label)]
    return p.label if p.log_odds > 0 else other


def _number(value: float | None) -> str:
    return "" if value is None else repr(value)


def tsv_cell(text: str) -> str:
    """A TSV cell, escaped as PostgreSQL's text format and Linear TSV do: backslash, tab,
    line feed and carriage return as ``\\\\``, ``\\t``, ``\\n``, ``\\r``; a byte of a name
    that is not UTF-8 as ``\\xNN``, any other lone surrogate as ``\\uXXXX``."""
    return re.sub(_TSV_SPECIAL, _tsv_escape, text)


# compiled on first use (and kept by re): the text output of scoring one message needs none
_TSV_SPECIAL = "[\\\\\t\n\r\ud800-\udfff]"
_TSV_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _tsv_escape(match: re.Match[str]) -> str:
    char = match.group()
    escape = _TSV_ESCAPES.get(char)
    if escape is not None:
        return escape
    code = ord(char)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"
