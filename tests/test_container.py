"""The model file's container (`container`) and what it must hold (`schema`), on their own."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from nbspam import __version__
from nbspam.errors import ModelFileError
from nbspam.store import container, schema
from nbspam.store.container import FORMAT_VERSION, MAGIC, Blob

HEADER = {"note": "hello", "labels": ["ham", "spam"]}
BLOBS = {
    "bytes": Blob(b"abc", "|u1", (3,)),  # 3 bytes: padded to 8
    "ints": Blob(struct.pack("<3i", 1, -2, 3), "<i4", (3,)),  # 12 bytes: padded to 16
    "doubles": Blob(struct.pack("<2d", 0.5, -1.25), "<f8", (2, 1)),
}


@pytest.fixture
def written(tmp_path):
    path = tmp_path / "c.bin"
    container.write(path, HEADER, BLOBS)
    return path


def layout(data: bytes) -> tuple[int, int, dict, int]:
    """(version, header length, header, where the blobs start) of a container's bytes."""
    magic, version, head_len = struct.unpack_from("<8sII", data)
    assert magic == MAGIC
    header = json.loads(data[16 : 16 + head_len])
    return version, head_len, header, (16 + head_len + 7) // 8 * 8


def test_a_round_trip_gives_back_the_header_and_every_array(written):
    box = container.read(written)
    assert {k: box.header[k] for k in HEADER} == HEADER
    assert box.header["format"] == "nbspam-model"
    assert box.header["format_version"] == FORMAT_VERSION
    assert box.header["nbspam_version"] == __version__
    assert box.header["arrays"] == {
        "bytes": {"dtype": "|u1", "shape": [3], "offset": 0},
        "ints": {"dtype": "<i4", "shape": [3], "offset": 8},
        "doubles": {"dtype": "<f8", "shape": [2, 1], "offset": 24},
    }
    assert bytes(box.view("bytes")) == b"abc"
    assert struct.unpack("<3i", box.view("ints")) == (1, -2, 3)
    assert struct.unpack("<2d", box.view("doubles")) == (0.5, -1.25)
    assert {name: view[1:] for name, view in box.views.items()} == {
        "bytes": ("|u1", (3,)),
        "ints": ("<i4", (3,)),
        "doubles": ("<f8", (2, 1)),
    }


def test_the_prefix_is_magic_version_and_header_length(written):
    data = written.read_bytes()
    assert data[:8] == b"\x89NBSPAM\n"
    assert data[8:12] == struct.pack("<I", 1)
    head_len = struct.unpack("<I", data[12:16])[0]
    head = data[16 : 16 + head_len]
    assert (
        head == json.dumps(json.loads(head), sort_keys=True, ensure_ascii=False).encode()
    )  # the whole JSON, nothing more
    assert data[16 + head_len] == 0  # padding follows


def test_blobs_start_at_multiples_of_8_and_the_crc_ends_the_file(written):
    data = written.read_bytes()
    _, head_len, header, start = layout(data)
    assert start % 8 == 0
    assert set(data[16 + head_len : start]) <= {0}
    blobs = data[start:-4]
    assert len(blobs) == 8 + 16 + 16
    for name, blob in BLOBS.items():
        offset = header["arrays"][name]["offset"]
        assert (start + offset) % 8 == 0
        assert blobs[offset : offset + len(blob.data)] == blob.data
    assert blobs[3:8] == b"\0" * 5 and blobs[8 + 12 : 24] == b"\0" * 4
    assert data[-4:] == struct.pack("<I", zlib.crc32(data[:-4]))


def test_a_truncated_file_is_refused(written):
    data = written.read_bytes()
    for size in (len(data) - 1, 16 + 10, 12):
        written.write_bytes(data[:size])
        message = (
            f"{written} is not an nbspam model file" if size < 16 else f"{written} is truncated"
        )
        with pytest.raises(ModelFileError) as caught:
            container.read(written)
        assert str(caught.value) == message


def test_a_changed_byte_fails_the_checksum(written):
    data = bytearray(written.read_bytes())
    _, _, _, start = layout(bytes(data))
    data[start + 1] ^= 0x01  # a byte of the first blob
    written.write_bytes(bytes(data))
    with pytest.raises(ModelFileError) as caught:
        container.read(written)
    assert str(caught.value) == f"{written} is corrupt (checksum mismatch)"


def test_another_file_is_not_a_model(tmp_path):
    path = tmp_path / "other"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(ModelFileError) as caught:
        container.read(path)
    assert str(caught.value) == f"{path} is not an nbspam model file"


def test_a_newer_format_asks_for_an_upgrade(written):
    data = bytearray(written.read_bytes())
    struct.pack_into("<I", data, 8, FORMAT_VERSION + 1)
    written.write_bytes(bytes(data))
    with pytest.raises(ModelFileError) as caught:
        container.read(written)
    assert str(caught.value) == (
        f"{written} is a model of format {FORMAT_VERSION + 1}, newer than this nbspam "
        f"{__version__} reads ({FORMAT_VERSION}); upgrade nbspam"
    )


def test_bytes_beyond_what_the_header_describes_are_refused(written):
    written.write_bytes(written.read_bytes() + b"\0" * 8)
    with pytest.raises(ModelFileError) as caught:
        container.read(written)
    assert str(caught.value) == (
        f"{written} is not a valid nbspam model: 8 bytes more than its header describes"
    )


# -- schema: what a container must hold to be a model -------------------------------------


def test_a_container_that_is_no_model_is_refused_by_the_schema(written):
    with pytest.raises(ModelFileError) as caught:
        schema.read(written)
    assert (
        str(caught.value) == f"{written} is not a valid nbspam model: the header lacks 'tokenizer'"
    )


def test_the_sample_model_passes_the_schema(sample_model_path):
    box = schema.read(sample_model_path)
    assert box.labels == ("ham", "spam")
    assert box.cutoffs == (-5.0, 5.0)
    assert box.has_scoring_table
    terms = schema.terms(sample_model_path, box)
    assert terms == sorted(terms) and len(terms) == len(box.values("term_offsets")) - 1
    schema.check_counts(sample_model_path, box)  # raises nothing


def test_the_schema_refuses_an_unknown_array(sample_model_path, tmp_path):
    box = container.read(sample_model_path)
    header = {k: v for k, v in box.header.items() if k != "arrays"}
    blobs = {
        name: Blob(bytes(view), dtype, shape) for name, (view, dtype, shape) in box.views.items()
    }
    blobs["extra"] = Blob(b"\0" * 8, "<f8", (1,))
    path = tmp_path / "extra.nbm"
    container.write(path, header, blobs)
    with pytest.raises(ModelFileError) as caught:
        schema.read(path)
    assert str(caught.value) == f"{path} is not a valid nbspam model: unknown array 'extra'"


def test_a_blob_given_in_chunks_writes_the_bytes_of_the_blob_given_whole(tmp_path):
    """A large array can be written a piece at a time (the digests of a model trained on a
    cluster): pieces of any length, across pages, give the same file, checksums and all."""
    data = bytes(range(256)) * 50  # 12,800 bytes: three pages and a part
    whole, chunked = tmp_path / "whole.nbm", tmp_path / "chunked.nbm"
    container.write(whole, {}, {"a": Blob(data, "|u1", (len(data),))}, pages=True)
    pieces = [data[at : at + 1000] for at in range(0, len(data), 1000)]
    blob = Blob(b"", "|u1", (len(data),), chunks=iter(pieces))
    container.write(chunked, {}, {"a": blob}, pages=True)
    assert chunked.read_bytes() == whole.read_bytes()
    assert bytes(container.read(chunked).view("a")) == data
    with pytest.raises(ValueError, match="a blob of 12801 bytes was given 12800"):
        container.write(chunked, {}, {"a": Blob(b"", "|u1", (12801,), chunks=pieces)})
    assert chunked.read_bytes() == whole.read_bytes()  # nothing written
