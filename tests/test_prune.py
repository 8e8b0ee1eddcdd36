"""prune: fewer terms and digests; what stays exact, what does not, and files that stay valid."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from nbspam.core.settings import build_settings
from nbspam.errors import NbspamError
from nbspam.mail.message import Message
from nbspam.models.model import UNKNOWN_TIME, fit_messages, from_counts
from nbspam.service.update import PRUNE_NOTE, forget, learn, merge, prune
from nbspam.store import container
from nbspam.store.dump import dump_chunks, restore
from nbspam.store.modelfile import load_model, part_sizes, save_model
from tests.helpers import ENV, SAMPLE, assert_same_model, cli_run

SETTINGS = build_settings({})
DAY = 86_400


@pytest.fixture(scope="module")
def model(sample_messages):
    return fit_messages(sample_messages, SETTINGS)


def dropping(model, keep):
    """The model with only the terms where ``keep`` is true, by hand."""
    cols = np.flatnonzero(keep)
    return dataclasses.replace(
        model,
        terms=tuple(model.terms[j] for j in cols),
        term_count=model.term_count[:, cols],
        doc_count=model.doc_count[:, cols],
    )


def test_min_docs_equals_training_then_dropping_those_terms(model):
    pruned, done = prune(model, min_docs=3)
    keep = model.doc_count.sum(axis=0) >= 3
    expected = dropping(model, keep)
    assert_same_model(pruned, expected)
    assert (done.terms_kept, done.terms_dropped) == (keep.sum(), (~keep).sum())
    np.testing.assert_array_equal(pruned.form.coef, expected.form.coef)
    np.testing.assert_array_equal(pruned.class_count, model.class_count)  # exact
    assert pruned.info["pruned"]["terms_dropped"] == (~keep).sum()


def test_min_docs_of_a_model_trained_on_its_kept_terms_scores_them_the_same(model):
    """Bernoulli scores each kept term from its own document counts and the class counts:
    pruning rare terms leaves the weights of the others as they were."""
    full = dataclasses.replace(model, training=model.training.replace(event_model="bernoulli"))
    pruned, _ = prune(full, min_docs=2)
    kept = [full.terms.index(t) for t in pruned.terms]
    np.testing.assert_allclose(pruned.form.coef, full.form.coef[:, kept])


def test_max_terms_keeps_the_terms_in_most_messages_ties_in_term_order(model):
    pruned, _ = prune(model, max_terms=50)
    df = model.doc_count.sum(axis=0)
    expected = sorted(range(len(model.terms)), key=lambda j: (-df[j], j))[:50]
    assert pruned.terms == tuple(model.terms[j] for j in sorted(expected))


def test_min_docs_then_max_terms(model):
    both, _ = prune(model, min_docs=2, max_terms=10_000_000)
    assert both.terms == prune(model, min_docs=2)[0].terms


def timed(model, times):
    return dataclasses.replace(model, seen_times=np.array(times, np.int64))


def test_expiry_by_date_and_by_count_keeps_the_newest(model):
    n = len(model.seen_labels)
    times = [UNKNOWN_TIME] * 3 + [1000 * DAY + i for i in range(n - 3)]
    old = timed(model, times)
    by_date, done = prune(old, expire_before=1000 * DAY + 10)
    # the digests of unknown time stay: their age is not known
    assert done.digests_expired == 10 and done.digests_kept == n - 10
    assert sorted(by_date.seen_times.tolist())[:3] == [UNKNOWN_TIME] * 3
    assert by_date.seen_times.min() == UNKNOWN_TIME
    assert (by_date.seen_times[by_date.seen_times >= 0] >= 1000 * DAY + 10).all()
    by_count, done = prune(old, keep_digests=5)
    assert sorted(by_count.seen_times.tolist()) == [1000 * DAY + i for i in range(n - 8, n - 3)]
    assert by_count.info["expired"]["digests"] == n - 5
    # the digests stay sorted, with their labels
    kept = {bytes(d): k for d, k in zip(by_count.seen_digests, by_count.seen_labels)}
    everyone = {bytes(d): k for d, k in zip(old.seen_digests, old.seen_labels)}
    assert all(everyone[d] == k for d, k in kept.items())
    assert [bytes(d) for d in by_count.seen_digests] == sorted(kept)
    np.testing.assert_array_equal(by_count.class_count, model.class_count)


def test_keep_digests_counts_unknown_times_as_oldest(model):
    n = len(model.seen_labels)
    old = timed(model, [UNKNOWN_TIME] * (n - 2) + [5, 6])
    kept, _ = prune(old, keep_digests=3)
    assert sorted(kept.seen_times.tolist()) == [UNKNOWN_TIME, 5, 6]


def test_forget_after_expiry_is_refused_and_without_expiry_an_unknown_message_is_skipped(
    model, sample_messages
):
    expired, _ = prune(model, keep_digests=0)
    with pytest.raises(NbspamError, match="it may have been learned"):
        forget(expired, sample_messages[:1])
    never = sample_messages[0].replace(data=b"Subject: new\n\nnever seen")
    _, change = forget(model, [never])
    assert change.unknown == [never.id]


def test_forget_after_pruning_terms_subtracts_only_the_terms_left(model, sample_messages):
    pruned, _ = prune(model, min_docs=5)
    message = sample_messages[0]
    after, change = forget(pruned, [message])
    assert change.forgotten == 1
    assert after.class_count.sum() == model.class_count.sum() - 1  # still exact
    exact, _ = forget(model, [message])
    kept = [exact.terms.index(t) for t in after.terms]
    np.testing.assert_array_equal(after.term_count, exact.term_count[:, kept])
    np.testing.assert_array_equal(after.doc_count, exact.doc_count[:, kept])


def test_learning_a_pruned_word_again_counts_it_from_zero(model, sample_messages):
    pruned, _ = prune(model, min_docs=5)
    dropped = next(t for t in model.terms if t not in set(pruned.terms) and t.isalpha())
    message = sample_messages[0].replace(data=f"Subject: x\n\n{dropped}".encode())
    grown, _ = learn(pruned, [message], "spam")
    j = grown.terms.index(dropped)
    assert grown.doc_count[:, j].sum() == 1


def test_learn_times_are_recorded_and_survive_save_merge_dump(model, sample_messages, tmp_path):
    assert (model.seen_times > 1_700_000_000).all()
    a = fit_messages(sample_messages[::2], SETTINGS)
    b = fit_messages(sample_messages[1::2], SETTINGS)
    b = timed(b, list(range(len(b.seen_labels))))
    merged = merge([a, b])
    times = dict(zip(map(bytes, merged.seen_digests), merged.seen_times.tolist()))
    assert all(times[bytes(d)] == t for d, t in zip(b.seen_digests, b.seen_times.tolist()))
    path = tmp_path / "m.nbm"
    save_model(merged, path)
    np.testing.assert_array_equal(load_model(path).seen_times, merged.seen_times)
    back = restore(io.BytesIO(b"".join(dump_chunks(merged))))
    np.testing.assert_array_equal(back.seen_times, merged.seen_times)


def test_a_dump_without_learn_times_restores_as_unknown(model):
    text = b"".join(dump_chunks(model)).decode()
    lines = text.split("\n")
    at = lines.index("digests\tdigest\tlabel\tlearned")
    lines[at] = "digests\tdigest\tlabel"
    lines[at + 1 : -2] = [line.rsplit("\t", 1)[0] for line in lines[at + 1 : -2]]
    back = restore(io.BytesIO("\n".join(lines).encode()))
    assert_same_model(back, model)
    assert (back.seen_times == UNKNOWN_TIME).all()


def test_a_model_file_written_before_learn_times_loads_as_unknown_times(model, tmp_path):
    path = tmp_path / "old.nbm"
    save_model(model, path)
    box = container.read(path)
    header = {k: v for k, v in box.header.items() if k not in container_keys()}
    blobs = {
        name: container.Blob(bytes(view), dtype, shape)
        for name, (view, dtype, shape) in box.views.items()
        if name != "seen_times"
    }
    container.write(path, header, blobs)
    old = load_model(path)
    assert_same_model(old, model)
    assert (old.seen_times == UNKNOWN_TIME).all()
    # expiring by date keeps them all, by count keeps the last in digest order
    assert prune(old, expire_before=2_000_000_000)[1].digests_expired == 0
    assert len(prune(old, keep_digests=4)[0].seen_labels) == 4


def container_keys():
    return ("format", "format_version", "nbspam_version", "arrays")


def test_prune_rejects_pruning_every_term(model):
    with pytest.raises(NbspamError, match="no terms would be left"):
        prune(model, min_docs=10_000)


def test_from_counts_without_times_gives_unknown(model):
    again = from_counts(model.counts, SETTINGS, seen={bytes(model.seen_digests[0]): "ham"})
    assert again.seen_times.tolist() == [UNKNOWN_TIME]


# -- the command ---------------------------------------------------------------------------


def test_prune_command_output_and_a_valid_file(sample_model_path, tmp_path):
    out = tmp_path / "pruned.nbm"
    model = load_model(sample_model_path)
    result = cli_run("prune", "-m", sample_model_path, "--min-docs", 2, "-o", out)
    kept = int((model.doc_count.sum(axis=0) >= 2).sum())
    assert (result.exit_code, result.stdout, result.stderr) == (
        0,
        "",
        f"pruned {out}: kept {kept:,} terms ({len(model.terms) - kept:,} dropped), "
        f"48 digests (0 expired)\n",
    )
    info = cli_run("info", "-m", out)
    assert info.exit_code == 0
    assert f"inexact:    {PRUNE_NOTE}" in info.stdout.splitlines()
    assert any(line.startswith("pruned:     ") for line in info.stdout.splitlines())
    # the numpy-free path scores one message with the pruned file
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['nbspam', 'predict', '-m', {str(out)!r}, '-f', 'jsonl']\n"
        "try:\n    runpy.run_module('nbspam', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('numpy', 'scipy') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=(SAMPLE / "new" / "002.eml").read_bytes(),
        capture_output=True,
        check=True,
        env=ENV,
    )
    first, imported = done.stdout.decode().splitlines()
    assert json.loads(first)["path"] == "-" and imported == "[]"
    batch = cli_run("predict", "-m", out, "-f", "jsonl", SAMPLE / "new" / "002.eml")
    assert json.loads(batch.stdout)["log_odds"] == pytest.approx(
        json.loads(first)["log_odds"], abs=1e-9
    )


def test_prune_in_place_then_forget_is_refused(sample_model):
    before = load_model(sample_model)
    result = cli_run("prune", "-m", sample_model, "--keep-digests", 40)
    assert (result.exit_code, result.stderr) == (
        0,
        f"pruned {sample_model}: kept {len(before.terms):,} terms (0 dropped), "
        "40 digests (8 expired)\n",
    )
    pruned_bytes = sample_model.read_bytes()
    model = load_model(sample_model)
    last = model.info["expired"]["last"]
    forgotten = {bytes(d) for d in model.seen_digests}
    from nbspam.mail.headers import message_digest

    gone = next(
        p
        for p in sorted((SAMPLE / "train").rglob("*.eml"))
        if message_digest(p.read_bytes()) not in forgotten
    )
    result = cli_run("forget", "-m", sample_model, gone)
    assert (result.exit_code, result.stdout, result.stderr) == (
        1,
        "",
        f"Error: {gone}: cannot forget: the model does not remember this message, but prune "
        f"expired 8 digest(s) of this model, last on {last}, so it may have been learned and "
        "its counts cannot be told apart; nothing was forgotten\n",
    )
    assert sample_model.read_bytes() == pruned_bytes


def test_forget_of_a_message_never_learned_without_expiry_is_skipped(sample_model, tmp_path):
    new = tmp_path / "new.eml"
    new.write_bytes(b"Subject: hello\n\nnever learned")
    result = cli_run("forget", "-m", sample_model, new)
    assert (result.exit_code, result.stderr) == (
        3,
        f"{new}: not learned by this model, nothing to forget\nforgot 0 message(s)\n",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give what to prune: --min-count, --max-features, --expire-before or --keep-digests"),
        (("--expire-before", "2024-13-01"), "'2024-13-01' is not a date YYYY-MM-DD"),
        (("--min-docs", "0"), "0 is not in the range x>=1"),
    ],
)
def test_prune_usage_errors(sample_model_path, args, message):
    result = cli_run("prune", "-m", sample_model_path, *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_expire_before_a_date(sample_model):
    result = cli_run("prune", "-m", sample_model, "--expire-before", "2100-01-01")
    assert result.exit_code == 0 and result.stderr.endswith("0 digests (48 expired)\n")
    result = cli_run("prune", "-m", sample_model, "--expire-before", "1999-01-01")
    assert result.exit_code == 0 and result.stderr.endswith("0 digests (0 expired)\n")


def test_info_shows_the_size_of_each_part(sample_model_path):
    sizes = part_sizes(sample_model_path)
    box = container.read(sample_model_path)
    assert sum(sizes[k] for k in ("terms", "counts", "digests", "scoring")) == sum(
        view.nbytes for view, _, _ in box.views.values()
    )
    assert sizes["digests"] == 48 * (16 + 4 + 8)
    data = json.loads(cli_run("info", "-m", sample_model_path, "-f", "json").stdout)
    assert data["sizes"] == sizes
    text = cli_run("info", "-m", sample_model_path).stdout.splitlines()
    assert (
        f"size:       {sizes['file']:,} bytes: terms {sizes['terms']:,}, counts "
        f"{sizes['counts']:,}, digests {sizes['digests']:,} (48 messages), scoring table "
        f"{sizes['scoring']:,}"
    ) in text


def test_merging_a_pruned_model_keeps_the_record_so_forget_stays_careful(model, sample_messages):
    a = fit_messages(sample_messages[::2], SETTINGS)
    b = fit_messages(sample_messages[1::2], SETTINGS)
    a, _ = prune(a, min_docs=2, keep_digests=3)
    merged = merge([a, b])
    assert merged.info["expired"]["digests"] == len(sample_messages[::2]) - 3
    assert merged.info["pruned"]["terms_dropped"] > 0
    with pytest.raises(NbspamError, match="may have been learned"):
        forget(merged, [sample_messages[0]])
    after, change = forget(merged, [sample_messages[1]])  # b's: remembered, and subtracted
    assert change.forgotten == 1 and not after.counts.is_negative()


def test_a_hand_made_record_of_expiry_is_shown_without_failing(model):
    from nbspam.cli.render import model_info

    odd = dataclasses.replace(model, info={"expired": {"digests": "many"}, "pruned": [1]})
    header = {
        "format_version": 1,
        "nbspam_version": "x",
        "tokenizer": model.tokenizer.as_dict(),
        "train": model.training.as_dict(),
    }
    lines = list(model_info("m", header, odd, "text"))
    assert "expired:    digests many" in lines
    with pytest.raises(NbspamError, match="prune expired some digest"):
        forget(odd, [Message("x", b"never learned", "ham")])
