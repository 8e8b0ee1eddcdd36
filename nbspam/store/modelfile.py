"""A Model to and from its file (`container`): counts, settings, and a scoring table.

Arrays: ``terms`` (uint8, the sorted vocabulary as UTF-8 joined by line breaks),
``term_offsets`` (d + 1,) where each term starts in ``terms``, ``class_count`` (C,),
``term_count`` (C, d) and ``doc_count`` (C, d); ``seen_digests`` (n, 16) uint8 and
``seen_labels`` (n,), the messages learned, and ``seen_times`` (n,) int64, when each was
learned (seconds since 1970, -1 unknown; files written before it are read as all unknown). Integers are 32-bit where the values fit, else
64-bit. The model is rebuilt from these counts (as int64).

The scoring table lets one message be scored without numpy (`array_scoring`): ``score_coef``
(C, d) and ``score_intercept`` (C,) float64, the linear form of the scorer over the whole
vocabulary (zero for terms the filters drop), and for two-class models ``score_weights``
(d,) float64, the log-odds weights, with the bias in the header. A Fisher model's
``score_coef`` holds ln f in the positive class's row and ln(1 - f) in the other (zero
for words that are no clue), with ``"combine": "fisher"`` in the header and no weights. It
is derived from the counts when the file is written, never read back into a Model.
``page_crc`` (`container.PAGES`) lets one message be scored from the pages it reads.

The term groups let one message look a term up reading one page
(`array_scoring.PagedTable`): the vocabulary cut into groups at each `GROUP_BYTES` of
``terms``, ``term_groups`` (uint8) the first term of each group joined by line
breaks, and ``term_group_starts`` (2, g + 1) the column of each group's first term and
where it starts in ``terms``, each row ending with d and the end of ``terms`` (its
length + 1; 0 for no terms). Derived from the vocabulary when the file is written.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..models.decision import stored_cutoffs
from ..models.model import Model
from ..models.scoring_forms import LinearForm
from ..text.vocabulary import Terms
from . import container, schema
from .container import Blob

# bytes of terms a group of `term_groups` starts in: smaller groups are quicker to search
# and more to read when the file is opened (1,024 and 2,048 cost the same on the SpamAssassin model)
GROUP_BYTES = 2048
_COUNTS = ("class_count", "term_count", "doc_count", "seen_labels")
_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")  # U+D800 to U+DFFF, as surrogatepass writes them


def save_model(model: Model, path: str | os.PathLike[str]) -> None:
    """Write ``model`` to ``path`` atomically (see `container.write`)."""
    # the terms as UTF-8 lines (no term holds a line break): the model's own packing
    # (`vocabulary.Terms`), term i is blob[offsets[i] : offsets[i + 1] - 1]
    terms = model.terms if isinstance(model.terms, Terms) else Terms.of(model.terms)
    blob, offsets = terms.blob, terms.offsets.astype(np.uint64)
    if _SURROGATE.search(memoryview(blob)):  # a lone surrogate (text can hold one)
        raise ValueError("a term holds a lone surrogate, which UTF-8 cannot")
    width = "<u4" if offsets[-1] < 2**32 else "<u8"
    arrays = {"terms": blob, "term_offsets": offsets.astype(width)}
    # counts as 32-bit integers when they fit: a smaller file is quicker to read and check
    arrays.update({name: _compact(getattr(model, name)) for name in _COUNTS})
    arrays["seen_digests"] = np.ascontiguousarray(model.seen_digests, np.uint8)
    arrays["seen_times"] = np.ascontiguousarray(model.seen_times, "<i8")
    for name, want in (("seen_labels", "<i4"), ("seen_digests", "|u1"), ("seen_times", "<i8")):
        if _mapped(getattr(model, name), want):  # on disk: left there, not copied
            arrays[name] = getattr(model, name)
    sc = model.form
    coef = np.zeros((len(model.labels), len(model.terms)), "<f8")
    coef[:, sc.kept] = sc.coef
    arrays["score_coef"] = coef
    arrays["score_intercept"] = np.asarray(sc.intercept, "<f8")
    linear = isinstance(sc, LinearForm)
    if linear and sc.weights is not None:
        weights = np.zeros(len(model.terms), "<f8")
        weights[sc.kept] = sc.weights
        arrays["score_weights"] = weights
    arrays["term_groups"], starts = term_groups(model.terms, offsets)
    arrays["term_group_starts"] = starts.astype(width)
    header = {
        "labels": list(model.labels),
        "tokenizer": model.tokenizer.as_dict(),
        "train": model.training.as_dict(),
        "info": model.info,
        "cutoffs": stored_cutoffs(model.cutoffs),
        "calibration": None if model.calibration is None else list(model.calibration),
        "score": {"binary": sc.binary, "bias": sc.bias}
        if linear
        else {"binary": True, "bias": None, "combine": "fisher"},
    }
    blobs = {
        name: Blob(b"", a.dtype.str, a.shape, chunks=_chunks_of(a))
        if _mapped(a, a.dtype.str)
        else Blob(np.ascontiguousarray(a).reshape(-1).view(np.uint8).data, a.dtype.str, a.shape)
        for name, a in arrays.items()
    }
    container.write(path, header, blobs, pages=True)


def term_groups(terms: tuple[str, ...], offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``term_groups``, ``term_group_starts``) of the vocabulary ``terms`` whose offsets in
    the terms blob are ``offsets``: a group begins with the term that holds each multiple of
    `GROUP_BYTES` (the byte there, or the line break after it), so that the rest of a group,
    all a lookup reads, lies between two multiples: in one page of the file (the terms blob
    is its first array, at a page's start). Which terms begin groups is the writer's choice:
    readers take any groups of the vocabulary."""
    bounds = np.arange(0, int(offsets[-1]), GROUP_BYTES, dtype=np.uint64)
    at = np.searchsorted(offsets[:-1], bounds, side="right") - 1  # sorted, from 0
    # each first of a run, not np.unique: numpy 2's imports numpy.ma on first use, 10 ms
    # of training's serial end
    firsts = at[np.diff(at, prepend=-1) != 0]
    text = "\n".join([terms[k] for k in firsts.tolist()]).encode("utf-8")
    columns = np.append(firsts, len(terms)).astype(np.uint64)
    starts = np.stack([columns, offsets[columns.astype(np.intp)]])
    return np.frombuffer(text, np.uint8), starts.astype(np.uint64)


def write_model(model: Model, path: str | os.PathLike[str]) -> None:
    """Write ``model`` to ``path`` under the model's lock (`lock.model_lock`): a writer that
    updates the same file waits, and readers see the old file or the new."""
    from .lock import model_lock

    with model_lock(path):
        save_model(model, path)


def load_model(path: str | os.PathLike[str]) -> Model:
    """Read a model file with its `journal` applied, refusing a bad one as `schema.read`
    and `schema.check_counts` do. Never unpickles."""
    return load_journalled(path)[0]


def load_journalled(path: str | os.PathLike[str]) -> tuple[Model, tuple[int, int], int]:
    """(the model of the file with its `journal` applied, the fingerprint of the file the
    journal is bound to, the number of records applied). A file replaced while it is read
    (its journal then belongs to the new one) is read again."""
    from . import journal

    for _ in range(5):
        box = schema.read(path)
        contents = journal.pending(path, box.fingerprint)
        if contents is not None or container.fingerprint(path) == box.fingerprint:
            break
    records = contents.records if contents is not None else []
    return journal.apply(_model(path, box), records), box.fingerprint, len(records)


def _model(path: str | os.PathLike[str], box: schema.ModelFile) -> Model:
    """The Model of a checked model file (without its journal)."""
    schema.check_counts(path, box)
    _none = np.zeros(0, np.int64)  # a file written before learn times: all unknown
    arrays = {
        name: np.frombuffer(view, np.dtype(dtype)).reshape(shape)
        for name, (view, dtype, shape) in box.views.items()
    }
    return Model(
        labels=box.labels,
        terms=_terms(path, box, arrays["term_offsets"]),
        class_count=arrays["class_count"].astype(np.int64),
        term_count=arrays["term_count"].astype(np.int64),
        doc_count=arrays["doc_count"].astype(np.int64),
        seen_digests=arrays["seen_digests"],
        seen_labels=arrays["seen_labels"].astype(np.int64),
        seen_times=arrays["seen_times"].astype(np.int64) if "seen_times" in arrays else _none,
        tokenizer=box.tokenizer,
        training=box.training,
        cutoffs=box.cutoffs,
        calibration=box.calibration,
        info=box.info,
    )


def _terms(path: str | os.PathLike[str], box: schema.ModelFile, offsets: np.ndarray) -> Terms:
    """The checked vocabulary of a model file, packed as the file holds it (its UTF-8, as
    the digests are, and its ``offsets``, which `schema.check_counts` found at the line
    breaks), with the terms the check decoded (what scoring and learning with it read)."""
    strings = schema.terms(path, box)
    blob = np.frombuffer(box.view("terms"), np.uint8)
    return Terms(blob, offsets.astype(np.int64), ordered=True, strings=strings)


def part_sizes(path: str | os.PathLike[str]) -> dict[str, int]:
    """The bytes each part of a model file takes: terms (the vocabulary and its offsets),
    counts (class, term and document counts), digests (the messages learned: digests, labels
    and learn times) and scoring (the scoring table); and the whole file."""
    views = schema.read(path).views
    sizes = dict.fromkeys(("terms", "counts", "digests", "scoring"), 0)
    for name, (view, _, _) in views.items():
        sizes[_PARTS[name]] += view.nbytes
    sizes["file"] = os.path.getsize(path)
    return sizes


_PARTS = {
    "terms": "terms",
    "term_offsets": "terms",
    "class_count": "counts",
    "term_count": "counts",
    "doc_count": "counts",
    "seen_digests": "digests",
    "seen_labels": "digests",
    "seen_times": "digests",
    "score_coef": "scoring",
    "score_intercept": "scoring",
    "score_weights": "scoring",
    container.PAGES: "scoring",
    "term_groups": "terms",
    "term_group_starts": "terms",
}


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checked JSON header of a model file (format and nbspam versions, settings, info)."""
    return schema.read(path).header


remove_leftovers = container.remove_leftovers


def _mapped(a: np.ndarray, dtype: str) -> bool:
    """Whether ``a`` is a C-contiguous array of ``dtype`` mapped from a whole file (as
    `cluster` spools a model's digests): `_chunks_of` writes it from there."""
    return (
        isinstance(a, np.memmap)
        and isinstance(a.base, mmap.mmap)
        and a.offset == 0
        and a.dtype.str == dtype
        and a.flags.c_contiguous
    )


def _chunks_of(a: np.memmap, size: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of a mapped array (`_mapped`) in pieces of ``size``, each dropped from
    memory once read: writing a large one does not keep it resident."""
    flat = a.reshape(-1).view(np.uint8)
    for at in range(0, flat.size, size):
        yield flat[at : at + size].tobytes()
        a.base.madvise(mmap.MADV_DONTNEED, at, min(size, flat.size - at))


def _compact(counts: np.ndarray) -> np.ndarray:
    fits = counts.size == 0 or (counts.min() >= -(2**31) and counts.max() < 2**31)
    return counts.astype("<i4" if fits else "<i8")
