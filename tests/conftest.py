"""Shared fixtures: the public corpora beside the checkout (skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"


def corpus(name: str) -> Path:
    """The folder of a public corpus, or skip the test with the reason."""
    path = CORPORA / name
    if not path.is_dir():
        pytest.skip(
            f"corpus {name} not found at {path} (the public corpora sit beside the checkout)"
        )
    return path


@pytest.fixture(scope="session")
def spamassassin() -> Path:
    return corpus("spamassassin")


@pytest.fixture(scope="session")
def sms() -> Path:
    return corpus("sms-spam-collection")


@pytest.fixture(scope="session")
def spamassassin_matrix(spamassassin):
    """(X, y, terms): the whole SpamAssassin corpus tokenized with the default settings."""
    from nbspam.config import build_settings
    from nbspam.features import Analyzer
    from nbspam.vocabulary import TermIndex, count_rows, sorted_order

    paths = sorted(p for p in spamassassin.glob("*/*") if p.parent.name in ("ham", "spam"))
    analyzer = Analyzer(build_settings({}).tokenizer)
    index = TermIndex()
    X = count_rows((analyzer.tokens(p.read_bytes()) for p in paths), index)
    order = sorted_order(index.terms)
    return X[:, order].tocsr(), [p.parent.name for p in paths], [index.terms[i] for i in order]
