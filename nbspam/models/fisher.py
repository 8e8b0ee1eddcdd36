"""Robinson–Fisher combining (docs/math.md): each word's spam probability f(w) from the document
counts, and a message's score from Fisher's chi-square tails, as logit(I) in log space.

bogofilter, SpamBayes and SpamAssassin's Bayes score mail this way. Their scores pile up at
exactly 0 and 1 in floating point; computed here as log-tails, every message keeps its own
rank, so a cutoff can sit at any false-positive rate. The functions are pure and use only
the standard library (the one-message scorer runs without numpy); `word_probabilities` takes
numpy arrays.
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
#: Terms of a series below the largest by this much (in log) no longer change a float64 sum.
_NEGLIGIBLE = 50.0


def word_probabilities(
    doc_count: np.ndarray,
    class_count: np.ndarray,
    *,
    positive: int,
    strength: float = STRENGTH,
    background: float = BACKGROUND,
) -> np.ndarray:
    """f (d,): Robinson's smoothed spam probability of each word.

    With s_a and g_a the fractions of the positive (spam) and negative (ham) messages that
    contain word a, p_a = s_a / (s_a + g_a) and n_a the number of messages containing it:
    f_a = (s x + n_a p_a) / (s + n_a), s = ``strength``, x = ``background``. doc_count (2, d)
    and class_count (2,) are per class, ``positive`` the row of the spam class. A word no
    message contains has f = x.
    """
    import numpy as np

    negative = 1 - positive
    with np.errstate(divide="ignore", invalid="ignore"):
        spam = doc_count[positive] / class_count[positive]
        ham = doc_count[negative] / class_count[negative]
        p = np.where(spam + ham > 0, spam / (spam + ham), background)
    n = doc_count.sum(axis=0)
    return (strength * background + n * p) / (strength + n)


def is_clue(f: float, min_dev: float = MIN_DEV) -> bool:
    """Whether a word of spam probability f counts: |f - 1/2| >= min_dev."""
    return abs(f - 0.5) >= min_dev


def log_chi2_sf(m: float, k: int) -> float:
    """log Q(2m, 2k): the log of the chi-square survival function at 2m with 2k degrees of
    freedom, from the finite sum of even degrees, Q = exp(-m) sum_{j<k} m^j / j!.

    Exact where Q underflows (m ~ 1000s): -m + logsumexp_{j<k}(j ln m - ln j!). The terms
    t_j = j ln m - ln j! rise while j < m and fall after, so the sum starts at the largest,
    j* = min(k - 1, floor(m)), and goes both ways (t_{j+1} = t_j + ln m - ln(j + 1)) until
    the terms are too small to change a float64 sum: some 10 sqrt(m) terms, not k.
    """
    if k <= 0:
        raise ValueError("a chi-square tail needs at least one clue (k >= 1)")
    if m <= 0.0:
        return 0.0
    log_m = math.log(m)
    top_j = min(k - 1, int(m))
    logs = _logs(max(k, top_j + 1))
    top = top_j * log_m - math.lgamma(top_j + 1)
    exp = math.exp
    total, term, j = 1.0, 0.0, top_j  # term: t_j - t_j*
    while j > 0:  # downwards: t_{j-1} = t_j - ln m + ln j
        term += logs[j] - log_m
        if term < -_NEGLIGIBLE:
            break
        total += exp(term)
        j -= 1
    term, j = 0.0, top_j
    while j + 1 < k:  # upwards
        j += 1
        term += log_m - logs[j]
        if term < -_NEGLIGIBLE:
            break
        total += exp(term)
    return -m + top + math.log(total)


def log_chi2_cdf(m: float, k: int, log_q: float | None = None) -> float:
    """log (1 - Q(2m, 2k)): the log of the lower tail, -m + log sum_{j>=k} m^j / j!;
    ``log_q``, log Q(2m, 2k), where the caller has it already.

    Where Q <= 1/2 it is log1p(-Q); where Q > 1/2 (1 - Q small), m is below the median of
    the Gamma(k) distribution, itself below k, so the terms of the lower series fall from
    j = k on: they are summed from there until they no longer count.
    """
    if log_q is None:
        log_q = log_chi2_sf(m, k)
    if log_q <= -math.log(2.0):
        return math.log1p(-math.exp(log_q))
    if m <= 0.0:
        return -math.inf
    log_m = math.log(m)
    first = k * log_m - math.lgamma(k + 1)
    exp = math.exp
    total, term, j, top = 1.0, 0.0, k, 0.0  # term: t_j - t_k
    while True:
        j += 1
        term += log_m - math.log(j)
        top = max(top, term)
        if j > m and term < top - _NEGLIGIBLE:
            return -m + first + math.log(total)
        total += exp(term)


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


_LOGS = [0.0]
"""ln j for j = 0, 1, ... (ln 0 stands as 0.0, never used), grown as needed."""


def _logs(n: int) -> list[float]:
    """`_LOGS` holding ln j for every j <= n."""
    if len(_LOGS) <= n:
        _LOGS.extend(map(math.log, range(len(_LOGS), n + 1)))
    return _LOGS


def _logaddexp(a: float, b: float) -> float:
    """log(e^a + e^b), without overflow."""
    top = max(a, b)
    if top == -math.inf:
        return -math.inf
    return top + math.log1p(math.exp(-abs(a - b)))
