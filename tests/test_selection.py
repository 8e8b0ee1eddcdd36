"""--event-model auto: the choice by internal cross-validation, its record in the model, and
the column masks it tries (stop words); number tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nbspam.core.settings import build_settings
from nbspam.fit import crossval, selection
from nbspam.fit.crossval import Tokenized, cross_validate_matrix
from nbspam.fit.run_settings import resolve_settings
from nbspam.models.model import fit_messages
from nbspam.store.modelfile import load_model
from nbspam.text.features import Analyzer, number_tokens
from nbspam.text.vocabulary import TermIndex, count_rows, sorted_order, stop_terms
from tests.helpers import SAMPLE, assert_same_model, cli_run


def tokenized(messages, settings) -> Tokenized:
    """The messages as count rows over sorted terms, as training keeps them."""
    analyzer = Analyzer(settings.tokenizer)
    index = TermIndex()
    X = count_rows((analyzer.tokens(m.data) for m in messages), index)
    order = sorted_order(index.terms)
    return Tokenized(
        [m.id for m in messages],
        [m.label for m in messages],
        X[:, order].tocsr(),
        [index.terms[i] for i in order],
    )


# --------------------------------------------------------------------------------------------
# The rule of the choice
# --------------------------------------------------------------------------------------------


def test_a_candidate_wins_only_by_removing_a_clear_share_of_the_error(sample_messages, monkeypatch):
    settings = resolve_settings({}, source="test")
    data = tokenized(sample_messages, settings)
    half = len(data.terms) // 2  # the words of the sample, of which half are kept
    # each candidate's AUC, by what it trains with: model, alpha, min-count, stop words, cut
    planned = {
        ("multinomial", 0.1, 1, 0, None): 0.90,
        ("bernoulli", 0.5, 1, 0, None): 0.95,  # half the error: it wins
        ("complement", 0.1, 1, 0, None): 0.954,  # 8% less error, not 10%: noise
        ("fisher", 0.1, 1, 0, None): 0.93,
        ("bernoulli", 0.1, 1, 0, None): 0.958,  # a change needs 20% less: 16% is not enough
        ("bernoulli", 1.0, 1, 0, None): 0.90,
        ("bernoulli", 0.5, 1, 175, None): 0.959,  # 18%: not enough
        ("bernoulli", 0.5, 2, 0, None): 0.962,  # 24%: it wins
        ("bernoulli", 0.5, 1, 0, half): 0.963,  # beats the first round, not min-count 2
    }
    seen, auc_of = [], {}
    real_scores = selection.score_candidates

    def recording(data, shared, trials, **options):
        out = real_scores(data, shared, trials, **options)
        for trial, scores in zip(trials, out):
            t = trial.training
            seen.append((t.event_model, t.alpha, t.min_count, len(t.stop_words), t.max_features))
            auc_of[id(scores)] = planned[seen[-1]]
        return out

    monkeypatch.setattr(selection, "score_candidates", recording)
    monkeypatch.setattr(selection, "pooled_auc", lambda scores: auc_of[id(scores)])
    choice = selection.internal_cv(data, settings)
    assert choice.chosen == "bernoulli + min-count 2"
    t = choice.training
    assert (t.event_model, t.alpha, t.min_count, t.stop_words) == ("bernoulli", 0.5, 2, ())
    assert [row.name for row in choice.tried] == [
        "multinomial",
        "bernoulli",
        "complement norm",
        "fisher",
        "+ alpha 0.1",
        "+ alpha 1",
        "+ stop words",
        "+ min-count 2",
        "+ without word pairs",  # the default counts those of the subject and headers
        f"+ {half:,} words by mutual information",
    ]
    # the second round changes the first round's winner, one setting at a time
    assert seen[4:] == [
        ("bernoulli", 0.1, 1, 0, None),
        ("bernoulli", 1.0, 1, 0, None),
        ("bernoulli", 0.5, 1, 175, None),
        ("bernoulli", 0.5, 2, 0, None),
        ("bernoulli", 0.5, 1, 0, None),  # without word pairs: planned as the winner's AUC
        ("bernoulli", 0.5, 1, 0, half),
    ]
    assert choice.rule is not None and choice.rule.calibration is not None


def test_better_means_less_error_by_a_margin():
    assert selection.better(0.991, 0.98, 0.1)  # error 0.009 against 0.02
    assert not selection.better(0.9815, 0.98, 0.1)  # 7.5% less error
    assert selection.better(0.9825, 0.98, 0.1)  # 12.5% less
    assert not selection.better(1.0 - 1e-5, 1.0 - 5e-5, 0.1)  # within TIE
    assert not selection.better(0.97, 0.98, 0.0)


def test_each_auc_in_the_table_is_the_candidates_own_cross_validation(sample_messages):
    settings = resolve_settings({}, source="test")
    data = tokenized(sample_messages, settings)
    choice = selection.internal_cv(data, settings)
    assert choice.folds == 5 and choice.messages == 48
    winner = next(row for row in choice.tried if row.name == choice.chosen.split(" + ")[0])
    for row in choice.tried:
        # a second-round row changes the first round's winner
        start = winner.changes if row.name.startswith("+ ") else {}
        cfg = settings.training.replace(**{**start, **row.changes})
        scores = cross_validate_matrix(data, settings.replace(training=cfg))
        if row.auc is not None:
            assert row.auc == selection.pooled_auc(scores), row.name
            continue
        # stopped early: its AUC, had it been scored on every fold, is within the bound
        assert row.note.startswith("stopped "), row
        bound = float(row.note.split("could be at most ")[1].split(",")[0])
        assert selection.pooled_auc(scores) <= bound + 5e-6, row.name
    assert any(row.auc is None for row in choice.tried)


def test_the_candidates_share_each_folds_counts(sample_messages, monkeypatch):
    """The counts of each fold's rows are taken once for all the candidates, not once per
    candidate; the scores are those of each setting cross-validated alone."""
    settings = resolve_settings({}, source="test")
    data = tokenized(sample_messages, settings)
    counted = []
    real_counts = crossval.nb.class_counts
    monkeypatch.setattr(
        crossval.nb,
        "class_counts",
        lambda X, *a, **k: counted.append(X.shape[0]) or real_counts(X, *a, **k),
    )
    choice = selection.internal_cv(data, settings)
    assert len(choice.tried) == 10  # with the model without its word pairs
    # all the rows once, then the rows of each of the 5 folds once
    assert sorted(counted) == [9, 9, 10, 10, 10, 48]
    fisher = settings.training.replace(event_model="fisher")
    stop = fisher.replace(stop_words=selection.load_stop_words("english", settings.tokenizer))
    shared = crossval.Folds(data, crossval.stratified_split(data.labels, 5, 42)[0], None)
    for cfg in (fisher, stop):
        trial = settings.replace(training=cfg)
        scores = cross_validate_matrix(data, trial, shared=shared)
        alone = cross_validate_matrix(data, trial)
        assert scores.log_odds.tolist() == alone.log_odds.tolist()


def _forms_made(monkeypatch) -> list[str]:
    """A list that gets the event model of every scoring form made from then on."""
    from nbspam.models import event_models

    made = []
    for cls in (event_models.EventModel, event_models.Fisher):
        real = cls.form

        def spy(self, model, kept, *rest, real=real):
            made.append(self.name)
            return real(self, model, kept, *rest)

        monkeypatch.setattr(cls, "form", spy)
    return made


def test_a_candidate_that_cannot_win_is_stopped_and_the_choice_is_the_full_runs(
    sample_messages, monkeypatch
):
    settings = resolve_settings({}, source="test")
    data = tokenized(sample_messages, settings)
    made = _forms_made(monkeypatch)
    choice = selection.internal_cv(data, settings)
    early = list(made)
    # multinomial and bernoulli (AUC 1: nothing can beat it by a margin) on every fold;
    # complement after 2 folds, fisher after 1; the changes to bernoulli on none
    assert (
        early
        == ["multinomial"] * 5
        + ["bernoulli", "complement", "fisher"]
        + [
            "bernoulli",
            "complement",
        ]
        + ["bernoulli"] * 3
    )
    made.clear()
    with monkeypatch.context() as full:
        # every bound beats the best: none is stopped
        full.setattr(selection, "SLACK", 1.0, raising=False)
        whole = selection.internal_cv(data, settings)
    assert (choice.training, choice.rule, choice.chosen) == (
        whole.training,
        whole.rule,
        whole.chosen,
    )
    assert whole.chosen == "bernoulli" and all(row.auc is not None for row in whole.tried)
    assert len(made) == 50  # 10 candidates, 5 folds each
    for row, full_row in zip(choice.tried, whole.tried):
        assert row == full_row if row.auc is not None else row.note.startswith("stopped ")
    stopped = [row.name for row in choice.tried if row.auc is None]
    assert stopped == ["complement norm", "fisher"] + [r.name for r in choice.tried[4:]]
    assert choice.tried[2].note == (
        "stopped after 2 of 5 folds: its ROC AUC could be at most 0.99653, which does not "
        "remove 10% of the error of the best, 0.99653"
    )
    assert choice.tried[4].note == (
        "stopped before its folds: its ROC AUC could be at most 1.00000, which does not "
        "remove 20% of the error of the best, 1.00000"
    )


def test_the_best_possible_auc_counts_the_pairs_the_scored_rows_rank_wrong():
    from nbspam.fit.crossval import Scores

    labels = ("spam", "ham") * 4
    odds = np.array([2.0, 3.0, 1.0, 1.0, np.nan, np.nan, np.nan, np.nan])
    fold = np.array([0, 0, 0, 0, -1, -1, -1, -1])  # the second fold not scored yet
    scores = Scores(
        ids=tuple("abcdefgh"),
        labels=labels,
        classes=("ham", "spam"),
        log_posterior=np.zeros((8, 2)),
        log_odds=odds,
        positive="spam",
        fold=fold,
        seconds={},
    )
    # of the 4 x 4 pairs, (2, 3) and (1, 3) are ranked wrong and (1, 1) is a tie: 2.5 of 16
    assert selection.best_possible_auc(scores) == 1.0 - 2.5 / 16
    rng = np.random.default_rng(3)
    every = rng.normal(size=8).round(1)
    done = Scores(
        *[getattr(scores, f) for f in ("ids", "labels", "classes", "log_posterior")],
        log_odds=every,
        positive="spam",
        fold=np.zeros(8, int),
        seconds={},
    )
    assert abs(selection.best_possible_auc(done) - selection.pooled_auc(done)) < 1e-12


def test_a_folds_models_share_one_fit_and_fishers_word_probabilities(sample_messages, monkeypatch):
    """Every candidate's model of a fold is the first one's with its own settings: one
    from_counts a fold for all the candidates, not one a candidate, and Fisher's word
    probabilities once a fold and strength; the scores are those of each alone, to the bit."""
    from nbspam.models import fisher

    settings = resolve_settings({}, source="test")
    data = tokenized(sample_messages, settings)
    fits, probabilities = [], []
    real_fit, real_f = crossval.from_counts, fisher.word_probabilities
    monkeypatch.setattr(
        crossval, "from_counts", lambda *a, **k: fits.append(1) or real_fit(*a, **k)
    )
    monkeypatch.setattr(
        fisher, "word_probabilities", lambda *a, **k: probabilities.append(1) or real_f(*a, **k)
    )
    monkeypatch.setattr(selection, "SLACK", 1.0, raising=False)  # no candidate stopped
    choice = selection.internal_cv(data, settings)
    assert choice.chosen == "bernoulli"
    # the first round: multinomial alone (5 folds), then the 3 others together (5); the
    # second: the 6 changes together (5); fisher in the first round only
    assert (len(fits), len(probabilities)) == (15, 5)
    shared = crossval.Folds(data, crossval.stratified_split(data.labels, 5, 42)[0], None)
    fisher_stop = settings.training.replace(
        event_model="fisher", stop_words=selection.load_stop_words("english", settings.tokenizer)
    )
    trials = [
        settings.replace(training=t)
        for t in (
            settings.training.replace(event_model="fisher"),
            fisher_stop,
            settings.training.replace(event_model="bernoulli", min_count=2),
        )
    ]
    together = crossval.score_candidates(data, shared, trials)
    for trial, scores in zip(trials, together):
        alone = cross_validate_matrix(data, trial)
        assert scores.log_odds.tobytes() == alone.log_odds.tobytes()
        assert scores.log_posterior.tobytes() == alone.log_posterior.tobytes()


def test_more_than_two_labels_choose_among_the_linear_models_by_mean_auc():
    texts = {
        "sport": ["goal match team win", "team score goal cup", "cup final match team"],
        "money": ["bank loan rate cash", "cash rate bank fund", "fund loan bank rate"],
        "food": ["bread cake oven bake", "oven bake soup bread", "cake soup bread bake"],
    }
    from nbspam.mail.message import Message

    messages = [
        Message(f"{label}{i}", f"{text} {label}{i}", label)
        for label, items in texts.items()
        for _ in range(3)
        for i, text in enumerate(items)
    ]
    settings = resolve_settings({"mail": "never"}, source="test")
    choice = selection.internal_cv(tokenized(messages, settings), settings)
    assert "fisher" not in [row.name for row in choice.tried]
    assert choice.rule is None and choice.training.event_model in (
        "multinomial",
        "bernoulli",
        "complement",
    )
    assert all(
        0.0 <= row.auc <= 1.0 if row.auc is not None else row.note.startswith("stopped ")
        for row in choice.tried
    )


def test_too_few_messages_to_choose_fall_back_and_say_so(tmp_path):
    for label in ("ham", "spam"):
        (tmp_path / "d" / label).mkdir(parents=True)
        (tmp_path / "d" / label / "1.txt").write_text(f"a {label} message")
    result = cli_run("train", tmp_path / "d", "-o", tmp_path / "m.nbm")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[1] == (
        "model: the multinomial model (how often each word occurs), as 2 messages are too few "
        "to choose by cross-validation"
    )
    assert load_model(tmp_path / "m.nbm").training.event_model == "multinomial"


# --------------------------------------------------------------------------------------------
# The model auto trains
# --------------------------------------------------------------------------------------------


def test_auto_trains_the_model_of_the_settings_it_chose(tmp_path):
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "auto.nbm")
    assert result.exit_code == 0, result.stderr
    auto = load_model(tmp_path / "auto.nbm")
    record = auto.info["auto"]
    chosen = next(r for r in record["candidates"] if r["name"] == record["chosen"])
    options = [f"--event-model={chosen['settings']['event_model']}"]
    options += [f"--alpha={chosen['settings']['alpha']}"] if "alpha" in chosen["settings"] else []
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "fixed.nbm", *options)
    assert result.exit_code == 0, result.stderr
    fixed = load_model(tmp_path / "fixed.nbm")
    assert fixed.training.event_model == auto.training.event_model == record["event_model"]
    assert_same_model(auto, fixed)
    assert (auto.cutoffs, auto.calibration) == (fixed.cutoffs, fixed.calibration)
    assert "auto" not in fixed.info


def test_auto_holds_the_settings_given_and_chooses_only_the_rest(tmp_path):
    # before, each candidate's own smoothing replaced a given alpha without a word (the
    # model said alpha 0.5), and "+ min-count 2" and the first round's lack of stop words
    # replaced a given min-count and stop-word list alike
    settings = tmp_path / "settings.yaml"
    settings.write_text("min-count: 3\nstop-words: english\n")
    result = cli_run(
        "train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "--alpha", "5", "-c", settings
    )
    assert result.exit_code == 0, result.stderr
    model = load_model(tmp_path / "m.nbm")
    assert (model.training.alpha, model.training.min_count) == (5.0, 3)
    assert "the" in model.training.stop_words
    record = model.info["auto"]
    names = [r["name"] for r in record["candidates"]]
    assert names[:4] == ["multinomial", "bernoulli", "complement norm", "fisher"]
    assert not [n for n in names if n.startswith(("+ alpha", "+ min-count", "+ stop words"))]
    assert {r["settings"].get("alpha", 5.0) for r in record["candidates"]} == {5.0}
    # what was not given is still chosen: without --event-model, an event model
    assert record["event_model"] in ("multinomial", "bernoulli", "complement", "fisher")


def test_the_help_says_auto_tries_stop_words_and_pairs_only_where_not_given(tmp_path):
    # the help said auto tried the model with and without a --stop-words list given, and
    # without the pairs of a --word-pairs given: a setting given holds, neither is tried
    from nbspam.cli.commands import cli

    helps = {p.opts[-1]: p.help for p in cli.commands["train"].params}
    assert (
        "so where this is not given auto tries the model with the English ones left out; "
        "a list given is held."
    ) in helps["--stop-words"]
    pairs = helps["--word-pairs"]
    assert "Where this is not given, auto also tries the model without them." in pairs
    tried = {}
    given = ["--stop-words", "english", "--word-pairs", "headers"]
    for name, options in (("given", given), ("left", [])):
        result = cli_run("train", SAMPLE / "train", "-o", tmp_path / f"{name}.nbm", *options)
        assert result.exit_code == 0, result.stderr
        record = load_model(tmp_path / f"{name}.nbm").info["auto"]
        tried[name] = {r["name"] for r in record["candidates"]}
    assert {"+ stop words", "+ without word pairs"} <= tried["left"]
    assert not {"+ stop words", "+ without word pairs"} & tried["given"]


def test_train_prints_the_candidates_and_info_shows_them(tmp_path):
    result = cli_run("train", SAMPLE / "train", "-o", tmp_path / "m.nbm", "-v")
    lines = result.stderr.splitlines()[1:]
    record = load_model(tmp_path / "m.nbm").info["auto"]
    n = len(record["candidates"])
    assert lines[1] == (
        f"event model: {record['chosen']}, chosen by cross-validation (5 folds of 48 messages)"
    )
    assert lines[3].split() == ["candidate", "ROC", "AUC", "error", "%", "verdict"]
    table = lines[4 : 4 + n]
    assert [line[2:].split("  ")[0].strip() for line in table] == [
        r["name"] for r in record["candidates"]
    ]
    for line, row in zip(table, record["candidates"]):
        if row["auc"] is None:  # stopped early: why, in place of its AUC
            assert line.endswith(f"{'-':>9} {'-':>8}  {row['note']}") and "stopped" in line
        else:
            assert f"{row['auc']:>9.5f} {100 * (1 - row['auc']):>8.3f}  " in line
    assert sum(line.startswith("*") for line in table) == len(record["chosen"].split(" + "))
    shown = cli_run("info", "-m", tmp_path / "m.nbm").stdout.splitlines()
    start = shown.index(lines[1])
    assert shown[start : start + 3 + n] == lines[1 : 4 + n]
    as_json = json.loads(cli_run("info", "-m", tmp_path / "m.nbm", "-f", "json").stdout)
    assert as_json["history"]["auto"] == record


def test_evaluate_says_which_event_model_each_fold_chose(tmp_path):
    result = cli_run("evaluate", SAMPLE / "train", "--folds", "3", "-f", "json")
    assert result.exit_code == 0, result.stderr
    protocol = json.loads(result.stdout)["protocol"]
    assert protocol["auto"].startswith("event model chosen inside each training part: ")
    assert protocol["auto"].endswith(" of 3)")


# --------------------------------------------------------------------------------------------
# Stop words as a column mask; number tokens
# --------------------------------------------------------------------------------------------


def test_stop_terms_are_words_tagged_words_and_ngrams_holding_one():
    terms = (
        "the",
        "subject:the",
        "of freedom",
        "subject:in time",
        "header:to",
        "attachment:the",
        "digits:5",
        "from:addr:the@example.com",
        "theory",
        "free offer",
    )
    mask = stop_terms(terms, ("in", "of", "the", "to"))
    assert [t for t, m in zip(terms, mask) if m] == [
        "the",
        "subject:the",
        "of freedom",
        "subject:in time",
    ]
    assert not stop_terms(terms, ()).any()


def test_masking_stop_words_gives_the_model_that_never_counted_them():
    from nbspam.mail.message import Message

    texts = [
        ("spam", "Win a free prize of the year: call to claim the cash now"),
        ("spam", "The best offer in the world is for you, free of charge"),
        ("spam", "Claim your cash prize and the free gift on the site"),
        ("ham", "The meeting is at noon in the main room, bring the notes"),
        ("ham", "Can you send me the report of the last quarter by Friday"),
        ("ham", "Lunch with the team is moved to the cafe on the corner"),
    ]
    messages = [Message(str(i), text, label) for i, (label, text) in enumerate(texts)]
    masked = resolve_settings(
        {"stop_words": "english", "event_model": "multinomial", "mail": "never"}, source="test"
    )
    words = masked.training.stop_words
    removed = masked.replace(
        tokenizer=masked.tokenizer.replace(stop_words=words),
        training=masked.training.replace(stop_words=()),
    )
    a, b = fit_messages(messages, masked), fit_messages(messages, removed)
    assert len(a.terms) > len(b.terms)  # the mask's model still counts the stop words
    assert a.form.terms == b.form.terms
    np.testing.assert_allclose(a.form.weights, b.form.weights, rtol=1e-12)
    assert a.form.bias == pytest.approx(b.form.bias, rel=1e-12)


def test_number_tokens_give_the_length_of_each_run_of_three_digits_or_more():
    text = "Call 08452810075 or text 87121 by 12 May, ref 123456789012345678"
    assert number_tokens(text) == ["digits:11", "digits:5", "digits:12"]
    words = Analyzer(build_settings({"mail": "never"}).tokenizer).tokens(text)
    assert words[-3:] == ["digits:11", "digits:5", "digits:12"]
    without = Analyzer(build_settings({"mail": "never", "number_tokens": False}).tokenizer)
    assert not [t for t in without.tokens(text) if t.startswith("digits:")]


def test_a_model_written_before_number_tokens_tokenizes_without_them(sample_model_path, tmp_path):
    from nbspam.store import container

    box = container.read(sample_model_path)
    header = dict(box.header)
    header["tokenizer"] = {k: v for k, v in header["tokenizer"].items() if k != "number_tokens"}
    old = tmp_path / "old.nbm"
    blobs = {
        name: container.Blob(bytes(view), dtype, shape)
        for name, (view, dtype, shape) in box.views.items()
    }
    container.write(
        old,
        {k: v for k, v in header.items() if k not in ("format_version", "nbspam_version")},
        blobs,
    )
    assert load_model(old).tokenizer.number_tokens is False
    assert load_model(sample_model_path).tokenizer.number_tokens is True


# --------------------------------------------------------------------------------------------
# The corpora
# --------------------------------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.slow
def test_auto_chooses_fisher_on_spamassassin(spamassassin_matrix):
    X, labels, terms = spamassassin_matrix
    data = Tokenized([str(i) for i in range(len(labels))], labels, X, terms)
    choice = selection.internal_cv(data, resolve_settings({}, source="test"))
    assert choice.training.event_model == "fisher"
    assert 100 * (1 - max(row.auc for row in choice.tried if row.auc)) < 0.04


@pytest.mark.corpus
def test_auto_chooses_bernoulli_on_sms(sms):
    from nbspam.mail.message import Problems
    from nbspam.mail.messages import read_labelled

    settings = resolve_settings({}, source="test")
    messages = list(read_labelled([str(sms)], Problems()))
    choice = selection.internal_cv(tokenized(messages, settings), settings)
    assert choice.training.event_model == "bernoulli"
    assert 100 * (1 - max(row.auc for row in choice.tried if row.auc)) < 0.5


def test_word_pairs_are_hashed_into_a_fixed_number_of_buckets():
    import zlib

    def bucket(a, b, buckets):
        return (zlib.crc32(a.encode()) * 0x9E3779B1 ^ zlib.crc32(b.encode())) % buckets

    analyzer = Analyzer(
        build_settings({"mail": "never", "word_pairs": "all", "pair_buckets": 16}).tokenizer
    )
    assert analyzer.tokens("Buy cheap pills") == [
        "buy",
        "cheap",
        "pills",
        f"pair:{bucket('buy', 'cheap', 16)}",
        f"pair:{bucket('cheap', 'pills', 16)}",
    ]
    mail = Analyzer(build_settings({"word_pairs": "all", "pair_buckets": 16}).tokenizer).tokens(
        b"Subject: Hi there\n\nyes"
    )
    assert f"subject:pair:{bucket('hi', 'there', 16)}" in mail
    # however many words, at most 16 pair terms
    rng = np.random.default_rng(0)
    text = " ".join(f"w{n}" for n in rng.integers(0, 10**6, 2000))
    pairs = {t for t in analyzer.tokens(text) if t.startswith("pair:")}
    assert 1 < len(pairs) <= 16
    assert not any(
        t.startswith("pair:") for t in Analyzer(build_settings({}).tokenizer).tokens(text)
    )


def _without_pairs(values: dict):
    """Settings that count the word pairs and score without them, as auto's "+ without
    word pairs" does (not a setting of its own)."""
    settings = build_settings(values)
    return settings.replace(training=settings.training.replace(score_pairs=False))


def test_the_model_without_its_word_pairs_is_the_model_that_never_counted_them():
    from nbspam.mail.messages import Message

    texts = [
        ("spam", "win a free prize now"),
        ("spam", "free prize for you now"),
        ("ham", "the meeting is at noon"),
        ("ham", "notes of the meeting"),
    ]
    messages = [Message(str(i), text, label) for i, (label, text) in enumerate(texts)]
    base = {"event_model": "multinomial", "mail": "never"}
    counted = fit_messages(
        messages, _without_pairs({**base, "word_pairs": "all", "pair_buckets": 64})
    )
    never = fit_messages(messages, build_settings({**base, "word_pairs": "none"}))
    assert any(t.startswith("pair:") for t in counted.terms)
    assert counted.form.terms == never.form.terms
    np.testing.assert_allclose(counted.form.weights, never.form.weights, rtol=1e-12)
    assert counted.form.bias == pytest.approx(never.form.bias, rel=1e-12)


def test_the_model_without_its_word_pairs_leaves_out_the_pairs_of_the_headers_too():
    from nbspam.mail.messages import Message

    texts = [
        ("spam", "Subject: win a free prize\nFrom: Prize Desk <desk@example.com>\n\nclaim it now"),
        ("spam", "Subject: free prize for you\nFrom: Prize Desk <desk@example.com>\n\nnow"),
        ("ham", "Subject: the meeting at noon\nFrom: Ann Smith <ann@example.com>\n\nnotes"),
        ("ham", "Subject: notes of the meeting\nFrom: Ann Smith <ann@example.com>\n\nbye"),
    ]
    messages = [Message(str(i), text.encode(), label) for i, (label, text) in enumerate(texts)]
    base = {"event_model": "multinomial", "mail": "always"}
    counted = fit_messages(
        messages, _without_pairs({**base, "word_pairs": "all", "pair_buckets": 64})
    )
    never = fit_messages(messages, build_settings({**base, "word_pairs": "none"}))
    assert any(t.startswith("subject:pair:") for t in counted.terms)
    assert counted.form.terms == never.form.terms
    np.testing.assert_allclose(counted.form.weights, never.form.weights, rtol=1e-12)


def test_auto_tries_the_model_without_word_pairs_where_they_are_counted(sample_messages):
    # the default counts the headers' pairs, and auto tries the model without them; pairs
    # asked for (--word-pairs) are held, as any setting given
    given = {"pair_buckets": 1024}
    for values, tried in (
        (given, True),
        ({**given, "word_pairs": "none"}, False),
        ({**given, "word_pairs": "headers"}, False),
        ({**given, "word_pairs": "all"}, False),
    ):
        settings = resolve_settings(values, source="test")
        choice = selection.internal_cv(tokenized(sample_messages, settings), settings)
        names = [row.name for row in choice.tried]
        assert ("+ without word pairs" in names) is tried
