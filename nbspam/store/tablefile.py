"""A `table_model.TableModel` to and from its model file (`container`): the whole model in the
JSON header, exact sums as hexadecimal text, no arrays; and its rows learned and forgotten
in place, under the model's lock.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ..core.settings import TokenizerConfig
from ..errors import ModelFileError
from ..models import columns as col
from ..models.decision import read_cutoffs, stored_cutoffs
from ..models.table_model import Column, TableModel, TextStats, add_rows, relabelled
from ..text.tables import KINDS, TABLE_KIND, Table
from . import container
from .lock import model_lock
from .schema import number_pair


def to_header(model: TableModel) -> dict[str, Any]:
    """The model as the JSON header of a model file: exact sums as hexadecimal text."""
    cols = []
    for c in model.columns:
        entry: dict[str, Any] = {"name": c.name, "kind": c.kind}
        if c.kind == "gaussian":
            entry["n"] = c.stats.n
            entry["s1"] = [hex(v) for v in c.stats.s1]
            entry["s2"] = [hex(v) for v in c.stats.s2]
        elif c.kind in ("categorical", "bernoulli"):
            entry["categories"] = c.stats.categories
            entry["counts"] = c.stats.counts
            if c.edges is not None:
                entry["edges"] = c.edges
                entry["zero_bin"] = c.zero_bin
        elif c.kind == "text":
            entry["rows"] = c.stats.rows
            entry["terms"] = c.stats.terms
        cols.append(entry)
    table = {
        "kind": TABLE_KIND,
        "labels": list(model.labels),
        "class_count": model.class_count,
        "label_column": model.label_column,
        "alpha": model.alpha,
        "positive": model.positive,
        "tokenizer": model.tokenizer.as_dict(),
        "columns": cols,
        "info": model.info,
        "cutoffs": stored_cutoffs(model.cutoffs),
        "calibration": None if model.calibration is None else list(model.calibration),
    }
    if model.prior != "fitted":  # absent: fitted, as in files written before --prior
        table["prior"] = (
            model.prior if isinstance(model.prior, str) else list(map(list, model.prior))
        )
    return {"table": table}


def from_header(path: str | os.PathLike[str], header: dict[str, Any]) -> TableModel:
    """A TableModel from a model file's header, every field checked (ModelFileError)."""
    try:
        return _from_header(header["table"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelFileError(f"{path} is not a valid nbspam table model: {exc!r}") from None


def _counts(values: Any, size: int) -> list[int]:
    if not isinstance(values, list) or len(values) != size:
        raise ValueError("a count list of the wrong size")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError("a count that is not a whole number >= 0")
    return list(values)


def _from_header(t: dict[str, Any]) -> TableModel:
    from ..core.settings import config_from_dict

    if t["kind"] != TABLE_KIND:
        raise ValueError("not a table model")
    labels = tuple(t["labels"])
    if len(labels) < 2 or not all(isinstance(v, str) and v for v in labels):
        raise ValueError("labels")
    if list(labels) != sorted(set(labels)):
        raise ValueError("labels not sorted and unique")
    C = len(labels)
    alpha = float(t["alpha"])
    if not math.isfinite(alpha) or alpha < 0:
        raise ValueError("alpha")
    positive = t["positive"]
    if positive is not None and positive not in labels:
        raise ValueError("positive")
    columns = []
    for entry in t["columns"]:
        name, kind = entry["name"], entry["kind"]
        if not isinstance(name, str) or kind not in KINDS:
            raise ValueError(f"column {name!r}")
        column = Column(name, kind)
        if kind == "gaussian":
            n = _counts(entry["n"], C)
            s1 = [int(v, 16) for v in entry["s1"]]
            s2 = [int(v, 16) for v in entry["s2"]]
            column.stats = col.Gaussian(n, s1, s2)
            if len(s1) != C or len(s2) != C or not column.stats.consistent():
                raise ValueError(f"column {name!r}: sums that no values within ±1e150 give")
        elif kind in ("categorical", "bernoulli"):
            cats = entry["categories"]
            if not all(isinstance(v, str) for v in cats) or len(set(cats)) != len(cats):
                raise ValueError(f"column {name!r}: categories")
            counts = [_counts(row, len(cats)) for row in entry["counts"]]
            if len(counts) != C:
                raise ValueError(f"column {name!r}: counts")
            column.stats = col.Categorical(list(cats), counts, fixed=kind == "bernoulli")
            if "edges" in entry:
                edges = [float(e) for e in entry["edges"]]
                if not all(math.isfinite(e) for e in edges) or edges != sorted(set(edges)):
                    raise ValueError(f"column {name!r}: edges")
                column.edges, column.zero_bin = edges, bool(entry["zero_bin"])
        elif kind == "text":
            rows = _counts(entry["rows"], C)
            terms = {str(k): _counts(v, C) for k, v in entry["terms"].items()}
            column.stats = TextStats(rows, terms)
        columns.append(column)
    return TableModel(
        labels=labels,
        class_count=_counts(t["class_count"], C),
        columns=columns,
        label_column=str(t["label_column"]),
        alpha=alpha,
        positive=positive,
        tokenizer=config_from_dict(TokenizerConfig, t["tokenizer"]),
        info=dict(t.get("info") or {}),
        cutoffs=_cutoffs(number_pair(t.get("cutoffs"), "cutoffs"), C),
        calibration=number_pair(t.get("calibration"), "calibration"),
        prior=_prior(t.get("prior", "fitted"), labels),
    )


def _prior(value: Any, labels: tuple[str, ...]) -> Any:
    """A stored prior checked: 'fitted', 'uniform' or [[label, weight], ...] naming every
    label, each weight positive."""
    from ..core.settings import parse_prior
    from ..errors import NbspamError
    from ..models.naive_bayes import prior_weights

    if isinstance(value, list):
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in value):
            raise ValueError("prior")
        value = dict(value)
    try:
        prior = parse_prior(value)
        prior_weights(prior, labels)
    except NbspamError as exc:
        raise ValueError(f"prior: {exc}") from None
    return prior


def _cutoffs(pair: tuple[float, float] | None, classes: int) -> tuple[float, float] | None:
    if pair is None:
        return None
    if classes != 2 or pair[0] > pair[1]:
        raise ValueError("cutoffs")
    return read_cutoffs(pair)


def save_table_model(model: TableModel, path: str | os.PathLike[str]) -> None:
    """Write the model as a model file (`container`) whose header holds it all; no arrays."""
    container.write(path, to_header(model), {})


def load_table_model(path: str | os.PathLike[str]) -> TableModel:
    box = container.read(path)
    if "table" not in box.header:
        raise ModelFileError(f"{path} is a model of messages, not of a table")
    return from_header(path, box.header)


def update_table_file(path: str, table: Table, sign: int, label: str | None = None) -> int:
    """Learn (sign 1) or forget (sign -1) the rows of a table, each under its label column
    or, where ``label`` is given, every row as ``label``, into the table model at ``path``
    under the model's lock; the file is replaced only when every row was counted. Returns the rows counted."""
    with model_lock(path):
        container.remove_leftovers(path)
        model = load_table_model(path)
        table = relabelled(model, table, label, str(path))
        n = add_rows(model, table, sign)
        save_table_model(model, path)
    return n
