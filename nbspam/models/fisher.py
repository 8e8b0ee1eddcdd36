"""Robinson–Fisher combining (docs/math.md): each word's spam probability f(w) from the document
counts, and a message's score from Fisher's chi-square tails, as logit(I) in log space.

bogofilter, SpamBayes and SpamAssassin's Bayes score mail this way. Their scores pile up at
exactly 0 and 1 in floating point; computed here as log-tails, every message keeps its own
rank, so a cutoff can sit at any false-positive rate. The functions are pure and use only
the standard library (the one-message scorer runs without numpy); `word_probabilities` takes
numpy arrays, and `fisher_log_odds_many` scores many messages at once with numpy, equal to
`fisher_log_odds` to the bit.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    import numpy as np

#: bogofilter's defaults: Robinson's strength s and background x, and the least |f - 1/2|
#: of a word that counts as a clue.
STRENGTH = 0.0178
BACKGROUND = 0.52
MIN_DEV = 0.375
#: A term of a series below 2^-53 of its largest, 1, leaves the sum (at least 1) unchanged:
#: it is less than half the spacing of floats there.
_INVISIBLE = 2.0**-53
#: The most terms `fisher_log_odds_many` holds in an array at once.
_BLOCK = 1 << 18


def word_probabilities(
    doc_count: np.ndarray,
    class_count: np.ndarray,
    *,
    positive: int,
    strength: float = STRENGTH,
    background: float = BACKGROUND,
    columns: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """f (d,): Robinson's smoothed spam probability of each word (of the ``columns`` of
    doc_count, where given), written into ``out`` where given.

    With s_a and g_a the fractions of the positive (spam) and negative (ham) messages that
    contain word a, p_a = s_a / (s_a + g_a) and n_a the number of messages containing it:
    f_a = (s x + n_a p_a) / (s + n_a), s = ``strength``, x = ``background``. doc_count (2, d)
    and class_count (2,) are per class, ``positive`` the row of the spam class. A word no
    message contains has f = x. Computed `_BLOCK` // 8 words at a time: f of a word is its
    own counts' alone, so the temporaries are a block's, not the vocabulary's, for the
    same values.
    """
    import numpy as np

    negative = 1 - positive
    d = doc_count.shape[1] if columns is None else columns.size
    f = np.empty(d) if out is None else out
    for start in range(0, d, _BLOCK // 8):
        block = slice(start, start + _BLOCK // 8)
        counts = doc_count[:, block] if columns is None else doc_count[:, columns[block]]
        with np.errstate(divide="ignore", invalid="ignore"):
            spam = counts[positive] / class_count[positive]
            ham = counts[negative] / class_count[negative]
            p = np.where(spam + ham > 0, spam / (spam + ham), background)
        n = counts.sum(axis=0)
        f[block] = (strength * background + n * p) / (strength + n)
    return f


def is_clue(f: float, min_dev: float = MIN_DEV) -> bool:
    """Whether a word of spam probability f counts: |f - 1/2| >= min_dev."""
    return abs(f - 0.5) >= min_dev


def log_chi2_sf(m: float, k: int) -> float:
    """log Q(2m, 2k): the log of the chi-square survival function at 2m with 2k degrees of
    freedom, from the finite sum of even degrees, Q = exp(-m) sum_{j<k} m^j / j!.

    Exact where Q underflows (m ~ 1000s): -m + t_j* + log sum_{j<k} e^(t_j - t_j*), with
    t_j = j ln m - ln j!. The terms rise while j < m and fall after, so the sum starts at
    the largest, j* = min(k - 1, floor(m)), at 1, and goes both ways, each term the one
    before times j / m (downwards) or m / j (upwards), until a term is below `_INVISIBLE`:
    some 10 sqrt(m) terms, not k. `fisher_log_odds_many` sums the same terms in the same
    order, so it gives the same value to the bit.
    """
    if k <= 0:
        raise ValueError("a chi-square tail needs at least one clue (k >= 1)")
    if m <= 0.0:
        return 0.0
    if m == math.inf:  # a clue of f = 0 or 1 exactly: the tail is 0 (the series never ends)
        return -math.inf
    top_j = min(k - 1, int(m))
    total, term, j = 1.0, 1.0, top_j  # term: e^(t_j - t_j*)
    while j > 0:  # downwards: t_(j-1) = t_j + ln j - ln m
        term *= j / m
        if term < _INVISIBLE:
            break
        total += term
        j -= 1
    term, j = 1.0, top_j
    while j + 1 < k:  # upwards
        j += 1
        term *= m / j
        if term < _INVISIBLE:
            break
        total += term
    return -m + (top_j * math.log(m) - math.lgamma(top_j + 1)) + math.log(total)


def log_chi2_cdf(m: float, k: int, log_q: float | None = None) -> float:
    """log (1 - Q(2m, 2k)): the log of the lower tail, -m + log sum_{j>=k} m^j / j!;
    ``log_q``, log Q(2m, 2k), where the caller has it already.

    Where Q <= 1/2 it is log1p(-Q); where Q > 1/2 (1 - Q small), m is below the median of
    the Gamma(k) distribution, itself below k, so the terms of the lower series fall from
    j = k on (each the one before times m / j): they are summed from there until a term is
    below `_INVISIBLE` of the largest.
    """
    if log_q is None:
        log_q = log_chi2_sf(m, k)
    if log_q <= -math.log(2.0):
        return math.log1p(-math.exp(log_q))
    if m <= 0.0:
        return -math.inf
    total, term, j, top = 1.0, 1.0, k, 1.0  # term: e^(t_j - t_k)
    while True:
        j += 1
        term *= m / j
        top = max(top, term)
        if j > m and term < top * _INVISIBLE:
            return -m + (k * math.log(m) - math.lgamma(k + 1)) + math.log(total)
        total += term


def fisher_log_odds(sum_log_f: float, sum_log_not_f: float, k: int) -> float:
    """logit(I) of a message from its clues: I = (1 + H - S) / 2, where
    H = Q(-2 sum ln f, 2k) and S = Q(-2 sum ln(1 - f), 2k); 0 (I = 1/2) without a clue.

    logit(I) = logaddexp(log(1 - S), log H) - logaddexp(log(1 - H), log S), every tail taken
    as a log, so it orders messages exactly as I does and never saturates. ``sum_log_f``
    and ``sum_log_not_f`` are the sums of ln f_a and ln(1 - f_a) over the k clues.
    """
    if k == 0:
        return 0.0
    ham_m, spam_m = -sum_log_f, -sum_log_not_f
    log_h, log_s = log_chi2_sf(ham_m, k), log_chi2_sf(spam_m, k)
    log_not_h, log_not_s = log_chi2_cdf(ham_m, k, log_h), log_chi2_cdf(spam_m, k, log_s)
    return _logaddexp(log_not_s, log_h) - _logaddexp(log_not_h, log_s)


def _logaddexp(a: float, b: float) -> float:
    """log(e^a + e^b), without overflow."""
    top = max(a, b)
    if top == -math.inf:
        return -math.inf
    return top + math.log1p(math.exp(-abs(a - b)))


def fisher_log_odds_many(
    sum_log_f: np.ndarray, sum_log_not_f: np.ndarray, clues: np.ndarray
) -> np.ndarray:
    """`fisher_log_odds` of many messages (arrays (n,) of the sums and clue counts), equal
    to it to the bit for each: the series of all the messages are summed side by side in
    numpy arrays, term after term in the order `log_chi2_sf` and `log_chi2_cdf` take them;
    exp, log, log1p and lgamma, which numpy computes differently from `math`, are math's
    (mapped over the values), and every other step is the same IEEE operation either way."""
    import numpy as np

    sum_log_f = np.asarray(sum_log_f, dtype=np.float64)
    sum_log_not_f = np.asarray(sum_log_not_f, dtype=np.float64)
    clues = np.asarray(clues, dtype=np.int64)
    out = np.zeros(clues.shape, dtype=np.float64)
    messages = np.flatnonzero(clues > 0)
    # _BLOCK // 16 messages at a time: a block of steps is at least 16 a message
    for start in range(0, messages.size, _BLOCK // 16):
        has = messages[start : start + _BLOCK // 16]
        k = clues[has]
        ham_m, spam_m = -sum_log_f[has], -sum_log_not_f[has]
        ln_ham, ln_spam = _ln(ham_m), _ln(spam_m)  # ln m, for both tails of each
        log_h, log_s = _log_sf_many(ham_m, k, ln_ham), _log_sf_many(spam_m, k, ln_spam)
        log_not_h = _log_cdf_many(ham_m, k, log_h, ln_ham)
        log_not_s = _log_cdf_many(spam_m, k, log_s, ln_spam)
        out[has] = _logaddexp_many(log_not_s, log_h) - _logaddexp_many(log_not_h, log_s)
    return out


def _ln(m: np.ndarray) -> np.ndarray:
    """math's ln m of each 0 < m < inf (NaN elsewhere: not read)."""
    import numpy as np

    out = np.full(m.shape, np.nan)
    rows = np.flatnonzero((m > 0.0) & (m < math.inf))
    out[rows] = _math(math.log, m[rows])
    return out


def _lgamma_of_integers(n: np.ndarray) -> np.ndarray:
    """math's lgamma of each integer n >= 1, once for each distinct value."""
    import numpy as np

    values, inverse = np.unique(n, return_inverse=True)
    return _math(math.lgamma, values)[inverse]


def _log_sf_many(m: np.ndarray, k: np.ndarray, ln_m: np.ndarray) -> np.ndarray:
    """`log_chi2_sf` of each (m, k), k >= 1, with ``ln_m`` (`_ln`)."""
    import numpy as np

    out = np.zeros(m.shape)
    out[m == math.inf] = -math.inf
    rows = np.flatnonzero((m > 0.0) & (m < math.inf))
    if rows.size:
        m, k = m[rows], k[rows]
        top_j = np.minimum(m, k - 1).astype(np.int64)  # min(k - 1, int(m))
        total = np.ones(m.shape)
        _add_terms(total, m, top_j + 1, -1, top_j)  # downwards: times j / m
        _add_terms(total, m, top_j, 1, k - 1 - top_j)  # upwards: times m / j
        top = top_j * ln_m[rows] - _lgamma_of_integers(top_j + 1)
        out[rows] = -m + top + _math(math.log, total)
    return out


def _log_cdf_many(m: np.ndarray, k: np.ndarray, log_q: np.ndarray, ln_m: np.ndarray) -> np.ndarray:
    """`log_chi2_cdf` of each (m, k) with its ``log_q`` and ``ln_m`` (`_ln`)."""
    import numpy as np

    out = np.full(m.shape, -math.inf)
    low = log_q <= -math.log(2.0)
    out[low] = _math(math.log1p, -_math(math.exp, log_q[low]))
    # Q > 1/2: m is below the median of Gamma(k), below k, and the terms fall from j = k on;
    # were m >= k, they would rise first: such a row is summed by `log_chi2_cdf`
    rows = np.flatnonzero(~low & (m > 0.0) & (m < k))
    if rows.size:
        m_, k_ = m[rows], k[rows]
        total = np.ones(m_.shape)
        _add_terms(total, m_, k_, 1, np.full(k_.shape, np.iinfo(np.int64).max))
        first = k_ * ln_m[rows] - _lgamma_of_integers(k_ + 1)
        out[rows] = -m_ + first + _math(math.log, total)
    for row in np.flatnonzero(~low & (m > 0.0) & (m >= k)):
        out[row] = log_chi2_cdf(float(m[row]), int(k[row]), float(log_q[row]))
    return out


def _add_terms(
    total: np.ndarray, m: np.ndarray, base: np.ndarray, sign: int, count: np.ndarray
) -> None:
    """Add to ``total`` (n,) the terms of falling series, s = 1 .. ``count`` (n,), one after
    the other as the scalar loops add them: term_0 = 1 and term_s = term_(s-1) * (j / m)
    for j = base + 1 - s (``sign`` -1), or * (m / j) for j = base + s (``sign`` 1).

    All the rows' series are taken side by side, a block of steps at a time (16, 32, 64,
    ... while the block holds at most `_BLOCK` terms), while some row's last term can
    still change its total: as the terms fall, none
    after one below `_INVISIBLE` can (where the loops stop), so the totals are those of the
    loops to the bit. Products and sums are `np.multiply/add.accumulate`, sequential, as
    the loops' are."""
    import numpy as np

    rows = np.flatnonzero(count > 0)
    term = np.ones(rows.size)
    done, width = 0, 16
    while rows.size:
        step = np.arange(done + 1, done + width + 1)[:, None]  # (w, 1): s
        j = base[rows] + sign * step
        terms = np.empty((width + 1, rows.size))  # the first the running sum
        ratio = terms[1:]
        np.divide(j, m[rows], out=ratio) if sign < 0 else np.divide(m[rows], j, out=ratio)
        del j
        ratio *= step <= count[rows]  # 0.0 past a row's last step (x 1.0 changes no bit)
        ratio[0] *= term
        np.multiply.accumulate(ratio, axis=0, out=ratio)
        going = ratio[-1] >= _INVISIBLE
        term = ratio[-1, going]
        terms[0] = total[rows]
        total[rows] = np.add.accumulate(terms, axis=0)[-1]
        rows = rows[going]
        done, width = done + width, max(16, min(2 * width, _BLOCK // max(rows.size, 1)))


def _logaddexp_many(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`_logaddexp` of each pair."""
    import numpy as np

    top = np.maximum(a, b)
    with np.errstate(invalid="ignore"):
        gap = -np.abs(a - b)
    out = top + _math(math.log1p, _math(math.exp, gap))
    out[top == -math.inf] = -math.inf
    return out


def _math(function, values: np.ndarray) -> np.ndarray:
    """math's ``function`` of each value (numpy's exp, log, log1p differ from it in the
    last bit for some values)."""
    import numpy as np

    return np.fromiter(map(function, values.tolist()), dtype=np.float64, count=values.size)
