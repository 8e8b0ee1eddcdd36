"""Crafted model files with a valid checksum, special files as models, and writes through
links and onto device nodes: each refused in one line, in bounded time, losing nothing."""

from __future__ import annotations

import io
import json
import math
import os
import resource
import stat
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from nbspam.cli import fast_start
from nbspam.store.container import MAGIC, PAGE, PAGES
from tests.helpers import NEIGHBOUR, cli_run, nbspam_process, neighbours

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
MESSAGE = (SAMPLE / "train" / "spam" / "001.eml").read_bytes()
_PREFIX = struct.Struct("<8sII")
_MADE = object()  # the array table of the arrays given


@pytest.fixture(scope="module")
def original(sample_model_path) -> bytes:
    """A real two-class model file with cutoffs, calibration and learned messages."""
    return sample_model_path.read_bytes()


def unpack(data: bytes) -> tuple[dict, dict[str, list]]:
    """(header, name -> [dtype, shape, bytes]) of a model file, without checking it."""
    _, _, head_len = _PREFIX.unpack_from(data)
    header = json.loads(data[_PREFIX.size : _PREFIX.size + head_len])
    start = (_PREFIX.size + head_len + 7) // 8 * 8
    arrays = {}
    for name, spec in sorted(header.pop("arrays").items(), key=lambda item: item[1]["offset"]):
        size = int(spec["dtype"][2:]) * math.prod(spec["shape"])
        offset = start + spec["offset"]
        arrays[name] = [spec["dtype"], spec["shape"], data[offset : offset + size]]
    return header, arrays


def pack(
    header, arrays: dict[str, list], *, table=_MADE, head: bytes | None = None, pages=True
) -> bytes:
    """A model file of this header and these arrays with a valid checksum, and valid page
    checksums if it has them (as a crafter computes them). The array table says what
    ``arrays`` hold unless ``table`` replaces it; ``head`` replaces the JSON."""
    if pages and PAGES in arrays:
        return _with_pages(header, arrays, table, head)
    blobs, offset, made = [], 0, {}
    for name, (dtype, shape, data) in arrays.items():
        made[name] = {"dtype": dtype, "shape": shape, "offset": offset}
        padded = data + b"\0" * (-len(data) % 8)
        blobs.append(padded)
        offset += len(padded)
    if isinstance(header, dict):
        header = {**header, "arrays": made if table is _MADE else table}
    if head is None:
        head = json.dumps(header, sort_keys=True, ensure_ascii=False).encode()
    body = _PREFIX.pack(MAGIC, 1, len(head)) + head
    body += b"\0" * (-len(body) % 8) + b"".join(blobs)
    return body + struct.pack("<I", zlib.crc32(body))


def _with_pages(header, arrays, table, head) -> bytes:
    """`pack` with the page checksums of what it packs, computed from a first packing."""
    others = {name: spec for name, spec in arrays.items() if name != PAGES}
    empty = {**others, PAGES: ["<u4", arrays[PAGES][1], b""]}
    body = pack(header, empty, table=table, head=head, pages=False)
    _, _, head_len = _PREFIX.unpack_from(body)
    start = (_PREFIX.size + head_len + 7) // 8 * 8
    blobs = body[start:-4]
    crcs = [zlib.crc32(body[:start])]
    crcs += [zlib.crc32(blobs[at : at + PAGE]) for at in range(0, len(blobs), PAGE)]
    crcs += [0] * (arrays[PAGES][1][0] - len(crcs))  # a table that no longer fits: refused
    data = struct.pack(f"<{len(crcs)}I", *crcs)
    body = body[:-4] + data + b"\0" * (-len(data) % 8)
    return body + struct.pack("<I", zlib.crc32(body))


def craft(data: bytes, edit) -> bytes:
    """``data`` with ``edit(header, arrays)`` applied; it may return a header to use, or
    the keyword arguments of `pack` (a dict with 'table' or 'head')."""
    header, arrays = unpack(data)
    result = edit(header, arrays)
    if isinstance(result, dict) and set(result) <= {"table", "head"} and result:
        return pack(header, arrays, **result)
    return pack(header if result is None else result, arrays)


def doubles(values) -> bytes:
    return struct.pack(f"<{len(values)}d", *values)


def put(arrays, name, index, fmt, value):
    """Write one number into an array's bytes."""
    data = bytearray(arrays[name][2])
    struct.pack_into(fmt, data, index * struct.calcsize(fmt), value)
    arrays[name][2] = bytes(data)


def table_with(header, arrays, name, **changes):
    """The array table ``pack`` would write, with one entry changed."""
    table, offset = {}, 0
    for key, (dtype, shape, data) in arrays.items():
        table[key] = {"dtype": dtype, "shape": shape, "offset": offset}
        offset += (len(data) + 7) // 8 * 8
    table[name] = {**table[name], **changes}
    return {"table": table}


def _set(mapping, key, value):
    mapping[key] = value


def _deep(header, arrays):
    text = json.dumps({**header, "arrays": {}})
    return {"head": (text[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()}


def _unsorted_terms(header, arrays):
    """Two terms of the same length swapped: offsets stay right, the order does not."""
    terms = arrays["terms"][2].split(b"\n")
    i = next(i for i in range(len(terms) - 1) if len(terms[i]) == len(terms[i + 1]))
    terms[i], terms[i + 1] = terms[i + 1], terms[i]
    arrays["terms"][2] = b"\n".join(terms)


# Where a flaw is refused: ALL commands; or where the whole scoring table is read (WHOLE:
# predict with a PATH, info, learn); or where the vocabulary is decoded (VOCAB: the same); or where a
# whole Model is built (FULL: info, learn). Scoring one message reads neither the counts, the
# learned messages nor the whole vocabulary, and checks only what it reads.
ALL, WHOLE, VOCAB, FULL = "all", "whole", "vocab", "full"


def _offset(arrays, i: int) -> int:
    """Offset ``i`` of the model's terms."""
    return struct.unpack_from("<I", arrays["term_offsets"][2], 4 * i)[0]


def _column(arrays, term: bytes) -> int:
    """The column of ``term`` (a term of MESSAGE) in the model's vocabulary."""
    return arrays["terms"][2].split(b"\n").index(term)


CASES = [
    ("header is a list", lambda h, a: [h], ALL),
    ("header is null", lambda h, a: {"head": b"null"}, ALL),
    ("header is a string", lambda h, a: {"head": b'"nbspam-model"'}, ALL),
    ("header is not JSON", lambda h, a: {"head": b'{"format": "nbspam-model", '}, ALL),
    ("arrays is null", lambda h, a: {"table": None}, ALL),
    ("arrays is a list", lambda h, a: {"table": []}, ALL),
    ("JSON nested 100,000 deep", _deep, ALL),
    ("a NaN in the header", lambda h, a: _set(h, "cutoffs", [float("nan"), 1.0]), ALL),
    ("an unknown header field", lambda h, a: _set(h, "colour", "red"), ALL),
    ("no labels", lambda h, a: h.pop("labels") and None, ALL),
    ("format_version is text", lambda h, a: _set(h, "format_version", "1"), ALL),
    ("nbspam_version is a number", lambda h, a: _set(h, "nbspam_version", 1), ALL),
    ("info is a list", lambda h, a: _set(h, "info", []), ALL),
    ("info.auto a number", lambda h, a: _set(h, "info", {"auto": 5}), ALL),
    ("info.auto without folds", lambda h, a: _set(h, "info", {"auto": {"chosen": "x"}}), ALL),
    ("info.pruned a number", lambda h, a: _set(h, "info", {"pruned": 5}), ALL),
    ("info.pruned of text", lambda h, a: _set(h["info"], "pruned", {"terms_dropped": "a"}), ALL),
    ("info.expired a list", lambda h, a: _set(h["info"], "expired", [1]), ALL),
    ("one-element calibration", lambda h, a: _set(h, "calibration", [1.0]), ALL),
    ("calibration of text", lambda h, a: _set(h, "calibration", ["a", "b"]), ALL),
    ("calibration huge", lambda h, a: _set(h, "calibration", [10**400, 1]), ALL),
    ("cutoffs reversed", lambda h, a: _set(h, "cutoffs", [5.0, -5.0]), ALL),
    ("cutoffs infinite", lambda h, a: _set(h, "cutoffs", [-1e999, 1.0]), ALL),
    ("labels empty", lambda h, a: _set(h, "labels", []), ALL),
    ("one label", lambda h, a: _set(h, "labels", ["spam"]), ALL),
    ("labels not strings", lambda h, a: _set(h, "labels", [1, 2]), ALL),
    ("labels null", lambda h, a: _set(h, "labels", None), ALL),
    ("an empty label", lambda h, a: _set(h, "labels", ["", "spam"]), ALL),
    ("a label twice", lambda h, a: _set(h, "labels", ["spam", "spam"]), ALL),
    ("labels unsorted", lambda h, a: _set(h, "labels", ["spam", "ham"]), ALL),
    ("a label of 10,000 chars", lambda h, a: _set(h, "labels", ["ham", "s" * 10_000]), ALL),
    ("a million labels", lambda h, a: _set(h, "labels", [f"l{i:07}" for i in range(10**6)]), ALL),
    ("positive not a label", lambda h, a: _set(h["train"], "positive", "phish"), ALL),
    ("positive null", lambda h, a: _set(h["train"], "positive", None), ALL),
    ("positive a number", lambda h, a: _set(h["train"], "positive", 1), ALL),
    ("ngrams 10^9", lambda h, a: _set(h["tokenizer"], "ngrams", 10**9), ALL),
    ("ngrams text", lambda h, a: _set(h["tokenizer"], "ngrams", "2"), ALL),
    # each message's header names are matched against them all, as one regular expression
    # compiled per process: 400,000 of them took 18 s and 950 MB for every message
    (
        "ignore_headers 20,000 globs",
        lambda h, a: _set(h["tokenizer"], "ignore_headers", [f"x*{i}?z" for i in range(20_000)]),
        ALL,
    ),
    ("ignore_headers a long glob", lambda h, a: _set(h["tokenizer"], "ignore_headers", ["x*" * 5000]), ALL),
    ("max_length < min_length", lambda h, a: _set(h["tokenizer"], "max_length", 1), ALL),
    ("stop_words text", lambda h, a: _set(h["tokenizer"], "stop_words", "english"), ALL),
    ("tokenizer a list", lambda h, a: _set(h, "tokenizer", []), ALL),
    ("train null", lambda h, a: _set(h, "train", None), ALL),
    ("an unknown setting", lambda h, a: _set(h["train"], "colour", 1), ALL),
    ("alpha negative", lambda h, a: _set(h["train"], "alpha", -1), ALL),
    ("alpha 10^400", lambda h, a: _set(h["train"], "alpha", 10**400), ALL),
    ("prior of other labels", lambda h, a: _set(h["train"], "prior", [["x", 1], ["y", 1]]), ALL),
    ("prior malformed", lambda h, a: _set(h["train"], "prior", [[1]]), ALL),
    ("fisher settings on a linear table", lambda h, a: _set(h["train"], "event_model", "fisher"), ALL),
    ("an unknown event model", lambda h, a: _set(h["train"], "event_model", "gauss"), ALL),
    ("complement_norm text", lambda h, a: _set(h["train"], "complement_norm", "yes"), ALL),
    ("select unknown", lambda h, a: _set(h["train"], "select", "chi2"), ALL),
    ("select mi, no max_features", lambda h, a: _set(h["train"], "select", "mi"), ALL),
    ("fisher combining of a linear model", lambda h, a: _set(h["score"], "combine", "fisher"), ALL),
    ("fisher strength 0", lambda h, a: _set(h["train"], "strength", 0), ALL),
    ("fisher min_dev 0.5", lambda h, a: _set(h["train"], "min_dev", 0.5), ALL),
    ("score missing", lambda h, a: h.pop("score") and None, ALL),
    ("score.binary wrong", lambda h, a: _set(h["score"], "binary", not h["score"]["binary"]), ALL),
    ("bias null", lambda h, a: _set(h["score"], "bias", None), ALL),
    ("bias text", lambda h, a: _set(h["score"], "bias", "0"), ALL),
    ("bias infinite", lambda h, a: _set(h["score"], "bias", 1e999), ALL),
    ("weights float32", lambda h, a: _set(a["score_weights"], 0, "<f4"), ALL),
    ("weights big-endian", lambda h, a: _set(a["score_weights"], 0, ">f8"), ALL),
    ("weights integers", lambda h, a: _set(a["score_weights"], 0, "<i8"), ALL),
    ("offsets signed", lambda h, a: _set(a["term_offsets"], 0, "<i4"), ALL),
    ("an object array", lambda h, a: table_with(h, a, "terms", dtype="|O"), ALL),
    ("dtype a number", lambda h, a: table_with(h, a, "terms", dtype=8), ALL),
    ("no class_count", lambda h, a: a.pop("class_count") and None, ALL),
    ("no terms", lambda h, a: a.pop("terms") and None, ALL),
    ("no term_offsets", lambda h, a: a.pop("term_offsets") and None, ALL),
    ("no seen_labels", lambda h, a: a.pop("seen_labels") and None, ALL),
    ("no score_intercept", lambda h, a: a.pop("score_intercept") and None, ALL),
    ("no score_weights", lambda h, a: a.pop("score_weights") and None, ALL),
    ("an unknown array", lambda h, a: _set(a, "extra", ["<f8", [1], doubles([0])]), ALL),
    ("shape 10^12", lambda h, a: table_with(h, a, "term_count", shape=[2, 10**12]), ALL),
    ("shape negative", lambda h, a: table_with(h, a, "terms", shape=[-1]), ALL),
    ("shape of lists", lambda h, a: table_with(h, a, "terms", shape=[[1]]), ALL),
    ("shape true", lambda h, a: table_with(h, a, "class_count", shape=[True, True]), ALL),
    ("shape text", lambda h, a: table_with(h, a, "terms", shape="12"), ALL),
    ("offset negative", lambda h, a: table_with(h, a, "terms", offset=-8), ALL),
    ("offset overlapping", lambda h, a: table_with(h, a, "term_offsets", offset=0), ALL),
    ("offset huge", lambda h, a: table_with(h, a, "terms", offset=2**62), ALL),
    ("a spec without offset", lambda h, a: table_with(h, a, "terms", offset=None), ALL),
    ("a spec that is a list", lambda h, a: {"table": {"terms": [1, 2, 3]}}, ALL),
    ("counts transposed", lambda h, a: a["term_count"][1].reverse(), ALL),
    ("counts 3-D", lambda h, a: a["term_count"][1].append(1), ALL),
    ("class_count for 3 labels", lambda h, a: _set(a["class_count"][1], 0, 3), ALL),
    ("offsets not from 0", lambda h, a: put(a, "term_offsets", 0, "<I", 1), ALL),
    ("offsets beyond terms", lambda h, a: put(a, "term_offsets", -1, "<i", -1), ALL),
    ("a NaN weight", lambda h, a: put(a, "score_weights", 3, "<d", math.nan), WHOLE),
    ("an infinite weight", lambda h, a: put(a, "score_weights", 0, "<d", -math.inf), WHOLE),
    (
        "a NaN weight of the message",
        lambda h, a: put(a, "score_weights", _column(a, b"winner"), "<d", math.nan),
        ALL,
    ),
    (
        "an infinite weight of the message",
        lambda h, a: put(a, "score_weights", _column(a, b"programme"), "<d", math.inf),
        ALL,
    ),
    ("seen label 2 of 2", lambda h, a: put(a, "seen_labels", 0, "<i", 2), FULL),
    ("seen label -1", lambda h, a: put(a, "seen_labels", 1, "<i", -1), FULL),
    ("a NaN coefficient", lambda h, a: put(a, "score_coef", 0, "<d", math.nan), FULL),
    ("a NaN intercept", lambda h, a: put(a, "score_intercept", 0, "<d", math.nan), ALL),
    ("a negative count", lambda h, a: put(a, "doc_count", 0, "<i", -1), FULL),
    ("a negative class count", lambda h, a: put(a, "class_count", 0, "<i", -5), FULL),
    ("terms not UTF-8", lambda h, a: _set(a["terms"], 2, b"\xff" + a["terms"][2][1:]), VOCAB),
    ("terms unsorted", _unsorted_terms, VOCAB),
    ("offsets in between wrong", lambda h, a: put(a, "term_offsets", 1, "<I", 1), FULL),
    ("offsets decreasing", lambda h, a: put(a, "term_offsets", 2, "<I", 0), FULL),
    ("an offset past the terms", lambda h, a: put(a, "term_offsets", 1, "<I", 2**32 - 1), FULL),
    ("an offset twice", lambda h, a: put(a, "term_offsets", 1, "<I", _offset(a, 2)), FULL),
]


def test_the_helper_packs_the_file_it_unpacks(original):
    assert pack(*unpack(original)) == original


@pytest.fixture(params=CASES, ids=[case[0] for case in CASES])
def hostile(request, original, tmp_path) -> tuple[Path, str]:
    _, edit, where = request.param
    path = tmp_path / "hostile.nbm"
    path.write_bytes(craft(original, edit))
    return path, where


def one_message(args: list[str], monkeypatch, capsysbinary) -> tuple[int, bytes, list[str]]:
    """The exit status, stdout and stderr lines of a one-message command (`fast_start`), run in
    this process with MESSAGE on stdin."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MESSAGE)))
    monkeypatch.setattr(sys, "argv", ["nbspam", *args])
    with pytest.raises(SystemExit) as stop:
        fast_start.main()
    status = stop.value.code
    out, err = capsysbinary.readouterr()
    return status, out, err.decode().splitlines()


def refused(lines: list[str], path: Path) -> bool:
    """One line, the error about the model at ``path``."""
    return len(lines) == 1 and lines[0].startswith("Error: ") and f" {path}" in lines[0]


def test_crafted_models_are_refused_in_one_line(hostile, monkeypatch, capsysbinary, tmp_path):
    path, where = hostile
    before = path.read_bytes()
    status, out, err = one_message(["predict", "-m", str(path)], monkeypatch, capsysbinary)
    if where == ALL:
        assert (status, out, refused(err, path)) == (1, b"", True), err
    else:
        assert (status, err) == (0, [])
    status, out, err = one_message(["filter", "-m", str(path)], monkeypatch, capsysbinary)
    if where == ALL:
        assert (status, out, refused(err, path)) == (1, MESSAGE, True), err  # passed on whole
    message = tmp_path / "message.eml"
    message.write_bytes(MESSAGE)
    # learn appends to the journal without reading the whole model: the fold refuses it
    commands = [["info", "-m", path], ["compact", "-m", path]]
    if where != FULL:
        commands.append(["predict", "-m", path, message])
    for args in commands:
        result = cli_run(*args)
        assert isinstance(result.exception, SystemExit), (args[0], result.exception)
        assert (result.exit_code, result.stdout) == (1, ""), args[0]
        assert refused(result.stderr.splitlines(), path), (args[0], result.stderr)
    assert path.read_bytes() == before  # compact changed nothing


# -- special files as models -------------------------------------------------------------


def nbspam(*args, stdin: bytes = MESSAGE) -> subprocess.CompletedProcess:
    """`python -m nbspam ARGS` in a child process with 1 GB of memory, killed (failing the
    test) after 60 s."""
    return nbspam_process(
        *args,
        stdin=stdin,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_DATA, (2**30, 2**30)),
    )


@pytest.fixture(params=["fifo", "folder", "/dev/zero", "/dev/urandom", "sparse 2 GB"])
def special(request, original, tmp_path) -> Path:
    if request.param.startswith("/dev/"):
        return Path(request.param)
    path = tmp_path / "special.nbm"
    if request.param == "fifo":
        os.mkfifo(path)
    elif request.param == "folder":
        path.mkdir()
    else:  # a model file followed by 2 GB of holes: refused without reading them
        path.write_bytes(original)
        os.truncate(path, 2**31)
    return path


def test_special_files_as_models_are_refused_quickly_in_one_line(special, tmp_path):
    message = tmp_path / "message.eml"
    message.write_bytes(MESSAGE)
    for args in (
        ["predict", "-m", special],
        ["predict", "-m", special, message],
        ["info", "-m", special],
        ["learn", "-m", special, "--label", "spam", message],
    ):
        result = nbspam(*args)
        assert (result.returncode, result.stdout) == (1, b""), args
        assert refused(result.stderr.decode().splitlines(), special), result.stderr
    result = nbspam("filter", "-m", special)
    assert (result.returncode, result.stdout) == (1, MESSAGE)
    assert len(result.stderr.splitlines()) == 1
    if special.is_relative_to(tmp_path):  # learn locked a regular file, and wrote nothing
        names = {p.name for p in tmp_path.iterdir()} - {"special.nbm.lock"}
        assert names == {"message.eml", "special.nbm"}
        assert special.is_fifo() or special.is_dir() or special.stat().st_size == 2**31


# -- writing models ----------------------------------------------------------------------


def messages_learned(path: Path) -> int:
    return json.loads(cli_run("info", "-m", path, "-f", "json").stdout)["messages"]


def test_writing_through_a_symbolic_link_updates_its_target(tmp_path):
    (tmp_path / "shared").mkdir()
    target = tmp_path / "shared" / "model.nbm"
    link = tmp_path / "link.nbm"
    link.symlink_to(target)  # dangling until trained
    assert cli_run("train", SAMPLE / "train", "-o", link).exit_code == 0
    assert link.is_symlink() and target.is_file()
    before = messages_learned(target)
    message = tmp_path / "new.eml"
    message.write_bytes(b"Subject: hello\n\nsomething new to learn\n")
    assert cli_run("learn", "-m", link, "--label", "ham", message).exit_code == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert messages_learned(target) == before + 1
    # the lock and any temporary file go beside the target, where another link's writer looks
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.nbm", "new.eml", "shared"]
    assert sorted(p.name for p in target.parent.iterdir()) == [
        "model.nbm",
        "model.nbm.journal",
        "model.nbm.lock",
    ]


@pytest.mark.parametrize("command", ["train", "restore", "learn"])
@pytest.mark.parametrize("way", ["link", "link to a link", "folder"])
def test_a_model_behind_a_link_of_another_user_is_not_written(
    command, way, sample_model, tmp_path
):
    victim = tmp_path / "etc" / "passwd"
    victim.parent.mkdir()
    victim.write_text("root:x:0:0\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    if way == "folder":  # the neighbour's link in place of a folder on the way
        planted = shared / "models"
        planted.symlink_to(victim.parent)
        model = planted / "passwd"
    else:
        planted = shared / ("real.nbm" if way == "link to a link" else "spam.nbm")
        planted.symlink_to(victim)
        model = shared / "spam.nbm"
        if way == "link to a link":  # a link of one's own to a name where the neighbour put theirs
            model.symlink_to(planted)
    neighbours(planted)
    dump = tmp_path / "spam.dump"
    assert cli_run("dump", "-m", sample_model, "-o", dump).exit_code == 0
    args = {
        "train": ["train", SAMPLE / "train", "-o", model],
        "restore": ["restore", dump, "-o", model],
        "learn": ["learn", "-m", model, "-l", "ham", SAMPLE / "new" / "001.eml"],
    }[command]
    result = cli_run(*args)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: model file {model}: {planted} is a symbolic link of another user (uid {NEIGHBOUR}): "
        "refusing to follow it; remove it\n",
    )
    assert victim.read_text() == "root:x:0:0\n"
    assert os.listdir(victim.parent) == ["passwd"]  # no lock, no temporary beside it


def device(path: Path, minor: int) -> Path:
    """A character device node like /dev/null (minor 3) or /dev/full (7), made at ``path``
    so that a failure cannot harm the real ones."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


@pytest.mark.parametrize("kind", ["null", "full", "fifo", "folder", "link to null"])
def test_writing_refuses_what_is_not_a_regular_file(kind, tmp_path):
    path = tmp_path / "out"
    if kind in ("null", "full"):
        device(path, 3 if kind == "null" else 7)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        device(tmp_path / "null", 3)
        (tmp_path / "out").symlink_to(tmp_path / "null")
    names = sorted(p.name for p in tmp_path.iterdir())
    mode = path.stat().st_mode
    result = cli_run("train", SAMPLE / "train", "-o", path)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()[-1:]
    assert line.startswith(f"Error: cannot write {path}: it is a ")
    assert line.endswith(", not a regular file")
    assert path.stat().st_mode == mode  # still what it was, nothing made beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_training_refuses_labels_that_a_model_file_cannot_hold(tmp_path):
    table = tmp_path / "long.tsv"
    table.write_text(f"ham\thello there\n{'s' * 1001}\tbuy now\n")
    result = cli_run("train", table, "-o", tmp_path / "m.nbm")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith("Error: a label must have 1 to 1,000 ")
    assert not (tmp_path / "m.nbm").exists()
