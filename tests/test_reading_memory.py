"""What the processes that read and count the mail hold while they do (docs/speed.md,
"Memory"): a chunk's documents one at a time, no per-word cache, the parent's objects
frozen while its workers run, each worker's freed heap given back between chunks."""

from __future__ import annotations

import gc
import tracemalloc

from nbspam.core.settings import build_settings
from nbspam.text.counting import count_tokens
from nbspam.text.tokenizer import Tokenizer


def test_a_chunk_is_counted_one_documents_counter_at_a_time():
    """200 documents of the same 1,000 terms: every document's `Counter` held at once
    (some 50 kB each) was 10 MB; counted one at a time, the chunk holds its columns and
    counts (8 bytes a term of a document, 1.6 MB) and one `Counter`."""
    terms = [f"term{i}" for i in range(1000)]
    tracemalloc.start()
    try:
        counted = count_tokens(terms for _ in range(200))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_500_000
    assert counted.terms == terms
    assert counted.sizes.tolist() == [1000] * 200
    assert counted.cols.tolist() == list(range(1000)) * 200
    assert set(counted.counts) == {1}


def test_the_codes_of_the_pairs_words_are_not_cached():
    """A cache of the words whose pairs are hashed held 4.7 MB in each worker process after
    19,000 messages, and made them no quicker: 20,000 distinct words leave nothing behind."""
    tokenizer = Tokenizer(build_settings({"word_pairs": "all"}).tokenizer)
    tokenizer.words("warm the tokenizer up")
    text = " ".join(f"word{i}" for i in range(20_000))
    tracemalloc.start()
    try:
        tokens = tokenizer.words(text)
        assert sum(t.startswith("pair:") for t in tokens) == 19_999
        del tokens
        gc.collect()
        left, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert left < 300_000  # 20,000 cached words were 3 MB
