"""What the processes that read and count the mail hold while they do (docs/speed.md,
"Memory"): a chunk's documents one at a time, no per-word cache, the parent's objects
frozen in the workers."""

from __future__ import annotations

import gc
import tracemalloc

from nbspam.core.parallel import imap_ordered
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


def _freeze_count(context, work):
    return gc.get_freeze_count()


def test_the_workers_keep_the_parents_objects_frozen_and_the_parent_does_not():
    """A collection writes the header of every object it goes through, and a page so
    written after the fork is copied: the objects the parent had at the fork stay frozen
    in the workers, and are unfrozen in the parent as soon as they are forked (a frozen
    cycle there would never be collected, nor anything it holds)."""
    assert gc.get_freeze_count() == 0
    results = imap_ordered(_freeze_count, None, [(n, n) for n in range(6)], jobs=2)
    assert gc.get_freeze_count() == 0
    in_workers = [count for _, count in results]
    # (a worker frees some of them after the fork: multiprocessing's own clean-up)
    assert all(count > 1000 for count in in_workers)
    assert gc.get_freeze_count() == 0


def test_a_reader_that_fails_leaves_no_workers_and_its_garbage_collectable():
    """A reader that raises while the workers run leaves the results generator in a cycle
    with what reads it: a collection ends the workers and frees the cycle."""
    import weakref

    class Reader:
        pass

    reader = Reader()
    reader.results = imap_ordered(_freeze_count, None, [(n, n) for n in range(6)], jobs=2)
    reader.self = reader  # a cycle, as a reader holding its own chunk generator makes
    gone = weakref.ref(reader)
    next(reader.results)
    del reader
    gc.collect()
    assert gone() is None
    assert gc.get_freeze_count() == 0


def test_a_programs_own_frozen_objects_stay_frozen():
    """A program that froze its objects itself (before forking servers of its own) keeps
    them frozen: nbspam neither freezes more nor unfreezes them."""
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert len(list(imap_ordered(_freeze_count, None, [(n, n) for n in range(4)], jobs=2))) == 4
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
