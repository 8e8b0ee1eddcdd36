"""A generated corpus of distinct labelled messages with a realistic vocabulary growth,
for docs/scale.md: ``python bench/gencorpus.py OUT N [--seed S] [--spread K]``.

Writes ``OUT/spam/*.mbox`` and ``OUT/ham/*.mbox`` (mboxes of at most 100,000 messages
each), N messages in all, a third of them spam. Every message is distinct (its Message-ID
and Date differ) and its words are drawn from a Zipf law of exponent 1 / beta, which gives
Heaps' law V(n) ~ K * n^beta for the number of distinct words after n messages; beta is
0.69, the fit of `bench/heaps.py` on the SpamAssassin corpus. With ``--fixed R`` only the
first R ranks are drawn, and the sender and subject are one of R a class (by the message's
number modulo R; no Date or Message-ID): a vocabulary that stops growing, to see what grows
with the messages alone (``--fixed 50``: about 16,000 terms at 10^4 messages as at 10^6). Each Zipf rank stands for
``--spread`` words (drawn uniformly among them), which scales K without changing beta:
the default makes the tokenizer's terms grow as the real corpus's do (check with
``python bench/heaps.py OUT``). Spam and ham draw from the same law over two different
word lists for a fifth of their words, so that they can be told apart.

The same seed gives the same messages: the first n of a corpus of N are those of a corpus
of n, so 10^4, 10^5 and 10^6 are prefixes of one stream.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

BETA = 0.69
LETTERS = np.frombuffer(b"etaoinshrdlcumwfgypbvkjxqz", np.uint8)
PER_MBOX = 100_000


def words(ranks: np.ndarray) -> list[str]:
    """A word for each rank: 3 to 10 letters, a fixed function of the rank."""
    x = ranks.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(29)
    length = 3 + (x % np.uint64(8)).astype(np.int64)
    out = np.zeros((ranks.size, 10), np.uint8)
    y = x >> np.uint64(3)
    for i in range(10):
        out[:, i] = LETTERS[(y % np.uint64(26)).astype(np.int64)]
        y = y // np.uint64(26) + np.uint64(i * 7919)
    out[np.arange(10)[None, :] >= length[:, None]] = 0
    return [w.decode() for w in out.view("S10").ravel()]


def message(rng: np.random.Generator, n: int, spam: bool, spread: int, fixed: int) -> bytes:
    size = int(rng.lognormal(5.0, 0.6)) + 5  # words in the body: about 180 on average
    ranks = rng.zipf(1 / BETA, size + 6)
    if fixed:  # a fixed vocabulary: ranks past it drawn again among the first
        ranks = np.where(ranks > fixed, rng.integers(1, fixed + 1, ranks.size), ranks)
    ranks = (ranks - 1) * spread + rng.integers(0, spread, ranks.size)
    own = rng.random(ranks.size) < 0.2  # a fifth of the words from the class's own list
    ranks = np.where(own, ranks * 2 + (1 if spam else 0) + 10**12, ranks)
    w = words(ranks)
    subject, body = " ".join(w[:6]), w[6:]
    lines = [" ".join(body[i : i + 12]) for i in range(0, len(body), 12)]
    if fixed:  # headers of FIXED kinds: see _fixed_head
        head = _fixed_head(n % fixed, fixed, spam, spread)
    else:
        sender = f"{w[-1]}{n % 997}@{w[-2]}.{'com' if n % 3 else 'net'}"
        head = (
            f"From: {sender}\nTo: user{n % 5000}@example.org\nSubject: {subject}\n"
            f"Date: {_date(n)}\nMessage-ID: <{n}.{n * 7919 % 1000003}@gen.example>\n"
        )
    return (head + "\n" + "\n".join(lines) + "\n").encode()


def _fixed_head(kind: int, fixed: int, spam: bool, spread: int) -> str:
    """The headers of a message of a fixed vocabulary: one of ``--fixed`` senders and
    subjects a class, by the message's number modulo ``--fixed``. nbspam counts the
    subject's pairs of words (hashed into a million values) and each sender's address: drawn
    per message, they would keep the vocabulary growing for millions of messages."""
    rng = np.random.default_rng([kind, int(spam)])
    ranks = (rng.integers(1, fixed + 1, 6) - 1) * spread + rng.integers(0, spread, 6)
    w = words(ranks * 2 + (1 if spam else 0) + 10**12)
    return f"From: {w[0]}{kind}@example.com\nTo: user@example.org\nSubject: {' '.join(w)}\n"


def _date(n: int) -> str:
    day, second = divmod(n, 86_400)
    return f"{1 + day % 28:02d} Jan 2026 {second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d} +0000"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("n", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spread", type=int, default=100)
    parser.add_argument(
        "--fixed", type=int, default=0, help="a fixed vocabulary: the first FIXED Zipf ranks only"
    )
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    files: dict[str, tuple[int, object]] = {}
    counts = {"spam": 0, "ham": 0}
    try:
        for n in range(args.n):
            label = "spam" if n % 3 == 0 else "ham"
            index = counts[label] // PER_MBOX
            if files.get(label, (None,))[0] != index:
                if label in files:
                    files[label][1].close()
                os.makedirs(os.path.join(args.out, label), exist_ok=True)
                path = os.path.join(args.out, label, f"{index:04d}.mbox")
                files[label] = (index, open(path, "wb"))
            f = files[label][1]
            f.write(b"From gen@example.org Thu Jan  1 00:00:00 2026\n")
            f.write(
                message(rng, n, label == "spam", args.spread, args.fixed).replace(
                    b"\nFrom ", b"\n>From "
                )
            )
            f.write(b"\n")
            counts[label] += 1
    finally:
        for _, f in files.values():
            f.close()
    print(f"{args.n:,} messages in {args.out}: {counts['spam']:,} spam, {counts['ham']:,} ham")


if __name__ == "__main__":
    main()
