"""What a model file must hold, checked when it is read: every header field and every array.

A file with a valid checksum may still have been made by hand, so nothing in it is trusted:
reading ends in something that can be scored and updated, or in one `ModelFileError`
``MODEL is not a valid nbspam model: <what>``. `read` checks the whole header, each array's
type and shape, and the values one message is scored with, at a cost small beside reading
the file, so that scoring one message (`array_scoring`, without numpy) can neither fail nor stall
and sums only finite weights. The checks that take a pass over the whole vocabulary or the
counts are made where those are used: `terms` where the vocabulary is decoded (a batch, a
full Model), `check_counts` (numpy) where a full Model is built. (Scoring one message looks
terms up by binary search and does not decode the vocabulary: in a crafted file with terms
out of order, a lookup can only miss.)

Standard library only.
"""

from __future__ import annotations

import math
import operator
import os

from ..core.settings import (
    MAX_LABEL_CHARS,
    MAX_LABELS,
    TokenizerConfig,
    TrainConfig,
    config_from_dict,
    parse_cutoffs,
)
from ..errors import ConfigError, ModelFileError
from ..models.decision import read_cutoffs
from ..models.event_models import event_model
from . import container

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_INTS = ("<i4", "<i8")
# name -> (the types it may have, its shape in the letters C labels, d terms, n messages
# learned, T bytes of terms; a number is that size)
ARRAYS: dict[str, tuple[tuple[str, ...], tuple[str | int, ...]]] = {
    "terms": (("|u1",), ("T",)),
    "term_offsets": (("<u4", "<u8"), ("d+1",)),
    "class_count": (_INTS, ("C",)),
    "term_count": (_INTS, ("C", "d")),
    "doc_count": (_INTS, ("C", "d")),
    "seen_digests": (("|u1",), ("n", 16)),
    "seen_labels": (_INTS, ("n",)),
    "seen_times": (("<i8",), ("n",)),
    "score_coef": (("<f8",), ("C", "d")),
    "score_intercept": (("<f8",), ("C",)),
    "score_weights": (("<f8",), ("d",)),
    container.PAGES: (("<u4",), ("pages",)),  # its size is checked by `container.Pages`
    "term_groups": (("|u1",), ("F",)),  # checked by `term_groups` where it is read
    "term_group_starts": (("<u4", "<u8"), (2, "g+1")),
}
_SCORING = ("score_coef", "score_intercept", "score_weights")
# files written before learn times were recorded lack seen_times; before page checksums,
# page_crc; before term groups, term_groups and term_group_starts
_OPTIONAL = ("seen_times", container.PAGES, "term_groups", "term_group_starts")
_HEADER = {
    "format": True,
    "format_version": True,
    "nbspam_version": True,
    "arrays": True,
    "labels": True,
    "tokenizer": True,
    "train": True,
    "info": False,
    "cutoffs": False,
    "calibration": False,
    "score": False,
}


class ModelFile:
    """A checked model file: its header, its arrays' bytes, and the header's values.

    (A plain class: a dataclass costs a millisecond at import, which scoring one message pays.)
    """

    __slots__ = (
        "header",
        "views",
        "labels",
        "tokenizer",
        "training",
        "cutoffs",
        "calibration",
        "info",
        "fingerprint",
        "pages",
    )

    def __init__(
        self,
        header: dict[str, Any],
        views: dict[str, tuple[memoryview, str, tuple[int, ...]]],
        labels: tuple[str, ...],
        tokenizer: TokenizerConfig,
        train: TrainConfig,
        cutoffs: tuple[float, float] | None,
        calibration: tuple[float, float] | None,
        info: dict[str, Any],
    ) -> None:
        self.header, self.views, self.labels = header, views, labels
        self.tokenizer, self.training = tokenizer, train
        self.cutoffs, self.calibration, self.info = cutoffs, calibration, info
        self.fingerprint = (0, 0)
        self.pages: container.Pages | None = None  # a file read a page at a time (`paged`)

    @property
    def has_scoring_table(self) -> bool:
        return "score_coef" in self.views

    def view(self, name: str) -> memoryview:
        """The bytes of array ``name`` (of a file read a page at a time: all its pages)."""
        view = self.views[name][0]
        if view is None and self.pages is not None:
            view = memoryview(self.pages.read(*self.pages.blob(name)))
        return view

    def values(self, name: str) -> memoryview:
        """Array ``name`` as a flat memory view of numbers (native order)."""
        return self.view(name).cast(_FORMATS[self.views[name][1]])


_FORMATS = {"|u1": "B", "<i4": "i", "<u4": "I", "<i8": "q", "<u8": "Q", "<f8": "d"}


def read(path: str | os.PathLike[str], *, table_model: bool = False) -> ModelFile | None:
    """Read the model file at ``path`` (`container.read`) and check what it holds. A model
    of a typed table (`table_model`, read by its own reader) is refused, or with
    ``table_model`` is None."""
    box = container.read(path)
    if "table" in box.header:
        if table_model:
            return None
        raise ModelFileError(
            f"{path} is a model of a typed table: this command takes models of messages only"
        )
    try:
        return _checked(box)
    except (ValueError, ConfigError) as exc:
        raise container.invalid(path, str(exc)) from None


def terms(path: str | os.PathLike[str], box: ModelFile) -> list[str]:
    """The vocabulary, checked: UTF-8, d terms, each non-empty, strictly increasing."""
    try:
        text = bytes(box.view("terms")).decode("utf-8")
    except UnicodeDecodeError:
        raise container.invalid(path, "the terms are not UTF-8") from None
    found = text.split("\n") if text else []
    if len(found) != box.views["term_offsets"][2][0] - 1:  # their shape: no pages read
        raise container.invalid(path, "the terms do not match their offsets")
    if found[:1] == [""] or not all(map(operator.lt, found, found[1:])):  # C loops, no Python
        raise container.invalid(path, "the terms are not sorted, unique and non-empty")
    if "term_groups" in box.views and not _groups_fit(box, found):
        raise container.invalid(path, "the term groups do not fit the terms")
    return found


GROUP_REST = 1 << 14
"""The most bytes of a term group after its first term (what a lookup reads, a line break
after each term), eight times what nbspam writes (`modelfile.GROUP_BYTES`): a file with a
longer group is refused, so that a lookup reads a few pages whatever the file says."""


def _groups_fit(box: ModelFile, found: list[str]) -> bool:
    """Whether the term groups are of the vocabulary ``found``: each group's column, start
    and first term those of a term, in order, and its rest at most `GROUP_REST` bytes
    (where the groups are cut is otherwise the writer's choice). A loop as long as there
    are groups, about one a 2 KiB of terms."""
    try:
        firsts, columns, at = term_groups(box)
    except ValueError:
        return False
    offsets = box.values("term_offsets")
    count = len(firsts)
    return (
        all(map(operator.lt, columns, columns[1:]))
        and all(offsets[columns[i]] == at[i] for i in range(count))
        and all(at[i + 1] - at[i] - len(firsts[i]) - 1 <= GROUP_REST for i in range(count))
        and firsts == [found[columns[i]].encode("utf-8") for i in range(count)]
    )


def term_groups(box: ModelFile) -> tuple[list[bytes], memoryview, memoryview] | None:
    """(the first term of each group as UTF-8, the column of each group's first term, where
    each starts in the terms) of a file with term groups (`modelfile.term_groups`), else
    None; the two rows of numbers end with the vocabulary's size and the end of its terms.
    Checked here: as many first terms as groups, and the rows' ends; a lookup checks the
    numbers of the group it reads (`array_scoring.PagedTable`), so that it stays among the
    group's terms and their weights, in time that does not grow with the groups. That the
    groups are the vocabulary's is checked where the vocabulary is read whole (`terms`);
    a lookup in a crafted file can only miss, or find a term the file holds."""
    if "term_groups" not in box.views:
        return None
    count = box.views["term_group_starts"][2][1] - 1
    starts = box.values("term_group_starts")
    columns, at = starts[: count + 1], starts[count + 1 :]
    text = bytes(box.view("term_groups"))
    firsts = text.split(b"\n") if count else []
    size = box.views["term_offsets"][2][0] - 1
    end = box.views["terms"][2][0] + 1 if size else 0
    if (
        len(firsts) != count
        or (not count and text)
        or (columns[0], at[0], columns[count], at[count]) != (0, 0, size, end)
    ):
        raise ValueError("the term groups do not fit the terms")
    return firsts, columns, at


def check_counts(path: str | os.PathLike[str], box: ModelFile) -> None:
    """The checks a full Model needs beyond `read`, one vectorised pass each: counts
    non-negative, term offsets where the terms are, and the whole scoring table finite."""
    import numpy as np

    def array(name: str) -> Any:
        view, dtype, shape = box.views[name]
        return np.frombuffer(view, np.dtype(dtype)).reshape(shape)

    for name in ("class_count", "term_count", "doc_count"):
        if array(name).size and array(name).min() < 0:
            raise container.invalid(path, f"{name} has a negative count")
    if "seen_times" in box.views and array("seen_times").size and array("seen_times").min() < -1:
        raise container.invalid(path, "seen_times has a time before 1970 other than -1 (unknown)")
    blob, offsets = array("terms"), array("term_offsets")
    if offsets.size > 2 and not np.array_equal(np.flatnonzero(blob == 10) + 1, offsets[1:-1]):
        raise container.invalid(path, "the term offsets do not match the terms")
    for name in _SCORING:
        if name in box.views and not np.isfinite(array(name)).all():
            raise container.invalid(path, f"{name} holds a number that is not finite")


def mapped(path: str | os.PathLike[str]) -> ModelFile:
    """The model file at ``path`` memory-mapped (`container.open_mapped`), its header and
    the shapes of its arrays checked, in time that does not grow with the model: what a
    writer of its `journal` reads. Its checksum and values are checked by its readers."""
    box = container.open_mapped(path)
    if "table" in box.header:
        raise ModelFileError(f"{path} is a model of a typed table, which has no journal")
    try:
        return _checked(box, values=False)
    except (ValueError, ConfigError) as exc:
        raise container.invalid(path, str(exc)) from None


def paged(path: str | os.PathLike[str]) -> ModelFile | None:
    """The model file at ``path`` for scoring one message, read a page at a time
    (`container.open_paged`): its header and the shapes of its arrays checked as by `read`,
    the ends of its term offsets, and the intercepts and bias finite; every other value is
    checked where it is read, and every page read against its checksum. None for a file
    without page checksums or a model of a typed table, which `read` reads whole. Time and
    memory do not grow with the model."""
    box = container.open_paged(path)
    if box is None:
        return None
    pages = box.pages
    try:
        if "table" in box.header:
            pages.close()
            return None
        checked = _checked(box, values=False)
        checked.pages = pages
        offsets_at, offsets_size = pages.blob("term_offsets")
        step = offsets_size // checked.views["term_offsets"][2][0]
        first = int.from_bytes(pages.read(offsets_at, step), "little")
        last = int.from_bytes(pages.read(offsets_at + offsets_size - step, step), "little")
        size = pages.blob("terms")[1]
        if first != 0 or last != (size + 1 if offsets_size > step else 0):
            raise ValueError("the term offsets do not span the terms")
        if checked.has_scoring_table and not all(
            map(math.isfinite, checked.values("score_intercept"))
        ):
            raise ValueError("score_intercept holds a number that is not finite")
    except (ValueError, ConfigError) as exc:
        pages.close()
        raise container.invalid(path, str(exc)) from None
    except BaseException:
        pages.close()
        raise
    return checked


def _checked(box: container.Container, *, values: bool = True) -> ModelFile:
    header = box.header
    missing = [key for key, required in _HEADER.items() if required and key not in header]
    if missing:
        raise ValueError(f"the header lacks {missing[0]!r}")
    unknown = sorted(set(header) - set(_HEADER))
    if unknown:
        raise ValueError(f"the header has an unknown field {unknown[0]!r}")
    if not _whole(header["format_version"]) or header["format_version"] > container.FORMAT_VERSION:
        raise ValueError("format_version is not a format this nbspam reads")
    if not isinstance(header["nbspam_version"], str):
        raise ValueError("nbspam_version is not text")
    info = checked_info(header.get("info", {}))
    labels = _labels(header["labels"])
    tokenizer = header["tokenizer"]
    if isinstance(tokenizer, dict):  # a file written before number tokens tokenizes without
        tokenizer = {"number_tokens": False, **tokenizer}
    tokenizer = config_from_dict(TokenizerConfig, tokenizer)
    train = config_from_dict(TrainConfig, header["train"])
    binary = len(labels) == 2
    if binary and train.positive is None:
        raise ValueError("a two-class model has no positive label")
    if train.positive is not None and train.positive not in labels:
        raise ValueError(f"the positive label {train.positive!r} is not one of the labels")
    if isinstance(train.prior, tuple) and {label for label, _ in train.prior} != set(labels):
        raise ValueError("the prior names other labels than the model has")
    cutoffs = _pair(header, "cutoffs")
    if cutoffs is not None:
        cutoffs = read_cutoffs(parse_cutoffs(list(cutoffs)))
    calibration = _pair(header, "calibration")
    _check_arrays(box, labels, fisher=train.event_model == "fisher")
    if "score_coef" in box.views:
        _check_score(header.get("score"), train, binary)
    elif "score" in header:
        raise ValueError("the header has a score but the file no scoring table")
    checked = ModelFile(header, box.views, labels, tokenizer, train, cutoffs, calibration, info)
    checked.fingerprint = box.fingerprint
    if values:
        _check_values(checked, binary)
    return checked


def checked_info(info: Any) -> dict[str, Any]:
    """A model's history (``info``), checked where nbspam reads it: a mapping whose records
    of auto's choice (``auto``), of pruning (``pruned``) and of expiry (``expired``) have
    the fields and types nbspam writes; other keys are free-form and only shown. ValueError
    names the first field amiss."""
    if not isinstance(info, dict):
        raise ValueError("info is not a mapping")
    for key, count in (("pruned", "terms_dropped"), ("expired", "digests")):
        if key in info:
            record = info[key]
            if not isinstance(record, dict) or not _count(record.get(count)):
                raise ValueError(f"info.{key} must hold {count}, a whole number >= 0")
            if not isinstance(record.get("last"), str):
                raise ValueError(f"info.{key} must hold last, a date as text")
    if "auto" in info:
        _check_auto(info["auto"])
    return info


def _check_auto(auto: Any) -> None:
    """info.auto, the record of --event-model auto (`selection.Choice.info`)."""
    if not isinstance(auto, dict):
        raise ValueError("info.auto is not a mapping")
    chosen = auto.get("chosen")
    if chosen is not None and not isinstance(chosen, str):
        raise ValueError("info.auto.chosen must be text or null")
    for key in ("messages", "folds"):
        if (key in auto or chosen is not None) and not _count(auto.get(key)):
            raise ValueError(f"info.auto.{key} must be a whole number >= 0")
    candidates = auto.get("candidates", [])
    if not isinstance(candidates, list):
        raise ValueError("info.auto.candidates is not a list")
    for row in candidates:
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("name"), str)
            or "auc" not in row
            or not (row["auc"] is None or _finite(row["auc"]))
            or not isinstance(row.get("note", ""), str)
        ):
            raise ValueError("info.auto.candidates: each needs a name, an auc (or null), a note")


def _labels(labels: Any) -> tuple[str, ...]:
    if not isinstance(labels, list) or not 2 <= len(labels) <= MAX_LABELS:
        raise ValueError(f"labels must be a list of 2 to {MAX_LABELS} labels")
    if not all(isinstance(label, str) and 0 < len(label) <= MAX_LABEL_CHARS for label in labels):
        raise ValueError(f"every label must be text of 1 to {MAX_LABEL_CHARS} characters")
    if not all(map(operator.lt, labels, labels[1:])):
        raise ValueError("the labels are not sorted and unique")
    return tuple(labels)


def _pair(header: dict[str, Any], key: str) -> tuple[float, float] | None:
    """cutoffs or calibration: absent, or two finite numbers (which only a two-class model
    uses; a label learned later keeps them)."""
    return number_pair(header.get(key), f"{key} must be two finite numbers")


def number_pair(value: Any, error: str) -> tuple[float, float] | None:
    """None for null, else two finite numbers as floats: a model's cutoffs or calibration
    as JSON holds them; ValueError(``error``) for anything else."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2 or not all(map(_finite, value)):
        raise ValueError(error)
    return float(value[0]), float(value[1])


def _check_arrays(box: container.Container, labels: tuple[str, ...], *, fisher: bool) -> None:
    """Every array known, of an allowed type, of the shape the others and the labels give.
    A Fisher model's scoring table has no log-odds weights: its score is not linear."""
    views = box.views
    for name in views:
        if name not in ARRAYS:
            raise ValueError(f"unknown array {name!r}")
    required = [name for name in ARRAYS if name not in _SCORING and name not in _OPTIONAL]
    if "score_coef" in views:
        required += ["score_coef", "score_intercept"]
        if len(labels) == 2 and not fisher:
            required.append("score_weights")
        if fisher and "score_weights" in views:
            raise ValueError("a fisher model has no array score_weights")
    for name in required:
        if name not in views:
            raise ValueError(f"array {name} is missing")
    if ("term_groups" in views) != ("term_group_starts" in views):
        raise ValueError("arrays term_groups and term_group_starts come together")
    sizes: dict[str, int] = {"C": len(labels)}
    offsets_shape = views["term_offsets"][2]
    if len(offsets_shape) != 1 or offsets_shape[0] < 1:
        raise ValueError("array term_offsets must have one entry more than there are terms")
    sizes["d+1"] = offsets_shape[0]
    sizes["d"] = offsets_shape[0] - 1
    for name, (_, dtype, shape) in views.items():
        dtypes, dims = ARRAYS[name]
        if dtype not in dtypes:
            raise ValueError(f"array {name} has the type {dtype!r}, not {' or '.join(dtypes)}")
        if len(shape) != len(dims):
            raise ValueError(f"array {name} has {len(shape)} dimensions, not {len(dims)}")
        for dim, size in zip(dims, shape):
            expected = sizes.setdefault(dim, size) if isinstance(dim, str) else dim
            if size != expected:
                raise ValueError(f"array {name} has the shape {list(shape)}, which does not fit")


def _check_score(score: Any, train: TrainConfig, binary: bool) -> None:
    """The header's part of the scoring table: presence or counts, the log-odds bias, and
    for a Fisher model its combining (and no bias)."""
    fisher = train.event_model == "fisher"
    keys = {"binary", "bias", "combine"} if fisher else {"binary", "bias"}
    if not isinstance(score, dict) or set(score) != keys:
        raise ValueError(f"score must hold {', '.join(sorted(keys))}")
    if fisher:
        if score["combine"] != "fisher" or score["bias"] is not None:
            raise ValueError("score of a fisher model must combine by fisher, with no bias")
        binary = False  # no bias to check
    if score["binary"] is not event_model(train.event_model).presence(train):
        raise ValueError("score.binary does not follow the settings")
    if binary != (score["bias"] is not None) or (binary and not _finite(score["bias"])):
        raise ValueError("score.bias must be a finite number for two labels, else null")


def _check_values(box: ModelFile, binary: bool) -> None:
    """The values one message is scored with: the ends of the term offsets (binary search
    stays inside the terms), and the weights it sums, finite (one C loop each); and the
    labels of the messages learned, in range (a loop as long as there are messages)."""
    offsets = box.values("term_offsets")
    size = len(box.view("terms"))
    if offsets[0] != 0 or offsets[-1] != (size + 1 if len(offsets) > 1 else 0):
        raise ValueError("the term offsets do not span the terms")
    seen = box.values("seen_labels")
    if seen and (min(seen) < 0 or max(seen) >= len(box.labels)):
        raise ValueError("seen_labels has a label index out of range")
    if box.has_scoring_table:
        if box.training.event_model == "fisher":  # ln f and ln(1 - f): no weights, no intercept
            summed: tuple[str, ...] = ("score_coef",)
        else:
            summed = ("score_weights",) if binary else ("score_coef", "score_intercept")
        for name in summed:
            if not math.isfinite(sum(box.values(name))):
                raise ValueError(f"{name} holds a number that is not finite")


def _whole(value: Any) -> bool:
    return type(value) is int


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _finite(value: Any) -> bool:
    try:
        return type(value) in (int, float) and math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False
