"""Explanations (`explain`): a message's log-odds as bias plus one contribution per word,
and the terms that weigh most toward each class."""

from __future__ import annotations

import json
import math
import re

import pytest

from nbspam.errors import NbspamError
from nbspam.mail.message import Problems
from nbspam.mail.messages import read_messages
from nbspam.models.explain import count_kind, explain_message, top_terms
from nbspam.models.model import score
from nbspam.store.modelfile import load_model
from nbspam.text.features import Analyzer
from tests.helpers import SAMPLE, cli_run
from tests.test_naive_bayes import TEST, textbook


@pytest.fixture(scope="module")
def model(sample_model_path):
    return load_model(sample_model_path)


@pytest.fixture(scope="module")
def messages():
    return list(read_messages([str(SAMPLE / "new")], Problems()))


def test_bias_and_contributions_add_up_to_the_log_odds_predict_gives(model, messages):
    analyzer = Analyzer(model.tokenizer)
    predicted = {p.id: p for p in score(model, messages)}
    assert len(predicted) == len(messages) > 5
    for message in messages:
        tokens = analyzer.tokens(message.data)
        e = explain_message(model, message.id, tokens)
        assert (e.positive, e.negative) == ("spam", "ham")
        assert e.log_odds == predicted[message.id].log_odds
        assert e.label == predicted[message.id].label
        total = e.bias + math.fsum(c.contribution for c in e.contributions)
        assert total == pytest.approx(e.log_odds, abs=1e-12, rel=1e-12)
        assert e.unknown_tokens == sum(t not in model.form.index.ids for t in tokens)
        assert {c.term for c in e.contributions} == set(tokens) - {
            t for t in tokens if t not in model.form.index.ids
        }
        sizes = [abs(c.contribution) for c in e.contributions]
        assert sizes == sorted(sizes, reverse=True)
        for c in e.contributions:  # the sample model counts presence: f(x_a) is 1
            assert c.count == 1
            assert c.contribution == c.weight


def test_top_terms_are_sorted_by_weight_and_mirror_each_other(model):
    assert count_kind(model) == "documents"
    spam, ham = top_terms(model, 10)
    assert (spam.toward, spam.against, ham.toward, ham.against) == ("spam", "ham", "ham", "spam")
    for side in (spam, ham):
        weights = [t.weight for t in side.terms]
        assert len(weights) == 10 and weights == sorted(weights, reverse=True)
        assert weights[-1] > 0
    # the weight of a term toward ham is minus its weight toward spam
    toward_spam = {t.term: t.weight for t in top_terms(model, len(model.form.terms))[0].terms}
    for t in ham.terms:
        assert toward_spam[t.term] == -t.weight
    # no term outside the top ten weighs more toward spam than the tenth
    rest = sorted(toward_spam.values(), reverse=True)
    assert [t.weight for t in spam.terms] == rest[:10]
    # each term's counts are the number of ham and of spam messages it is in
    for t in spam.terms:
        a = model.terms.index(t.term)
        assert t.counts == tuple(int(k) for k in model.doc_count[:, a])


def test_explaining_against_an_unknown_label_is_an_error(model):
    with pytest.raises(NbspamError, match=r"--against 'eggs' is not one of the labels"):
        top_terms(model, 3, against="eggs")


def test_the_textbook_example_by_hand():
    """Manning et al. 13.2: d5 = chinese x3, tokyo, japan; japan is the positive class."""
    model, _ = textbook("multinomial")
    e = explain_message(model, "d5", TEST + ["unseen"])
    assert (e.positive, e.negative, e.label) == ("japan", "china", "china")
    assert e.bias == pytest.approx(math.log((1 / 4) / (3 / 4)), abs=1e-15)
    # w = log theta(.|japan) - log theta(.|china): chinese 2/9 vs 3/7, tokyo and japan 2/9 vs 1/14
    w_chinese = math.log((2 / 9) / (3 / 7))
    w_rare = math.log((2 / 9) / (1 / 14))
    got = {c.term: (c.count, c.weight, c.contribution) for c in e.contributions}
    assert got == {
        "chinese": (
            3,
            pytest.approx(w_chinese, abs=1e-14),
            pytest.approx(3 * w_chinese, abs=1e-14),
        ),
        "tokyo": (1, pytest.approx(w_rare, abs=1e-14), pytest.approx(w_rare, abs=1e-14)),
        "japan": (1, pytest.approx(w_rare, abs=1e-14), pytest.approx(w_rare, abs=1e-14)),
    }
    assert [c.term for c in e.contributions] == ["chinese", "japan", "tokyo"]  # size, then term
    assert e.unknown_tokens == 1
    china = 3 / 4 * (3 / 7) ** 3 * (1 / 14) ** 2
    japan = 1 / 4 * (2 / 9) ** 5
    assert e.log_odds == pytest.approx(math.log(japan / china), abs=1e-12)


DEMO_HAM = "1778151612.M3P1311.mailhost:2,S"  # Bayes says spam (+9.04), the cutoffs ham


@pytest.fixture(scope="module")
def demo_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "spam.nbm"
    assert cli_run("train", SAMPLE / "train", "-o", path).exit_code == 0
    return path


def test_explain_states_the_verdict_at_the_cutoffs_first(demo_model):
    # the demo's example: explain said "spam (log-odds +9.04)" where predict said ham
    message = SAMPLE / "maildir" / "ham" / "cur" / DEMO_HAM
    cutoffs = load_model(demo_model).cutoffs
    assert cutoffs[0] > 8.98  # the cutoffs call it ham: the case in point
    first = cli_run("explain", "-m", demo_model, "--top", "1", message).stdout.splitlines()[0]
    assert first == (
        f"{message}: ham (log-odds spam vs ham: +8.9726; ham below {cutoffs[0]:+.3f}, spam "
        f"from {cutoffs[1]:+.3f}; Bayes label spam)"
    )
    predicted = cli_run("predict", "-m", demo_model, message).stdout
    assert predicted.startswith(f"{message}: ham (log-odds +8.973, probability of spam 0.9999")


def test_one_verdict_through_predict_explain_filter_and_the_api(demo_model):
    import nbspam

    files = sorted((SAMPLE / "new").iterdir()) + sorted((SAMPLE / "maildir" / "ham").glob("*/*"))
    predicted = [
        json.loads(line)
        for line in cli_run("predict", "-m", demo_model, "-f", "jsonl", *files).stdout.splitlines()
    ]
    explained = [
        json.loads(line)
        for line in cli_run(
            "explain", "-m", demo_model, "-f", "jsonl", "--top", "1", *files
        ).stdout.splitlines()
    ]
    api = nbspam.load(demo_model).predict([f.read_bytes() for f in files])
    filtered = [
        cli_run("filter", "-m", demo_model, input=f.read_bytes()).stdout_bytes for f in files
    ]
    verdicts = [p["verdict"] for p in predicted]
    assert [e["verdict"] for e in explained] == verdicts
    assert [p.verdict for p in api] == verdicts
    assert [re.search(rb"X-Nbspam-Status: (\w+);", f).group(1).decode() for f in filtered] == (
        verdicts
    )
    assert "ham" in verdicts and "spam" in verdicts
    assert any(e["label"] != e["verdict"] for e in explained)  # the demo's ham at +9.04
    for p in predicted:  # no spam below 1/2, no ham above
        assert p["calibrated"] >= 0.5 if p["verdict"] == "spam" else p["calibrated"] <= 0.5
