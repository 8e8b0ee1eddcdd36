"""train --engine dask: the workers read the mail the calling process lists (`sources`):
mboxes split into byte ranges give the messages of the whole file, and copies of a
message in other partitions count once, as local training counts them."""

from __future__ import annotations

import shutil

import pytest

from nbspam.mail.message import Problems
from nbspam.mail.messages import read_file, read_labelled
from nbspam.service import sources, tally
from nbspam.store.modelfile import load_model
from tests.helpers import SAMPLE, assert_same_model, cli_run, missing

SEPARATOR = b"From alice@example.com Mon Jan  1 00:00:00 2024\n"


def mbox_of(messages: list[bytes]) -> bytes:
    return b"".join(SEPARATOR + m.rstrip(b"\n") + b"\n\n" for m in messages)


def tricky_mbox(sample_messages) -> bytes:
    """An mbox of the sample messages with text before the first separator, From lines
    that are no separators, a CRLF blank line and an empty message."""
    bodies = [m.data for m in sample_messages]
    odd = [
        b"Subject: a\n\nFrom here on, a line that is no separator\n>From quoted\n",
        b"Subject: b\r\n\r\nbody\r\n\r\n",
        b"Subject: c\n\nFrom bob Tue no time of day\n",
    ]
    return b"preamble text\n\n" + mbox_of(bodies[:20] + odd + bodies[20:])


def messages_of_ranges(path: str) -> list[bytes]:
    parts = list(sources.list_parts([f"spam={path}"], Problems()))
    found = []
    for part in parts:
        found.extend(data for data, label in sources.read_part(part, Problems()))
    return found, len(parts)


@pytest.mark.parametrize("size", [1, 97, 1000, 4096, 5000, 1 << 20])
def test_byte_ranges_give_the_messages_of_the_whole_mbox(
    sample_messages, tmp_path, monkeypatch, size
):
    path = tmp_path / "mail.mbox"
    path.write_bytes(tricky_mbox(sample_messages))
    whole = [m.data for m in read_file(str(path), Problems())]
    assert len(whole) == len(sample_messages) + 4  # the preamble is a message too
    monkeypatch.setattr(sources, "RANGE_BYTES", size)
    found, parts = messages_of_ranges(str(path))
    assert found == whole
    assert parts == -(-path.stat().st_size // size)


def test_a_range_starts_at_the_first_separator_after_its_first_byte(tmp_path, monkeypatch):
    """A range that starts on a separator line's first byte holds that message; one that
    starts a byte later does not."""
    first, second = b"Subject: one\n\nbody one\n", b"Subject: two\n\nbody two\n"
    data = mbox_of([first, second])
    at = data.index(SEPARATOR, 1)
    path = tmp_path / "m.mbox"
    path.write_bytes(data)
    for start, expected in ((at, [second]), (at + 1, []), (at - 1, [second])):
        item = sources.Item("mbox", str(path), str(path), "spam", start, -1)
        got = list(sources.read_part(sources.Part((item,)), Problems()))
        assert [d for d, _ in got] == expected, start


FIXED = ("--event-model", "multinomial", "--no-calibrate")  # no decision rule fitted


def train_pruned(tmp_path, engine: tuple[str, ...], *options: str) -> tuple:
    """The model of ``train --min-docs 2 --max-terms 300`` (on ``engine``) and that of
    ``train`` then ``prune --min-docs 2 --max-terms 300``, locally."""
    pruned, then = tmp_path / "pruned.nbm", tmp_path / "then.nbm"
    rules = ("--min-docs", "2", "--max-terms", "300")
    result = cli_run("train", SAMPLE / "train", "-o", pruned, *options, *rules, *engine)
    assert result.exit_code == 0, result.stderr
    assert cli_run("train", SAMPLE / "train", "-o", then, *options).exit_code == 0
    full = load_model(then)
    assert cli_run("prune", "-m", then, *rules).exit_code == 0
    return load_model(pruned), load_model(then), full


@pytest.mark.parametrize("options", [(), FIXED], ids=["auto", "multinomial"])
def test_train_prunes_as_prune_does_after_it(tmp_path, options):
    """train --min-docs --max-terms on the local engine: the model train then prune give,
    decision rule and all (the rule fitted before the terms are pruned, as prune keeps it)."""
    model, expected, full = train_pruned(tmp_path, (), *options)
    assert_same_model(model, expected)
    assert (model.cutoffs, model.calibration) == (expected.cutoffs, expected.calibration)
    assert len(model.terms) == 300 < len(full.terms)
    assert model.info["pruned"]["terms_dropped"] == len(full.terms) - 300


def test_train_does_not_prune_a_typed_table(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("label,x\na,1\nb,2\na,1.5\nb,2.5\n")
    result = cli_run("train", table, "-o", tmp_path / "m.nbm", "--min-docs", "2")
    assert (result.exit_code, result.stderr) == (
        2,
        "Error: --min-docs and --max-terms prune terms: not of a typed table\n",
    )


try:
    import distributed  # noqa: F401
except ImportError:
    missing("Dask is not installed: pip install 'dask[distributed]' (the test extra has it)")


def train_both(tmp_path, *data) -> tuple:
    local, on_dask = tmp_path / "local.nbm", tmp_path / "dask.nbm"
    result = cli_run("train", *data, "-o", local)
    assert result.exit_code == 0, result.stderr
    result = cli_run("train", *data, "-o", on_dask, "--engine", "dask", "-j", "1")
    assert result.exit_code == 0, result.stderr
    return load_model(on_dask), load_model(local)


def test_training_on_mbox_byte_ranges_gives_the_model_of_the_whole_files(
    sample_messages, tmp_path, monkeypatch
):
    spam = [m.data for m in sample_messages if m.label == "spam"]
    ham = [m.data for m in sample_messages if m.label == "ham"]
    (tmp_path / "spam.mbox").write_bytes(mbox_of(spam + spam[:3]))  # copies too
    (tmp_path / "ham.mbox").write_bytes(mbox_of(ham))
    monkeypatch.setattr(sources, "RANGE_BYTES", 12000)
    monkeypatch.setattr(tally, "CHUNK", 2)  # a worker counts a part a few messages at a time
    on_dask, local = train_both(
        tmp_path, f"spam={tmp_path / 'spam.mbox'}", f"ham={tmp_path / 'ham.mbox'}"
    )
    assert_same_model(on_dask, local)
    assert (on_dask.cutoffs, on_dask.calibration) == (local.cutoffs, local.calibration)
    assert on_dask.info["duplicates"] == local.info["duplicates"] == 3
    assert len(on_dask.seen_digests) == len(sample_messages)


def test_copies_in_other_partitions_count_once_under_the_first_label(tmp_path, monkeypatch):
    """Copies of messages in other partitions, one of them under the other label: the
    first copy in the input wins (ham/ is read before spam/), the others are not counted."""
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLE / "train", corpus)
    spam = sorted((corpus / "spam").iterdir())
    ham = sorted((corpus / "ham").iterdir())
    shutil.copy(spam[0], corpus / "ham" / "zz-copy-of-spam.eml")  # read first: ham wins
    shutil.copy(ham[1], corpus / "ham" / "zz-copy.eml")
    shutil.copy(spam[2], corpus / "spam" / "zz-copy.eml")
    monkeypatch.setattr(sources, "PART_FILES", 5)
    parts = list(sources.list_parts([str(corpus)], Problems()))
    assert len(parts) > 5
    on_dask, local = train_both(tmp_path, corpus)
    assert_same_model(on_dask, local)
    assert on_dask.info["duplicates"] == local.info["duplicates"] == 3
    messages = list(read_labelled([str(corpus)], Problems()))
    assert len(on_dask.seen_digests) == len(messages) - 3


@pytest.mark.parametrize(("min_docs", "max_terms"), [(2, None), (None, 300), (2, 150)])
def test_prune_rules_applied_in_the_reduce_give_the_pruned_model(
    sample_messages, min_docs, max_terms
):
    """Terms pruned on the cluster before the total reaches the calling process: the terms
    and counts `nbspam prune` leaves of the model of local training."""
    from nbspam.core.settings import build_settings
    from nbspam.fit.training import train as train_locally
    from nbspam.service import cluster
    from nbspam.service.update import prune

    settings = build_settings({"event_model": "multinomial", "calibrate": False})
    local, _ = prune(
        train_locally(sample_messages, settings), min_docs=min_docs, max_terms=max_terms
    )
    parts = sources.inline_parts(sample_messages, 7)
    with cluster.dask_client(None, 1) as client:
        on_dask = cluster.train_parts(
            parts, settings, client, min_docs=min_docs, max_terms=max_terms
        )
    assert on_dask.terms == local.terms
    assert len(local.terms) < len(train_locally(sample_messages, settings).terms)
    for name in ("class_count", "term_count", "doc_count", "seen_digests", "seen_labels"):
        assert (getattr(on_dask, name) == getattr(local, name)).all(), name


def test_train_on_dask_prunes_in_the_reduce_as_prune_does_after_it(tmp_path):
    """train --engine dask --min-docs --max-terms: the terms are pruned on the worker that
    makes the last sum, and the model is the one train then prune give (with no decision
    rule fitted: the cluster fits it on the pruned counts, prune keeps the one before)."""
    model, expected, full = train_pruned(tmp_path, ("--engine", "dask", "-j", "1"), *FIXED)
    assert_same_model(model, expected)
    assert (model.cutoffs, model.calibration) == (expected.cutoffs, expected.calibration)
    assert len(model.terms) == 300 < len(full.terms)
    assert model.info["pruned"]["terms_dropped"] == len(full.terms) - 300
    model, expected, _ = train_pruned(tmp_path, ("--engine", "dask", "-j", "1"))  # auto
    assert model.terms == expected.terms
    for name in ("class_count", "term_count", "doc_count", "seen_digests", "seen_labels"):
        assert (getattr(model, name) == getattr(expected, name)).all(), name
