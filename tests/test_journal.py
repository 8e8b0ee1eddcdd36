"""The journal beside a model: learn and forget append records, every reader applies them,
compaction folds them, and a torn record is dropped; model + journal equals training."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

from nbspam.core.settings import build_settings
from nbspam.errors import ModelFileError
from nbspam.models.model import fit_messages
from nbspam.service import journalled
from nbspam.service.array_scoring import load_array_scorer
from nbspam.store import journal
from nbspam.store.modelfile import load_model, save_model
from tests.helpers import ENV, ROOT, SAMPLE, assert_same_model, cli_run

SETTINGS = build_settings({})


@pytest.fixture
def half(sample_messages, tmp_path):
    """A model file trained on the even messages, and the messages."""
    path = tmp_path / "m.nbm"
    save_model(fit_messages(sample_messages[::2], SETTINGS), path)
    return path, sample_messages


def test_learn_appends_to_the_journal_and_leaves_the_model_file(half):
    path, messages = half
    before = path.read_bytes()
    spam = [m for m in messages[1::2] if m.label == "spam"]
    change = journalled.learn(path, spam, "spam")
    assert change.learned == len(spam)
    assert path.read_bytes() == before  # not rewritten
    contents = journal.read(path.with_name("m.nbm.journal"))
    assert len(contents.records) == len(spam)
    expected = [m for m in messages[::2]] + spam
    assert_same_model(load_model(path), fit_messages(expected, SETTINGS))
    assert load_array_scorer(path) is None  # the scoring table is the file's, not the journal's


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_learn_forget_sequences_equal_training(sample_messages, tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "m.nbm"
    start = [m for m in sample_messages if m.label == "ham"][:5]
    start += [m for m in sample_messages if m.label == "spam"][:5]
    held = {m.id: m for m in start}  # id -> message as learned
    save_model(fit_messages(list(held.values()), SETTINGS), path)
    for _ in range(25):
        m = rng.choice(sample_messages)
        action = rng.random()
        others = {x.label for k, x in held.items() if k != m.id}
        if others != {"ham", "spam"}:
            action = 0.0  # the only message of a label: learn it again
        if action < 0.5:
            journalled.learn(path, [m], m.label)
            held[m.id] = m
        elif action < 0.7:  # a correction: learned under the other label
            other = "ham" if m.label == "spam" else "spam"
            journalled.learn(path, [m], other)
            held[m.id] = type(m)(m.id, m.data, other)
        elif m.id in held:
            journalled.forget(path, [m])
            del held[m.id]
        if rng.random() < 0.2:
            journalled.compact(path)
    assert_same_model(load_model(path), fit_messages(list(held.values()), SETTINGS))
    journalled.compact(path)
    assert not path.with_name("m.nbm.journal").exists()
    assert_same_model(load_model(path), fit_messages(list(held.values()), SETTINGS))
    assert load_array_scorer(path) is not None  # folded: the one-message scorer reads the table


def test_cli_learn_and_compact_keep_the_scores(sample_model):
    new = SAMPLE / "new" / "001.eml"
    result = cli_run("learn", "-m", sample_model, "--label", "spam", new)
    assert result.exit_code == 0, result.stderr
    assert "learned 1 message(s) as spam" in result.stderr
    journalled = cli_run("predict", "-m", sample_model, SAMPLE / "new").stdout
    result = cli_run("compact", "-m", sample_model)
    assert (result.exit_code, result.stderr) == (
        0,
        f"folded 1 journal record(s) into {sample_model}\n",
    )
    assert not os.path.exists(f"{sample_model}.journal")
    assert cli_run("predict", "-m", sample_model, SAMPLE / "new").stdout == journalled
    result = cli_run("compact", "-m", sample_model)
    assert result.stderr == f"folded 0 journal record(s) into {sample_model}\n"


def test_a_torn_last_record_is_dropped_and_cut_off(half):
    path, messages = half
    spam = [m for m in messages[1::2] if m.label == "spam"]
    journalled.learn(path, spam[:1], "spam")
    side = path.with_name("m.nbm.journal")
    good = side.read_bytes()
    journalled.learn(path, spam[1:2], "spam")
    torn = side.read_bytes()
    for cut in (len(good) + 3, len(good) + 20, len(torn) - 1):
        side.write_bytes(torn[:cut])
        # readers see the first message only
        assert_same_model(load_model(path), fit_messages(messages[::2] + spam[:1], SETTINGS))
    # the next writer cuts the torn record off before it appends
    journalled.learn(path, spam[2:3], "spam")
    assert len(journal.read(side).records) == 2
    expected = messages[::2] + [spam[0], spam[2]]
    assert_same_model(load_model(path), fit_messages(expected, SETTINGS))


def test_a_bad_record_before_others_is_corruption(half):
    path, messages = half
    journalled.learn(path, messages[1:4:2], messages[1].label, new_label=True)
    side = path.with_name("m.nbm.journal")
    data = bytearray(side.read_bytes())
    data[journal.HEADER_BYTES + 12] ^= 1  # inside the first record's payload
    side.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="corrupt"):
        load_model(path)


@pytest.mark.parametrize(
    "field, value", [("t", 2**70), ("t", -5), ("w", {"x": 2**70}), ("w", {"x": 2**62})]
)
def test_a_record_of_numbers_no_model_holds_is_corruption(half, field, value):
    """Times and counts are int64 in a model: a record beyond them was an internal error
    (OverflowError) where the journal was applied, or counts that wrapped round."""
    import json
    import struct
    import zlib

    path, messages = half
    journalled.learn(path, messages[1:2], messages[1].label)
    side = path.with_name("m.nbm.journal")
    payload = {"d": "ab" * 16, "o": None, "n": "spam", "t": 1, "w": {"x": 1}, "c": False}
    payload[field] = value
    records = [json.dumps(payload).encode(), b'{"commit":1}']
    head = side.read_bytes()[: journal.HEADER_BYTES]
    side.write_bytes(
        head + b"".join(struct.pack("<II", len(p), zlib.crc32(p)) + p for p in records)
    )
    with pytest.raises(ModelFileError, match="corrupt"):
        load_model(path)


def test_a_journal_of_a_replaced_model_is_ignored(half, tmp_path):
    """A crash between writing the folded model and removing the journal: the journal's
    base is the old file, so no record is applied twice."""
    path, messages = half
    spam = [m for m in messages[1::2] if m.label == "spam"]
    journalled.learn(path, spam, "spam")
    side = path.with_name("m.nbm.journal")
    kept = side.read_bytes()
    journalled.compact(path)
    side.write_bytes(kept)  # as if the removal never happened
    expected = fit_messages(messages[::2] + spam, SETTINGS)
    assert_same_model(load_model(path), expected)
    journalled.learn(path, spam, "spam")  # all known: unchanged, and the stale journal emptied
    assert journal.read(side).records == []
    assert_same_model(load_model(path), expected)


def test_the_journal_is_folded_past_its_size(half, monkeypatch):
    path, messages = half
    monkeypatch.setattr(journal, "COMPACT_BYTES", 1)
    before = path.read_bytes()
    journalled.learn(path, [m for m in messages[1::2] if m.label == "ham"], "ham")
    assert not path.with_name("m.nbm.journal").exists()
    assert path.read_bytes() != before
    expected = messages[::2] + [m for m in messages[1::2] if m.label == "ham"]
    assert_same_model(load_model(path), fit_messages(expected, SETTINGS))


def test_the_journal_is_never_opened_through_a_link(half, tmp_path):
    path, messages = half
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path.with_name("m.nbm.journal").symlink_to(victim)
    result = cli_run("learn", "-m", path, "--label", "spam", SAMPLE / "new" / "001.eml")
    assert result.exit_code == 1
    assert "is a symbolic link: refusing to write through it" in result.stderr
    assert victim.read_bytes() == b"precious"


_APPENDER = textwrap.dedent(
    """
    import os, sys
    from nbspam.service import journalled
    from nbspam.store import journal
    real = journal.Writer.append
    def append(self, record):
        data = record.encode()
        os.pwrite(self.fd, data[: len(data) // 2], self.offset)
        print("half", flush=True)
        os.kill(os.getpid(), 19)  # SIGSTOP: the parent kills it mid-append
    journal.Writer.append = append
    from nbspam.mail.messages import Message
    data = open(sys.argv[2], "rb").read()
    journalled.learn(sys.argv[1], [Message("m", data)], "spam")
    print("acknowledged", flush=True)
    """
)


def test_a_learn_killed_mid_append_was_never_acknowledged(half):
    path, messages = half
    journalled.learn(path, [m for m in messages[1::2] if m.label == "ham"][:1], "ham")
    before = load_model(path)
    child = subprocess.Popen(
        [sys.executable, "-c", _APPENDER, str(path), str(SAMPLE / "new" / "001.eml")],
        stdout=subprocess.PIPE,
        env=ENV,
        cwd=ROOT,
    )
    assert child.stdout.readline() == b"half\n"
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL and b"acknowledged" not in out
    assert_same_model(load_model(path), before)  # the torn record is dropped
    result = cli_run("learn", "-m", path, "--label", "spam", SAMPLE / "new" / "001.eml")
    assert result.exit_code == 0, result.stderr
    assert len(journal.read(path.with_name("m.nbm.journal")).records) == 2


def test_the_journal_version_changes_with_each_learn(half):
    path, messages = half
    assert journal.version(path) is None
    journalled.learn(path, messages[1:2], messages[1].label)
    first = journal.version(path)
    journalled.learn(path, messages[3:4], messages[3].label)
    assert first is not None and journal.version(path) not in (None, first)
    journalled.compact(path)
    assert journal.version(path) is None


def test_a_process_learning_one_message_at_a_time_decodes_only_the_new_records(half, monkeypatch):
    """A server's TELL costs the message, not the journal: the records already read are
    not decoded again, while a journal replaced meanwhile is read whole."""
    path, messages = half
    unseen = messages[1::2][:21]
    for message in unseen[:20]:
        journalled.learn(path, [message], "spam")
    decoded = []
    real = journal._decode
    monkeypatch.setattr(journal, "_decode", lambda payload: decoded.append(1) or real(payload))
    journalled.learn(path, [unseen[20]], "spam")
    assert len(decoded) == 1  # the last learn's record; the 19 before it were known
    assert len(journal.read(journal.journal_path(path)).records) == 21 and len(decoded) == 2
    journal.discard(path)  # emptied (as compaction does), then one other lesson
    journalled.learn(path, [unseen[0]], "ham")
    records = journal.read(journal.journal_path(path)).records
    assert [(r.old, r.new) for r in records] == [(None, "ham")]
    assert load_model(path).seen_digests.shape[0] == len(messages[::2]) + 1
