"""The model file: round trip, and every kind of bad file refused with a one-line reason."""

from __future__ import annotations

import dataclasses
import math
import os
import struct

import pytest

from nbspam.core.settings import build_settings
from nbspam.errors import ModelFileError
from nbspam.models.model import fit
from nbspam.store.container import FORMAT_VERSION, MAGIC
from nbspam.store.modelfile import load_model, save_model
from tests.helpers import assert_same_model
from tests.test_naive_bayes import random_counts


@pytest.fixture
def model():
    X, y, terms = random_counts(2)
    return fit(X, y, terms + [], build_settings({"min_count": 1, "prior": "spam=1,ham=2"}))


@pytest.fixture
def saved(model, tmp_path):
    path = tmp_path / "m.nbm"
    save_model(model, path)
    return path


def test_round_trip_keeps_everything(model, saved):
    loaded = load_model(saved)
    assert_same_model(loaded, model)
    assert loaded.info == model.info


@pytest.mark.parametrize("cutoffs", [(-math.inf, math.inf), (-math.inf, 2.5), (-1.0, math.inf)])
def test_infinite_cutoffs_survive(model, tmp_path, cutoffs):
    # the rule of least cost may leave every message of a side unsure
    save_model(dataclasses.replace(model, cutoffs=cutoffs), tmp_path / "m.nbm")
    assert load_model(tmp_path / "m.nbm").cutoffs == cutoffs


def test_unicode_terms_survive(tmp_path):
    X, y, _ = random_counts(4, d=3)
    model = fit(X, y, ["東京", "straße", "subject:ünïcode"], build_settings({"min_count": 1}))
    save_model(model, tmp_path / "u.nbm")
    assert load_model(tmp_path / "u.nbm").terms == ("straße", "subject:ünïcode", "東京")


def test_a_term_of_a_lone_surrogate_is_refused_where_the_model_is_written(tmp_path):
    X, y, _ = random_counts(4, d=3)
    model = fit(X, y, ["a", "b\ud800", "\ud7ff"], build_settings({"min_count": 1}))
    assert list(model.terms) == ["a", "b\ud800", "\ud7ff"]  # kept, as a str would be
    with pytest.raises(ValueError, match="lone surrogate"):
        save_model(model, tmp_path / "s.nbm")
    assert not (tmp_path / "s.nbm").exists()


def test_no_temporary_file_is_left_and_a_new_model_is_not_for_others(saved):
    # the umask, less every permission of others: a model holds the words of mail
    assert os.listdir(saved.parent) == ["m.nbm"]
    umask = os.umask(0)
    os.umask(umask)
    assert saved.stat().st_mode & 0o777 == 0o666 & ~umask & ~0o007


def test_a_failed_write_keeps_the_old_file(model, saved, monkeypatch):
    before = saved.read_bytes()

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(ModelFileError, match="cannot write model file .*: no space left on device"):
        save_model(model, saved)
    assert saved.read_bytes() == before
    assert os.listdir(saved.parent) == ["m.nbm"]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b[: len(b) // 2], "truncated"),
        (lambda b: b[:20], "is truncated"),
        (lambda b: b[:-100] + bytes([b[-100] ^ 1]) + b[-99:], "is corrupt"),
        (lambda b: b"", "is not an nbspam model file"),
        (lambda b: b"label\ttext\nspam\thello\n", "is not an nbspam model file"),
        (lambda b: b"PK\x03\x04" + b[4:], "is not an nbspam model file"),
    ],
)
def test_damaged_files_are_refused(saved, damage, message):
    saved.write_bytes(damage(saved.read_bytes()))
    with pytest.raises(ModelFileError, match=message):
        load_model(saved)


def test_a_newer_format_is_refused(saved):
    data = bytearray(saved.read_bytes())
    struct.pack_into("<I", data, len(MAGIC), FORMAT_VERSION + 1)
    saved.write_bytes(bytes(data))
    with pytest.raises(
        ModelFileError, match=f"format {FORMAT_VERSION + 1}, newer .* upgrade nbspam"
    ):
        load_model(saved)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(ModelFileError, match="cannot read model file .*nope.nbm: No such file"):
        load_model(tmp_path / "nope.nbm")


def test_a_file_written_before_a_setting_existed_loads_with_its_default(saved, model, tmp_path):
    from tests.helpers import cli_run
    from tests.test_hostile_models import pack, unpack

    header, arrays = unpack(saved.read_bytes())
    for key in ("select", "complement_norm"):  # settings newer than the file
        del header["train"][key]
    old = tmp_path / "old.nbm"
    old.write_bytes(pack(header, arrays))
    loaded = load_model(old)
    assert (loaded.training.select, loaded.training.complement_norm) == ("frequency", False)
    assert_same_model(loaded, model)
    result = cli_run("info", "-m", old)
    assert result.exit_code == 0, result.stderr
    assert "settings:   multinomial on word presence" in result.stdout


def test_a_file_that_saved_the_event_model_as_model_loads(saved, model, tmp_path):
    """Files written before the event model had one name saved it under "model"."""
    from tests.test_hostile_models import pack, unpack

    header, arrays = unpack(saved.read_bytes())
    header["train"]["model"] = header["train"].pop("event_model")
    old = tmp_path / "old.nbm"
    old.write_bytes(pack(header, arrays))
    assert_same_model(load_model(old), model)


@pytest.mark.parametrize(
    "tokenizer, train, expected",
    [
        ({}, {}, ("none", 1 << 20, True)),  # written before word pairs
        ({"pairs": 0}, {"word_pairs": True}, ("none", 1 << 20, True)),
        ({"pairs": 64}, {"word_pairs": False}, ("all", 64, False)),
    ],
)
def test_a_file_written_before_word_pairs_named_where_reads_as_before(
    saved, tmp_path, tokenizer, train, expected
):
    """Files written before ``word_pairs`` saved the buckets as the tokenizer's ``pairs``
    (0: none, N: every pair) and whether the model scored them as the training's
    ``word_pairs``: they tokenize and score as they did."""
    from tests.test_hostile_models import pack, unpack

    header, arrays = unpack(saved.read_bytes())
    for key in ("word_pairs", "pair_buckets"):
        del header["tokenizer"][key]
    del header["train"]["score_pairs"]
    header["tokenizer"].update(tokenizer)
    header["train"].update(train)
    old = tmp_path / "old.nbm"
    old.write_bytes(pack(header, arrays))
    loaded = load_model(old)
    word_pairs, buckets = loaded.tokenizer.word_pairs, loaded.tokenizer.pair_buckets
    assert (word_pairs, buckets, loaded.training.score_pairs) == expected


def test_writing_a_model_makes_no_copy_of_its_arrays_bytes(tmp_path):
    import tracemalloc

    import numpy as np
    import scipy.sparse as sp

    d = 200_000
    X = sp.csr_matrix((np.ones(d, np.int64), np.arange(d), np.arange(0, d + 1, d // 4)), (4, d))
    terms = [f"w{i:07d}" for i in range(d)]
    model = fit(X, ["ham", "spam"] * 2, terms, build_settings({}), sorted_terms=True)
    assert model.form.kept.size == d
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        save_model(model, tmp_path / "big.nbm")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    # the file's arrays as made (32-bit counts, the scoring table: some 50 bytes a term),
    # not each copied into bytes again, nor the terms joined into one str (115 bytes a term)
    assert peak < 80 * d
    assert load_model(tmp_path / "big.nbm").terms == terms
