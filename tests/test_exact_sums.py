"""The Gaussian statistics in bulk (`columns.exact_sums`) equal adding `columns.exact` of
each value one by one, whatever the floats: subnormals, ±1e150, negative zero, exponents
far apart, many values of one exponent."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbspam.models import columns as col
from nbspam.text.tables import Table

AWKWARD = st.one_of(
    st.floats(-col.MAX_VALUE, col.MAX_VALUE, allow_nan=False, allow_subnormal=True),
    st.sampled_from(
        [
            0.0,
            -0.0,
            5e-324,
            -5e-324,
            2.2250738585072014e-308,
            1e150,
            -1e150,
            1.0,
            -1.0,
            0.1,
            2.0**52 + 1,
            1e-300,
            (2 - 2.0**-52) * 2.0**400,
        ]
    ),
)


def one_by_one(values, groups, k):
    n, s1, s2 = [0] * k, [0] * k, [0] * k
    for x, g in zip(values, groups):
        m = col.exact(x)
        n[g], s1[g], s2[g] = n[g] + 1, s1[g] + m, s2[g] + m * m
    return n, s1, s2


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(AWKWARD, st.integers(0, 2)), max_size=60))
def test_bulk_sums_equal_the_sums_value_by_value(pairs):
    values = [x for x, _ in pairs]
    groups = [g for _, g in pairs]
    bulk = col.exact_sums(np.array(values, dtype=np.float64), np.array(groups, dtype=np.int64), 3)
    assert bulk == one_by_one(values, groups, 3)


def test_many_values_of_the_largest_mantissa_do_not_overflow():
    # 2^53 - 1 times one power of two: every limb and limb product at its largest
    x = np.full(100_000, (2 - 2.0**-52) * 2.0**100)
    x[::2] *= -1
    x[1::4] = 1e150
    g = np.arange(len(x)) % 2
    assert col.exact_sums(x, g, 2) == one_by_one(x.tolist(), g.tolist(), 2)


def test_gaussian_of_is_learning_each_value():
    rng = np.random.default_rng(3)
    x = rng.normal(size=1000) * 10.0 ** rng.integers(-300, 150, 1000)
    y = rng.integers(0, 2, 1000)
    one = col.Gaussian.empty(2)
    for v, c in zip(x.tolist(), y.tolist()):
        one.add(c, v)
    assert col.Gaussian.of(x, y, 2) == one


# --------------------------------------------------------------------------------------------
# The folds' statistics shared by auto's candidates: each fold's model is that fitted on the
# other folds, exactly
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kinds, bins",
    [
        ({"size": "gaussian"}, None),
        ({"size": "binned", "flag": "bernoulli"}, None),
        ({"size": "gaussian"}, 3),
        ({"size": "bernoulli", "flag": "categorical"}, None),
    ],
)
def test_each_folds_model_is_the_model_of_the_other_folds(kinds, bins):
    from nbspam.fit.table_training import FoldStatistics, stratified_folds_of
    from nbspam.models.table_model import TableSettings, fit_table, subset
    from tests.test_tables import mixed_table

    table = mixed_table(n=120)
    table.rows[3][-1] = ""  # a row without a label: in no fold, in every fold's bin edges
    table.rows[5][1] = "purple"  # a category of one row: gone from the model of 4 folds
    table.rows[8][0] = "0.0"
    table = Table(table.names, table.rows, table.ids)
    settings = TableSettings(kinds=kinds, bins=bins)
    y = np.array(table.column("label"), dtype=object)
    fold = stratified_folds_of(y)
    shared = FoldStatistics(table, fold)
    for k in range(5):
        got = shared.model(settings, k, "t")
        want = fit_table(subset(table, np.flatnonzero(fold != k)), settings, "t")
        assert got.class_count == want.class_count
        for a, b in zip(got.columns, want.columns):
            assert (a.name, a.kind, a.edges, a.zero_bin) == (b.name, b.kind, b.edges, b.zero_bin)
            if a.kind == "gaussian":
                assert a.stats == b.stats
            elif a.kind in ("categorical", "bernoulli"):
                assert sorted(zip(a.stats.categories, zip(*a.stats.counts))) == sorted(
                    zip(b.stats.categories, zip(*b.stats.counts))
                )
            elif a.kind == "text":
                assert a.stats == b.stats
        test = subset(table, np.flatnonzero(fold == k))
        assert (got.joint_log_likelihood(test) == want.joint_log_likelihood(test)).all()
