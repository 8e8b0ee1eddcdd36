"""Any number of jobs gives exactly the result of one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nbspam.config import build_settings
from nbspam.evaluate import tokenize_all
from nbspam.messages import Message, Problems, read_labelled
from nbspam.model import score, train

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def messages():
    """624 distinct messages (more than two chunks, so that worker processes start)."""
    base = list(read_labelled([str(SAMPLE / "train")], Problems()))
    return [
        Message(f"{m.id}#{n}", f"X-Copy: {n}\n".encode() + m.data, m.label)
        for n in range(13)
        for m in base
    ]


def test_training_with_two_jobs_equals_one(messages):
    settings = build_settings({})
    one = train(messages, settings, jobs=1)
    two = train(messages, settings, jobs=2)
    assert one.terms == two.terms and one.labels == two.labels
    for name in ("class_count", "term_count", "doc_count", "seen_digests", "seen_labels"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name))


def test_scoring_with_two_jobs_equals_one(messages):
    model = train(messages[::7], build_settings({}))
    assert list(score(model, messages, jobs=2)) == list(score(model, messages, jobs=1))


def test_tokenizing_with_two_jobs_equals_one(messages):
    tokenizer = build_settings({}).tokenizer
    one = tokenize_all(messages, tokenizer, jobs=1)
    two = tokenize_all(messages, tokenizer, jobs=2)
    assert one.terms == two.terms and one.ids == two.ids
    assert (one.X != two.X).nnz == 0
