"""Naive Bayes on the columns of a table: the statistics each column type keeps per class,
and the log-likelihood each gives (docs/math.md, "Categorical features" and "Gaussian features").

Every statistic is exact, so that adding rows and taking them away again (learn, forget,
merge) gives back the same statistic bit for bit:

- categorical (and Bernoulli, the categorical of the two values 0 and 1): counts N_jc of the
  rows of class c whose value is category j;
- Gaussian: per class the count n_c and the exact sums S1 = sum x * 2^1074 and
  S2 = sum x^2 * 2^2148 as Python integers. Every float64 is a whole multiple of 2^-1074, so
  both sums are whole numbers, and subtracting the rows added gives back the same sums. The
  sums of many values are computed in bulk (`exact_sums`), equal to adding them one by one;
  the mean and variance are exact quotients of these integers, rounded once to float64.

The functions are pure; shapes are given as (C,) per class, (C, K) per class and category.
A missing cell (an empty one) adds to no statistic and counts for no class when scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SCALE = 1074
"""x * 2^SCALE is a whole number for every finite float64 x."""

VAR_SMOOTHING = 1e-9
"""The variance floor, as scikit-learn's GaussianNB: this times the largest variance of any
Gaussian column (over all the rows) is added to every class variance."""

MAX_VALUE = 1e150
"""The largest magnitude a Gaussian value may have. Training refuses a value beyond it (the
statistics are kept for good, so none is changed silently); scoring takes one as the
nearest end of the range. Within it every square, mean and variance is a finite float64
(at most 1e300), so no score can be NaN."""

MIN_VARIANCE = 2.2250738585072014e-308
"""The least variance a class may have (the smallest normal float64): where every Gaussian
column is constant, the floor above is 0, and log 0 and 0/0 would give no score."""

MIN_LOG_LIKELIHOOD = -1e300
"""The least log-likelihood one cell adds: a value so far from a class that its log density
is not a float64 (below -1.8e308) is counted as this, so that sums stay finite."""


def exact(x: float) -> int:
    """x * 2^1074 as an integer (exact for any finite float64)."""
    num, den = float(x).as_integer_ratio()
    return num * ((1 << SCALE) // den)


LIMB = 18
"""The bits of each of the three limbs a 53-bit mantissa is cut into: a product of two limbs
has at most 36 bits, so int64 sums of up to 2^25 such products (`CHUNK`) cannot overflow."""

CHUNK = 1 << 24
SMALL = 64
"""Up to this many values, `exact_sums` adds them one by one."""


def exact_sums(
    x: np.ndarray, group: np.ndarray, groups: int
) -> tuple[list[int], list[int], list[int]]:
    """(n, S1, S2) per group (each a list of ``groups``): the count of the values x of each
    group (a finite float64 each; ``group`` its group, 0 <= group < groups) and the exact sums
    of x * 2^1074 and x^2 * 2^2148, equal to adding `exact` of each value one by one.

    In bulk: each float is ±m * 2^e exactly, m its 53-bit integer mantissa and e >= 0 (its
    exponent as a multiple of 2^-1074); m is cut into three 18-bit limbs, whose sums (and
    those of their products, for m^2) are int64 sums per group and exponent that cannot
    overflow; only these few sums become Python integers."""
    n = np.bincount(group, minlength=groups).tolist()
    s1, s2 = [0] * groups, [0] * groups
    if len(x) <= SMALL:  # fewer values than numpy's calls cost
        for v, g in zip(x.tolist(), group.tolist()):
            m = exact(v)
            s1[g] += m
            s2[g] += m * m
        return n, s1, s2
    for start in range(0, len(x), CHUNK):
        _add_sums(x[start : start + CHUNK], group[start : start + CHUNK], s1, s2)
    return n, s1, s2


def _add_sums(x: np.ndarray, group: np.ndarray, s1: list[int], s2: list[int]) -> None:
    bits = np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)
    biased = ((bits >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    mantissa = (bits & np.uint64((1 << 52) - 1)).astype(np.int64) | (
        (biased > 0).astype(np.int64) << 52
    )
    shift = np.maximum(biased - 1, 0)  # |x| * 2^1074 = mantissa << shift
    sign = np.where(bits >> np.uint64(63), -1, 1)
    key = np.asarray(group, dtype=np.int64) * 2048 + shift
    present = np.flatnonzero(np.bincount(key))  # the (group, exponent) pairs, in order
    place = np.zeros(int(present[-1]) + 1 if len(present) else 0, dtype=np.int64)
    place[present] = np.arange(len(present))
    where = place[key]
    mask = (1 << LIMB) - 1
    a, b, c = mantissa >> (2 * LIMB), (mantissa >> LIMB) & mask, mantissa & mask

    def total(v: np.ndarray) -> list[int]:
        out = np.zeros(len(present), dtype=np.int64)
        np.add.at(out, where, v)  # int64 sums, in any order the same
        return out.tolist()

    # S1: the signed limbs; S2: m^2 = a^2 2^72 + 2ab 2^54 + (b^2 + 2ac) 2^36 + 2bc 2^18 + c^2
    sa, sb, sc = total(sign * a), total(sign * b), total(sign * c)
    d4, d3, d2, d1, d0 = (
        total(a * a),
        total(a * b),
        total(b * b + 2 * a * c),
        total(b * c),
        total(c * c),
    )
    for i, k in enumerate(present.tolist()):
        g, e = divmod(k, 2048)
        s1[g] += ((sa[i] << 36) + (sb[i] << 18) + sc[i]) << e
        s2[g] += ((d4[i] << 72) + (d3[i] << 55) + (d2[i] << 36) + (d1[i] << 19) + d0[i]) << (2 * e)


@dataclass
class Gaussian:
    """A numeric column: per class the count n (C,) and the exact sums s1, s2 (C,) of
    x * 2^1074 and x^2 * 2^2148 (Python integers)."""

    n: list[int]
    s1: list[int]
    s2: list[int]

    @classmethod
    def empty(cls, classes: int) -> Gaussian:
        return cls([0] * classes, [0] * classes, [0] * classes)

    def add(self, c: int, x: float, sign: int = 1) -> None:
        """Add (sign 1) or take away (sign -1) one value x of class c."""
        m = exact(x)
        self.n[c] += sign
        self.s1[c] += sign * m
        self.s2[c] += sign * m * m

    @classmethod
    def of(cls, x: np.ndarray, y: np.ndarray, classes: int) -> Gaussian:
        """The statistics of values x (finite) of classes y (0 <= y < classes), in bulk."""
        return cls(*exact_sums(x, y, classes))

    def combine(self, other: Gaussian, sign: int = 1) -> Gaussian:
        return Gaussian(
            [a + sign * b for a, b in zip(self.n, other.n)],
            [a + sign * b for a, b in zip(self.s1, other.s1)],
            [a + sign * b for a, b in zip(self.s2, other.s2)],
        )

    def mean_var(self) -> tuple[np.ndarray, np.ndarray]:
        """(mu (C,), sigma2 (C,)): mu_c = S1 / (n_c 2^1074) and the MLE variance
        (n S2 - S1^2) / (n^2 2^2148), each an exact fraction rounded once. A class with no
        value in the column takes the mean and variance of all the rows (so the column
        tells nothing of it); a column with no value at all, 0 and 0."""
        pooled = _mean_var(sum(self.n), sum(self.s1), sum(self.s2)) if 0 in self.n else (0, 0)
        found = [
            _mean_var(n, s1, s2) if n > 0 else pooled for n, s1, s2 in zip(self.n, self.s1, self.s2)
        ]
        return np.array([m for m, _ in found], float), np.array([v for _, v in found], float)

    def total_var(self) -> float:
        """The MLE variance of the column over all the rows of every class (exact, rounded)."""
        return _mean_var(sum(self.n), sum(self.s1), sum(self.s2))[1]

    def consistent(self) -> bool:
        """Whether the sums are those of values within ±`MAX_VALUE`: none where n is 0, the
        mean within the range, the variance >= 0 and at most the range's square. (A model
        file made by hand, or rows forgotten that were never learned, may break this.)"""
        top, top2 = exact(MAX_VALUE), exact(MAX_VALUE) ** 2
        return all(
            n >= 0 and abs(s1) <= n * top and 0 <= s2 <= n * top2 and n * s2 >= s1 * s1
            for n, s1, s2 in zip(self.n, self.s1, self.s2)
        )


def _mean_var(n: int, s1: int, s2: int) -> tuple[float, float]:
    if n <= 0:
        return 0.0, 0.0
    # a quotient of Python integers is correctly rounded, as float(Fraction(a, b)) is
    return s1 / (n << SCALE), (n * s2 - s1 * s1) / ((n * n) << (2 * SCALE))


def gaussian_log_likelihood(x: np.ndarray, mu: np.ndarray, var: np.ndarray) -> np.ndarray:
    """log P(x | c) (n, C) of values x (n,) under N(mu_c, var_c), mu and var (C,):
    -0.5 log(2 pi var_c) - (x - mu_c)^2 / (2 var_c); 0 where x is NaN (missing). Always
    finite: x is clipped to ±`MAX_VALUE`, var_c is at least `MIN_VARIANCE`, and the result
    at least `MIN_LOG_LIKELIHOOD`."""
    missing = np.isnan(x)[:, None]
    x = np.clip(x, -MAX_VALUE, MAX_VALUE)
    var = np.maximum(var, MIN_VARIANCE)
    with np.errstate(over="ignore"):
        out = (
            -0.5 * np.log(2.0 * np.pi * var)[None, :] - 0.5 * (x[:, None] - mu[None, :]) ** 2 / var
        )
    return np.where(missing, 0.0, np.maximum(out, MIN_LOG_LIKELIHOOD))


@dataclass
class Categorical:
    """A categorical column: its categories (K,) in order of first appearance, and the
    counts N_jc per class as lists (C lists of K)."""

    categories: list[str]
    counts: list[list[int]]
    fixed: bool = False
    """True for a Bernoulli column: the categories are exactly '0' and '1'."""
    index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.index = {cat: j for j, cat in enumerate(self.categories)}

    @classmethod
    def empty(cls, classes: int, categories: list[str] | None = None) -> Categorical:
        cats = list(categories or [])
        return cls(cats, [[0] * len(cats) for _ in range(classes)], fixed=categories is not None)

    def add(self, c: int, value: str, sign: int = 1) -> None:
        j = self.index.get(value)
        if j is None:
            if sign < 0 or self.fixed:
                raise ValueError(f"category {value!r} was never added")
            j = self.index[value] = len(self.categories)
            self.categories.append(value)
            for row in self.counts:
                row.append(0)
        self.counts[c][j] += sign

    def combine(self, other: Categorical, sign: int = 1) -> Categorical:
        out = Categorical(list(self.categories), [list(r) for r in self.counts], self.fixed)
        for j, cat in enumerate(other.categories):
            for c, row in enumerate(other.counts):
                if row[j]:
                    out.add(c, cat, sign * row[j])
        return out

    def matrix(self) -> np.ndarray:
        return np.array(self.counts, dtype=np.float64).reshape(len(self.counts), -1)


def categorical_log_prob(counts: np.ndarray, alpha: float) -> np.ndarray:
    """log theta_jc (C, K) from counts N_jc (C, K): (N_jc + alpha) / (N_c + alpha K), N_c the
    class's rows with a value in this column (as scikit-learn's CategoricalNB)."""
    k, alpha = counts.shape[1], max(alpha, 1e-10)  # alpha 0: floored, as scikit-learn does
    return np.log(counts + alpha) - np.log(counts.sum(axis=1, keepdims=True) + alpha * k)
