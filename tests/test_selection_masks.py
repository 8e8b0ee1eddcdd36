"""The column masks auto tries (stop words, word pairs left out), computed on the packed
UTF-8 of the vocabulary: the same as the rule term by term, and without decoding a term."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from nbspam.text import vocabulary
from nbspam.text.vocabulary import Terms, pair_terms, stop_terms

STOP = ("the", "of", "in", "to", "été", "日本", "a\x00", "", "of the", "x:y")

PIECES = (
    "the", "of", "in", "to", "été", "日本", "a\x00", "a", "theory", "pair", "pair:",
    "skip:", "header:", "attachment:", "url:", "nbspam:", "digits:", "subject:", "from:",
    ":", " ", "  ", "0", "12", "٣", "😀", "x:y", "é", "\x00", "pair:7", "subject:pair:",
)  # fmt: skip


def per_term_stop(terms, stop_words):
    """The rule of `stop_terms`, a term at a time."""
    stop = frozenset(stop_words)
    mask = np.zeros(len(terms), dtype=bool)
    for i, term in enumerate(terms):
        if term.startswith(vocabulary._NOT_WORDS):
            continue
        words = term.rpartition(":")[2]
        if words in stop or (" " in words and not stop.isdisjoint(words.split(" "))):
            mask[i] = True
    return mask


def per_term_pairs(terms):
    """The rule of `pair_terms`, a term at a time."""
    pair = re.compile(r"(?:^|:)pair:[0-9]+\Z").search
    return np.array([pair(t) is not None for t in terms], dtype=bool)


def generated_terms(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    terms = {"", "the", "pair:12", "subject:pair:3", "xpair:3", "pair:", "pair:1a", ":pair:0"}
    while len(terms) < n:
        terms.add("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 5))))
    return sorted(terms)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("chunk", [257, 1 << 16])  # chunks end inside the terms
def test_the_masks_equal_the_rule_term_by_term(seed, chunk, monkeypatch):
    monkeypatch.setattr(vocabulary, "_MASKED_AT_ONCE", chunk, raising=False)
    terms = generated_terms(seed, 3000)
    packed = Terms.of(terms, ordered=True)
    for words in (STOP, ("the",), ("",), ("of the",), ("é", "日本")):
        expected = per_term_stop(terms, words)
        stop_terms.cache_clear()
        assert np.array_equal(stop_terms(packed, words), expected), words
        stop_terms.cache_clear()
        assert np.array_equal(stop_terms(tuple(terms), words), expected), words
    assert per_term_stop(terms, STOP).sum() > 100  # the terms hold stop words to find
    pair_terms.cache_clear()
    assert np.array_equal(pair_terms(packed), per_term_pairs(terms))
    assert per_term_pairs(terms).sum() > 20


def test_the_masks_of_edge_terms(monkeypatch):
    monkeypatch.setattr(vocabulary, "_MASKED_AT_ONCE", 2, raising=False)
    terms = ("", ":", "pair:1", "the", "a\x00", "a", "subject:", "subject: the", "skip:the")
    stop_terms.cache_clear()
    assert stop_terms(terms, ("",)).tolist() == [
        True,
        True,
        False,
        False,
        False,
        False,
        True,
        True,
        False,
    ]
    assert stop_terms(terms, ("a\x00",)).tolist() == [False] * 4 + [True] + [False] * 4
    pair_terms.cache_clear()
    assert pair_terms(terms).tolist() == [False, False, True] + [False] * 6
    assert pair_terms(("",)).tolist() == [False]
    assert stop_terms((), ("the",)).tolist() == []


class Counted(Terms):
    """Terms that count how many of them are decoded."""

    decoded = 0

    def _term(self, i):
        Counted.decoded += 1
        return super()._term(i)

    def __iter__(self):
        Counted.decoded += len(self)
        return super().__iter__()


def test_the_masks_of_plain_stop_words_decode_no_term():
    terms = generated_terms(5, 2000)
    packed = Terms.of(terms, ordered=True)
    counted = Counted(packed.blob, packed.offsets, ordered=True)
    stop_terms.cache_clear()
    pair_terms.cache_clear()
    words = ("the", "of", "été")
    expected = per_term_stop(terms, words)
    assert np.array_equal(stop_terms(counted, words), expected)
    assert Counted.decoded == 0
    Counted.decoded = 0
    assert np.array_equal(pair_terms(counted), per_term_pairs(terms))
    assert Counted.decoded == 0


def test_the_masks_hold_a_chunk_of_the_vocabulary_at_a_time():
    import tracemalloc

    rng = random.Random(7)
    terms = sorted({f"subject:w{rng.randrange(10**9)}:the{i}" for i in range(100_000)})
    packed = Terms.of(terms, ordered=True)
    hash(packed)  # the caches' key, computed once
    assert packed.blob.nbytes > 2_500_000
    for mask in (lambda: stop_terms(packed, ("the", "of")), lambda: pair_terms(packed)):
        stop_terms.cache_clear()
        pair_terms.cache_clear()
        tracemalloc.start()
        mask()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # temporaries of a chunk of the terms, not several bytes for each byte of them all
        assert peak < 2 * packed.blob.nbytes
