"""Vocabulary growth with the number of messages (Heaps' law), for docs/scale.md.

Usage: ``python bench/heaps.py CORPUS`` (a folder with one subfolder per label). The
messages are taken in a fixed random order (seed 0: a corpus is usually in label order)
and tokenized with the default settings; the number of distinct terms is printed after
250, 500, 1,000, ... messages and at the end, with the fit V(n) = K * n^beta of log V on
log n.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from nbspam.core.settings import build_settings
from nbspam.mail.message import Problems
from nbspam.mail.messages import read_labelled
from nbspam.text.counting import LabelledChunks

MARKS = {250, 500, 1000, 2000, 3000, 4000, 5000, 10_000, 20_000, 50_000}


def main(corpus: str) -> None:
    settings = build_settings({})
    messages = list(read_labelled([corpus], Problems()))
    order = np.random.default_rng(0).permutation(len(messages))
    messages = [messages[i] for i in order]
    seen: set[str] = set()
    n, points = 0, []
    for _, counted in LabelledChunks(messages, settings.tokenizer, jobs=2):
        start = 0
        for size in counted.sizes:
            seen.update(counted.terms[j] for j in counted.cols[start : start + size])
            start += size
            n += 1
            if n in MARKS:
                points.append((n, len(seen)))
    if not points or points[-1][0] != n:
        points.append((n, len(seen)))
    for messages_seen, terms in points:
        print(f"{messages_seen:>8,} messages  {terms:>10,} terms")
    beta, log_k = np.polyfit(np.log([p[0] for p in points]), np.log([p[1] for p in points]), 1)
    print(f"V(n) = {math.exp(log_k):.1f} * n^{beta:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
