"""learn, forget and merge are exact: they give the model trained on the resulting messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbspam.core.settings import build_settings
from nbspam.errors import NbspamError
from nbspam.mail.message import Message, Problems
from nbspam.mail.messages import read_labelled
from nbspam.models.model import fit_messages, score
from nbspam.service.update import forget, learn, merge
from tests.helpers import assert_same_model

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
SETTINGS = build_settings({})


@pytest.fixture(scope="module")
def messages(sample_messages):
    return sample_messages


def same_model(a, b):
    """The same model, and it scores as the same model."""
    assert_same_model(a, b)
    new = list(read_labelled([str(SAMPLE / "train")], Problems()))[:5]
    pa = [p.log_odds for p in score(a, new)]
    pb = [p.log_odds for p in score(b, new)]
    assert pa == pb


def split(messages):
    return messages[::2], messages[1::2]


def test_train_then_learn_equals_training_at_once(messages):
    a, b = split(messages)
    model = fit_messages(a, SETTINGS)
    for label in ("ham", "spam"):
        model, change = learn(model, [m for m in b if m.label == label], label)
        assert change.learned == sum(m.label == label for m in b)
    same_model(model, fit_messages(messages, SETTINGS))


def test_learn_then_forget_gives_back_the_model(messages):
    a, b = split(messages)
    base = fit_messages(a, SETTINGS)
    grown, _ = learn(base, [m for m in b if m.label == "spam"], "spam")
    assert len(grown.terms) > len(base.terms)
    back, change = forget(grown, [m for m in b if m.label == "spam"])
    assert change.forgotten == sum(m.label == "spam" for m in b)
    same_model(back, base)


def test_learning_twice_is_a_no_op_and_relabelling_moves_counts(messages):
    model = fit_messages(messages, SETTINGS)
    again, change = learn(model, [m for m in messages if m.label == "spam"], "spam")
    assert change.learned == 0 and change.unchanged == 24
    same_model(again, model)
    victim = next(m for m in messages if m.label == "ham")
    moved, change = learn(model, [victim], "spam")
    assert change.relabelled == 1
    relabelled = [Message(m.id, m.data, "spam" if m is victim else m.label) for m in messages]
    same_model(moved, fit_messages(relabelled, SETTINGS))


def test_forget_unknown_message_is_reported(messages):
    model = fit_messages(messages[::5], SETTINGS)
    same, change = forget(model, [Message("x.eml", b"Subject: never seen\n\nhello")])
    assert change.unknown == ["x.eml"] and change.forgotten == 0
    same_model(same, model)


def test_duplicates_in_training_are_counted_once(messages):
    once = fit_messages(messages, SETTINGS)
    twice = fit_messages(messages + messages[:3], SETTINGS)
    assert twice.info["duplicates"] == 3
    same_model(twice, once)


def test_merge_of_disjoint_shards_equals_training_on_all(messages):
    a, b = split(messages)
    merged = merge([fit_messages(a, SETTINGS), fit_messages(b, SETTINGS)])
    same_model(merged, fit_messages(messages, SETTINGS))


def test_merge_refuses_other_settings_and_shared_messages(messages):
    a, b = split(messages)
    other = fit_messages(b, build_settings({"alpha": 1.0}))
    with pytest.raises(NbspamError, match="different settings: alpha is 0.1 in one and 1.0"):
        merge([fit_messages(a, SETTINGS), other])
    with pytest.raises(NbspamError, match="learned the same message"):
        merge([fit_messages(a, SETTINGS), fit_messages(a[:3] + b, SETTINGS)])


@pytest.mark.parametrize("values", [{"binary": False}, {"complement_norm": True}])
def test_learn_forget_and_merge_of_complement_models_are_exact(messages, values):
    settings = build_settings({"event_model": "complement", **values})
    a, b = split(messages)
    spam = [m for m in b if m.label == "spam"]
    base = fit_messages(a, settings)
    grown, _ = learn(base, spam, "spam")
    same_model(grown, fit_messages(a + spam, settings))
    back, _ = forget(grown, spam)
    same_model(back, base)
    merged = merge([base, fit_messages(b, settings)])
    same_model(merged, fit_messages(messages, settings))


def test_merge_of_parts_trained_with_the_defaults_takes_the_largest_parts_choice(messages):
    """auto may choose another event model for each part: the counts still add up, and the
    merged model is the union's model with the settings and decision rule of the largest
    part."""
    import dataclasses

    from nbspam.fit.training import train

    large, small = [m for i, m in enumerate(messages) if i % 3], messages[::3]
    a, b = train(large, SETTINGS), train(small, SETTINGS)
    assert "auto" in a.info and a.cutoffs is not None
    # what auto may choose on another part (the defaults gave 'complement' on one shard and
    # 'multinomial' on another)
    other = "complement" if a.training.event_model != "complement" else "multinomial"
    b = dataclasses.replace(b, training=b.training.replace(event_model=other))
    for parts in ([a, b], [b, a]):
        merged = merge(parts)
        assert merged.training == a.training
        assert (merged.cutoffs, merged.calibration) == (a.cutoffs, a.calibration)
        assert "the merged model takes the settings" in merged.info["auto"]["merged"]
        union = fit_messages(messages, SETTINGS.replace(training=a.training))
        same_model(merged, union)


def test_merge_refuses_a_part_whose_event_model_was_given(messages):
    from nbspam.fit.training import train

    a, b = split(messages)
    given = build_settings({"event_model": "bernoulli"})
    with pytest.raises(NbspamError, match="different settings: event_model is"):
        merge([train(a, SETTINGS), fit_messages(b, given)])
