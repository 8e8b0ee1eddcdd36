"""Online evaluation (nbspam.evaluation.online): each message scored by the model of the messages
before it, exactly as train on the warm-up plus learn would make it; the training policies;
the order of the stream; the CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from nbspam.core.settings import build_settings
from nbspam.errors import ConfigError, InputError
from nbspam.evaluation.online import (
    POLICIES,
    learn_label,
    learning_curve,
    read_stream,
    run_online,
    stream_order,
    warmup_size,
)
from nbspam.fit.training import train
from nbspam.mail.message import Message
from nbspam.models.decision import UNSURE
from nbspam.models.model import score
from nbspam.service.update import learn
from tests.helpers import SAMPLE, cli_run

HAM_WORDS = "meeting lunch report budget family weekend project call thanks agenda".split()
SPAM_WORDS = "viagra winner prize cash offer free click casino loan credit".split()
BOTH = "hello today please your time news update account".split()


def stream_messages(n: int = 60, seed: int = 3) -> list[Message]:
    """Short texts from overlapping vocabularies, so that the first messages are often
    misjudged; one message comes twice, once under each label."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = "spam" if rng.random() < 0.4 else "ham"
        own = SPAM_WORDS if label == "spam" else HAM_WORDS
        other = HAM_WORDS if label == "spam" else SPAM_WORDS
        words = rng.choices(own, k=4) + rng.choices(other, k=2) + rng.choices(BOTH, k=3)
        rng.shuffle(words)
        out.append(Message(f"m{i:03d}", " ".join(words), label))
    out[:2] = [Message("m000", "meeting lunch today", "ham"), Message("m001", "free cash", "spam")]
    out.append(Message("again", out[20].data, "spam" if out[20].label == "ham" else "ham"))
    out.append(Message("same", out[25].data, out[25].label))
    return out


def settings(**given):
    return build_settings({"event_model": "multinomial", **given})


def online(messages, policy, warmup=8, **options):
    config = options.pop("settings", settings())
    stream = read_stream(messages, config, order="input")
    return run_online(stream, config, policy=policy, warmup=warmup, **options)


def reference_log_odds(messages, result, config, warmup):
    """The log-odds of each scored message by train on the warm-up, then learn of each
    message the online run learned before it, under the label it learned it as; and the
    model at the end."""
    model = train(messages[:warmup], config)
    out = []
    for message, learned in zip(messages[warmup:], result.learned[warmup:].tolist()):
        (p,) = score(model, [message])
        out.append(p.log_odds)
        if learned:
            model, _ = learn(model, [message], learned)
    return np.array(out), model


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(
    "given",
    [{}, {"event_model": "bernoulli"}, {"event_model": "fisher", "min_dev": 0.1}, {"min_count": 2}],
    ids=["multinomial", "bernoulli", "fisher", "min_count"],
)
def test_each_message_is_scored_by_the_model_of_the_messages_before_it(policy, given):
    messages = stream_messages()
    config = settings(**given)
    result = online(
        messages, policy, warmup=20, settings=config, autolearn_spam=0.9, autolearn_ham=0.1
    )
    expected, final = reference_log_odds(messages, result, config, 20)
    got = result.scores.log_odds[20:]
    # the same counts, so the same numbers but for the order of a floating-point sum
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    counts = result.counts
    assert counts.labels == final.labels and counts.terms == final.terms
    for name in ("class_count", "term_count", "doc_count"):
        assert np.array_equal(getattr(counts, name), getattr(final, name)), name
    assert np.isnan(result.scores.log_odds[:20]).all()
    assert (result.scores.fold == np.r_[np.full(20, -1), np.zeros(len(messages) - 20)]).all()


def test_auto_chooses_on_the_warm_up_as_train_would():
    messages = stream_messages(80)
    config = build_settings({})
    result = online(messages, "all", warmup=30, settings=config)
    model = train(messages[:30], config)
    assert result.scores.protocol["event_model"] == model.training.event_model
    expected, _ = reference_log_odds(messages, result, config, 30)
    np.testing.assert_allclose(result.scores.log_odds[30:], expected, rtol=1e-12, atol=1e-12)
    rule = result.scores.rules[0]
    assert rule.cutoffs == pytest.approx(model.cutoffs)
    assert rule.calibration == pytest.approx(model.calibration)


def test_policies_learn_what_they_say():
    messages = stream_messages()
    truth = np.array([m.label for m in messages], dtype=object)
    config = settings(cutoffs="-1,1")  # a narrow unsure band: errors and unsure ones both
    for policy in POLICIES:
        result = online(
            messages, policy, settings=config, warmup=20, autolearn_spam=0.7, autolearn_ham=0.3
        )
        v, learned = result.scores.verdicts[20:], result.learned[20:]
        t, cal = truth[20:], result.scores.calibrated[20:]
        wrong = (v != t) & (v != UNSURE)
        if policy == "all":
            # every message, but the one learned before under the same label
            assert (learned == t).sum() == len(t) - 1 and learned[-1] == ""
        elif policy == "errors":
            assert wrong.any()
            assert ((learned != "") == wrong).all() and (learned[wrong] == t[wrong]).all()
        elif policy == "unsure":
            chosen = v != t
            assert (v == UNSURE).any()
            assert ((learned != "") == chosen).all() and (learned[chosen] == t[chosen]).all()
        elif policy == "errors+autolearn":
            sure = (cal >= 0.7) | (cal <= 0.3)
            assert (learned[wrong] == t[wrong]).all()
            assert ((learned != "") <= (wrong | sure)).all()
            extra = (learned != "") & ~wrong  # the model's own label
            assert (learned[extra & (cal >= 0.7)] == "spam").all()
            assert (learned[extra & (cal <= 0.3)] == "ham").all()
        else:
            sure = (cal >= 0.7) | (cal <= 0.3)
            assert sure.any() and (~sure).any()
            assert ((learned != "") <= sure).all()  # a sure one is not learned if known
            # the model's label, right or wrong
            assert (learned[cal >= 0.7] != "ham").all() and (learned[cal <= 0.3] != "spam").all()
            assert (learned[sure & (learned != "")] != t[sure & (learned != "")]).any()
        assert result.summary["learned"] == int((learned != "").sum())
        assert result.summary["errors"] == int(wrong.sum())


def test_learn_label_by_policy():
    spam, ham = "spam", "ham"

    def label(policy, truth, given, p=0.5):
        return learn_label(policy, truth, given, p, spam, ham, 0.99, 0.01)

    assert label("all", ham, ham) == ham
    assert label("errors", ham, spam) == ham and label("errors", ham, ham) is None
    assert label("errors", spam, UNSURE) is None
    assert label("unsure", spam, UNSURE) == spam and label("unsure", spam, ham) == spam
    assert label("unsure", spam, spam) is None
    # autolearn takes the model's word, right or wrong, and only when it is sure
    assert label("autolearn", ham, spam, 0.995) == spam
    assert label("autolearn", spam, ham, 0.01) == ham
    assert label("autolearn", spam, spam, 0.98) is None
    assert label("errors+autolearn", spam, ham, 0.5) == spam  # a correction
    assert label("errors+autolearn", spam, ham, 0.001) == spam
    assert (
        label("errors+autolearn", ham, ham, 0.001) == ham
        and label("errors+autolearn", ham, ham) is None
    )
    with pytest.raises(ConfigError):
        label("sometimes", spam, spam)


def test_learning_curve_blocks():
    truth = np.array(["ham"] * 1500 + ["spam"] * 700, dtype=object)
    verdicts = truth.copy()
    verdicts[[0, 1, 1200]] = "spam"  # two false positives in the first block, one in the second
    verdicts[[1600, 1601]] = ["ham", UNSURE]  # a false negative and an unsure in the second
    learned = np.where(np.arange(2200) % 2 == 0, "x", "").astype(object)
    curve = learning_curve(truth, verdicts, learned, "spam")
    assert [(b["first"], b["last"]) for b in curve] == [(1, 1000), (1001, 2000), (2001, 2200)]
    assert [(b["fp"], b["fn"], b["unsure"]) for b in curve] == [(2, 0, 0), (1, 1, 1), (0, 0, 0)]
    assert [b["errors_per_1000"] for b in curve] == [2.0, 2.0, 0.0]
    assert [b["learned"] for b in curve] == [500, 500, 100]


def test_stream_order():
    assert stream_order([3.0, None, 1.0, 2.0], "date").tolist() == [2, 3, 0, 1]
    assert stream_order([None] * 4, "input").tolist() == [0, 1, 2, 3]
    shuffled = stream_order([None] * 50, "shuffle", 42)
    assert shuffled.tolist() == stream_order([None] * 50, "shuffle", 42).tolist()
    assert sorted(shuffled.tolist()) == list(range(50)) and shuffled.tolist() != list(range(50))
    with pytest.raises(ConfigError):
        stream_order([None], "random")


def test_stream_by_date_header():
    def mail(day, label):
        return Message(
            f"{label}{day}",
            f"Date: Mon, {day} Jan 2024 10:00:00 +0000\nSubject: x\n\n{label} words".encode(),
            label,
        )

    messages = [mail(9, "ham"), mail(3, "spam"), mail(5, "ham")]
    stream = read_stream(messages, build_settings({}), order="date")
    assert stream.data.ids == ["spam3", "ham5", "ham9"]
    assert stream.order["by"] == "Date header"


def test_warmup_default_and_errors():
    assert warmup_size(60) == 6 and warmup_size(50_000) == 1000 and warmup_size(3) == 1
    messages = stream_messages()
    with pytest.raises(InputError, match="warm-up"):
        online([m for m in messages if m.label == "ham"][:3] + messages, "all", warmup=3)
    with pytest.raises(ConfigError, match="--warmup"):
        online(messages, "all", warmup=len(messages))
    with pytest.raises(ConfigError, match="autolearn"):
        online(messages, "autolearn", autolearn_spam=0.4)
    three = messages + [Message("x", "other words", "other")]
    with pytest.raises(InputError, match="exactly two labels"):
        online(three, "all")


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------


def test_cli_online_report(tmp_path):
    scores = tmp_path / "scores.jsonl"
    result = cli_run(
        "evaluate", SAMPLE / "train", "--online", "--warmup", "10", "--learn", "errors",
        "-f", "json", "--scores", scores, "--event-model", "multinomial",
    )  # fmt: skip
    assert result.exit_code == 0, result.output + result.stderr
    report = json.loads(result.stdout)
    assert report["protocol"]["method"] == "online"
    assert report["protocol"]["policy"] == "errors" and report["protocol"]["warmup"] == 10
    assert report["counts"]["evaluated"] == 38
    assert report["ranking"]["one_minus_roca_percent"] >= 0
    online_part = report["online"]
    assert online_part["scored"] == 38 and online_part["curve"][0]["last"] == 38
    rows = [json.loads(line) for line in scores.read_text().splitlines()]
    assert len(rows) == 38 and {r["fold"] for r in rows} == {0}
    text = cli_run("evaluate", SAMPLE / "train", "--online", "--order", "shuffle").stdout
    assert "Learning curve" in text and "errors per 1,000" in text
    assert "in a shuffled order (seed 42)" in text


def test_cli_online_misuse():
    both = cli_run("evaluate", SAMPLE / "train", "--online", "--chronological", "0.2")
    assert both.exit_code == 2 and "--online" in both.stderr
    big = cli_run("evaluate", SAMPLE / "train", "--online", "--warmup", "48")
    assert big.exit_code == 2 and big.stderr.count("\n") == 1 and "--warmup" in big.stderr
    bad = cli_run("evaluate", SAMPLE / "train", "--online", "--learn", "sometimes")
    assert bad.exit_code == 2
    ham = cli_run("evaluate", f"ham={SAMPLE / 'train' / 'ham'}", "--online")
    assert ham.exit_code == 1 and "two labels" in ham.stderr


def test_cli_online_plot(tmp_path):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "curve.svg"
    result = cli_run("evaluate", SAMPLE / "train", "--online", "--warmup", "10", "--plot", picture)
    assert result.exit_code == 0, result.stderr
    assert Path(picture).read_text().startswith("<?xml")


def test_cutoffs_are_refitted_on_the_running_scores(monkeypatch):
    import nbspam.evaluation.online as online_module
    from nbspam.models.decision import verdict

    monkeypatch.setattr(online_module, "REFIT", 50)
    messages = stream_messages(n=240, seed=5)
    w = 40
    result = online(messages, "all", warmup=w)
    warm = train(messages[:w], settings()).cutoffs
    odds, verdicts = result.scores.log_odds, result.scores.verdicts
    # before the first refit: the warm-up's cutoffs, as train fits them
    assert [verdict(s, warm, "spam", "ham") for s in odds[w : w + 50]] == list(verdicts[w : w + 50])
    # after the last: the cutoffs refitted on the scores so far, which are others
    last = (len(messages) - w - 1) // 50 * 50 + w
    refitted = result.scores.rules[0].cutoffs
    assert refitted != warm
    assert [verdict(s, refitted, "spam", "ham") for s in odds[last:]] == list(verdicts[last:])
    assert "refitted every 50 messages" in result.scores.protocol["calibration"]
