"""Auto's internal cross-validation on a typed table computed with less work: the same
bits as before (its log-loss as scipy's logsumexp gives it, the bins of a column found
without sorting), so that the choice and the model file stay the same."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from nbspam.fit.table_training import log_loss, logsumexp_rows
from nbspam.models import table_model
from nbspam.models.table_model import COMPARED_EDGES, Column, bin_places, number_categories


@pytest.mark.parametrize("classes", [2, 3, 7])
def test_logsumexp_of_rows_is_scipys_bit_for_bit(classes):
    rng = np.random.default_rng(classes)
    n = 20_000
    a = rng.normal(size=(n, classes)) * rng.choice([1e-9, 1.0, 40.0, 1e4, 1e300], (n, 1))
    a[::7, 1] = a[::7, 0]  # ties at the top
    a[::11] = -1e300
    a[3, 0], a[4] = np.inf, -np.inf
    a[5, 1] = np.nan
    want = logsumexp(a, axis=1)
    assert np.array_equal(logsumexp_rows(a), want, equal_nan=True)
    y = rng.integers(0, classes, n)
    ok = np.isfinite(a).all(axis=1)
    expected = float(np.mean(logsumexp(a[ok], axis=1) - a[ok][np.arange(ok.sum()), y[ok]]))
    assert log_loss(a[ok], y[ok]) == expected


@pytest.mark.parametrize(
    "kind, edges, zero_bin",
    [
        ("bernoulli", None, False),
        ("categorical", [-1.0, 0.5, 2.0], False),
        ("categorical", [-1.0, 0.5, 2.0], True),
        ("categorical", list(np.linspace(-3, 3, 99)), True),  # more bins than a pass each
        ("categorical", list(np.linspace(-3, 3, 150)), False),  # more edges than compared
    ],
)
@pytest.mark.parametrize("missing", [True, False])
def test_the_bins_of_numbers_are_found_in_order_of_first_appearance(
    monkeypatch, kind, edges, zero_bin, missing
):
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=5_000) * 2, 1)
    if missing:
        x[::13] = np.nan
    column = Column("x", kind, edges=edges, zero_bin=zero_bin)
    got = number_categories(column, x)
    monkeypatch.setattr(table_model, "FEW_BINS", -1)  # every column by numpy's unique
    assert number_categories(column, x)[0] == got[0]
    assert number_categories(column, x)[1].tolist() == got[1].tolist()
    # and as each value's bin is named, in order of first appearance
    seen: dict[str, int] = {}
    for v in x.tolist():
        if v == v:
            b = (
                "z"
                if zero_bin and v == 0
                else str(int(np.searchsorted(edges, v, "right")))
                if edges
                else str(int(v > 0))
            )
            seen.setdefault(b, len(seen))
    assert got[0] == list(seen)


def test_logsumexp_of_rows_of_two_and_of_three_is_scipys_to_the_bit():
    """auto's log-losses: rows of two columns are summed column by column, in place (a tenth
    of the time of numpy's reductions over rows of two), with scipy's bits, ties,
    infinities and overflow included."""
    rng = np.random.default_rng(1)
    a = rng.normal(scale=50, size=(5_000, 3))
    a[::7, 1] = a[::7, 0]  # ties
    a[::11, 0] = -np.inf
    a[::13] = -np.inf  # a row of nothing
    a[::17, 1] = np.inf
    a[::19, 0] = 700 + rng.random(a[::19, 0].shape)  # exp overflows
    for columns in (a[:, :2], a):
        expected = logsumexp(columns, axis=1)
        assert logsumexp_rows(columns).tobytes() == expected.tobytes()


@pytest.mark.parametrize("edges", [1, 3, 4, COMPARED_EDGES, COMPARED_EDGES + 1])
def test_a_numbers_bin_is_where_a_binary_search_puts_it(edges):
    """Counting the edges at most each number gives numpy's binary search (side "right"),
    for numbers on the edges, signed zeros and infinities; NaN, left out by the callers,
    is in bin 0."""
    rng = np.random.default_rng(edges)
    cuts = sorted(set(np.round(rng.normal(size=3 * edges) * 2, 3).tolist()) | {0.0})[:edges]
    assert len(cuts) == edges
    x = np.concatenate(
        [np.round(rng.normal(size=20_000) * 2, 1), cuts, [-0.0, 0.0, np.inf, -np.inf, np.nan]]
    )
    got = bin_places(x, cuts)
    ok = ~np.isnan(x)
    assert got.dtype == np.int64
    assert np.array_equal(got[ok], np.searchsorted(np.array(cuts), x[ok], side="right"))
    assert (got[~ok] == 0).all() or len(cuts) > COMPARED_EDGES
