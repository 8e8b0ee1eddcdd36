"""Evaluation metrics, score calibration and cutoff choice for a binary spam filter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "accuracy",
    "apply_platt",
    "brier_score",
    "choose_cutoffs_by_cost",
    "choose_cutoffs_for_bound",
    "choose_cutoffs_for_fpr",
    "confusion_matrix",
    "fit_platt",
    "fpr_upper_bound",
    "log_loss",
    "matthews_corrcoef",
    "precision_recall_f1",
    "recall_at_fpr",
    "reliability_table",
    "roc_auc",
    "roc_curve",
    "stratified_folds",
]

# Conventions used throughout:
# * the positive class is spam; ``is_positive`` is a boolean (or 0/1) array of shape (n,);
# * ``scores`` are continuous log-odds of spam, shape (n,), higher = more spammy;
# * a cutoff ``c`` predicts spam iff ``score >= c``.


# --------------------------------------------------------------------------------------------
# Input checks (public functions only call these; private helpers trust their arguments)
# --------------------------------------------------------------------------------------------


def _as_1d(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    return arr


def _as_scores(scores: Any, name: str = "scores") -> np.ndarray:
    arr = _as_1d(scores, name)
    try:
        arr = arr.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric") from exc
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or infinity)")
    return arr


def _as_binary(is_positive: Any, n: int, name: str = "is_positive") -> np.ndarray:
    arr = _as_1d(is_positive, name)
    if arr.shape[0] != n:
        raise ValueError(f"length mismatch: {name} has {arr.shape[0]} items, expected {n}")
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind in "iuf":
        ok = (arr == 0) | (arr == 1)
        if np.all(ok):
            return arr == 1
    raise ValueError(f"{name} must hold booleans or 0/1 (compare labels with the spam label first)")


def _as_probabilities(prob_positive: Any, name: str = "prob_positive") -> np.ndarray:
    arr = _as_scores(prob_positive, name)
    if np.any(arr < 0.0) or np.any(arr > 1.0):
        raise ValueError(f"{name} must lie in [0, 1]")
    return arr


def _check_same_length(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"length mismatch: {name_a} has {a.shape[0]} items, {name_b} has {b.shape[0]}"
        )


def _need_both_classes(pos: np.ndarray) -> tuple[int, int]:
    n_pos = int(np.count_nonzero(pos))
    n_neg = int(pos.shape[0] - n_pos)
    if n_pos == 0 or n_neg == 0:
        missing = "positive (spam)" if n_pos == 0 else "negative (ham)"
        raise ValueError(f"no {missing} items: the metric needs both classes")
    return n_pos, n_neg


def _label_index(labels: Sequence[Any], name: str = "labels") -> dict[Any, int]:
    labels = list(labels)
    if not labels:
        raise ValueError(f"{name} is empty")
    index: dict[Any, int] = {}
    for i, lab in enumerate(labels):
        if lab in index:
            raise ValueError(f"{name} contains {lab!r} twice")
        index[lab] = i
    return index


def _encode(values: Any, index: dict[Any, int], name: str, *, strict: bool) -> np.ndarray:
    """Map each value to its position in ``index`` (-1 if absent), shape (n,) int64."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {values.shape}")
        try:
            uniq, inverse = np.unique(values, return_inverse=True)
        except TypeError:  # unorderable object array
            codes = np.array([index.get(v, -1) for v in values.tolist()], dtype=np.int64)
        else:
            table = np.array([index.get(u, -1) for u in uniq.tolist()], dtype=np.int64)
            codes = table[inverse.reshape(-1)]
    else:
        # Plain sequences are looked up item by item, so that e.g. 1 and "1" stay distinct.
        try:
            codes = np.array([index.get(v, -1) for v in values], dtype=np.int64)
        except TypeError as exc:
            raise ValueError(f"{name} must be a one-dimensional sequence of labels") from exc
    if codes.size == 0:
        raise ValueError(f"{name} is empty")
    if strict and np.any(codes < 0):
        raw = values.tolist() if isinstance(values, np.ndarray) else list(values)
        unknown = sorted({repr(v) for v, c in zip(raw, codes.tolist(), strict=True) if c < 0})
        shown = ", ".join(unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise ValueError(f"{name} contains values not among the given labels: {shown}")
    return codes


# --------------------------------------------------------------------------------------------
# Ranking metrics (scores)
# --------------------------------------------------------------------------------------------


def _roc_counts(scores: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative (TP, FP) counts at each distinct score, highest first, with a leading (0, 0).

    Returns ``tps``, ``fps`` of shape (m + 1,) int64 and ``thresholds`` of shape (m + 1,),
    where m is the number of distinct scores and ``thresholds[0] = +inf``.
    """
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    p = pos[order]
    # last position of each group of tied scores
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
    tps = np.cumsum(p, dtype=np.int64)[ends]
    fps = (ends + 1).astype(np.int64) - tps
    zero = np.zeros(1, dtype=np.int64)
    return np.r_[zero, tps], np.r_[zero, fps], np.r_[np.inf, s[ends]]


def roc_curve(scores: Any, is_positive: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Receiver operating characteristic of a scorer.

    With threshold ``t`` an item is predicted positive iff ``score >= t``;
    ``fpr(t) = FP(t) / N-`` and ``tpr(t) = TP(t) / N+``.  There is one point per distinct
    score (tied scores move together), in decreasing threshold order, preceded by the point
    (0, 0) at threshold ``+inf``.

    Args:
        scores: shape (n,), finite log-odds of spam.
        is_positive: shape (n,), booleans or 0/1; both classes must be present.

    Returns:
        ``(fpr, tpr, thresholds)``, each of shape (m + 1,) for m distinct scores; ``fpr`` and
        ``tpr`` are non-decreasing and end at 1.0.
    """
    s = _as_scores(scores)
    pos = _as_binary(is_positive, s.shape[0])
    n_pos, n_neg = _need_both_classes(pos)
    tps, fps, thresholds = _roc_counts(s, pos)
    return fps / n_neg, tps / n_pos, thresholds


def roc_auc(scores: Any, is_positive: Any) -> float:
    """Area under the ROC curve, i.e. the normalised Mann-Whitney statistic.

    ``AUC = (#{(i, j): s_i > s_j} + 1/2 #{(i, j): s_i = s_j}) / (N+ N-)`` over pairs of a
    positive ``i`` and a negative ``j``; equal to the trapezoidal area under
    :func:`roc_curve` (and to scikit-learn's ``roc_auc_score``).

    Args:
        scores: shape (n,), finite log-odds of spam.
        is_positive: shape (n,), booleans or 0/1.

    Raises:
        ValueError: if one class is absent (the AUC is undefined).
    """
    s = _as_scores(scores)
    pos = _as_binary(is_positive, s.shape[0])
    n_pos, n_neg = _need_both_classes(pos)
    tps, fps, _ = _roc_counts(s, pos)
    # Trapezoids in integer arithmetic: 2 * area * N+ * N- = sum dFP * (TP_prev + TP).
    twice = int(np.sum(np.diff(fps) * (tps[1:] + tps[:-1])))
    return twice / (2.0 * n_pos * n_neg)


def recall_at_fpr(scores: Any, is_positive: Any, max_fpr: float) -> tuple[float, float]:
    """Best spam recall reachable with a false-positive rate of at most ``max_fpr``.

    ``max over thresholds t of tpr(t) subject to fpr(t) <= max_fpr``, the thresholds being
    those of :func:`roc_curve`: tied scores move together, so a threshold inside a tie group
    cannot split it (conservative).  Among thresholds with the best recall the highest one
    (lowest false-positive rate) is returned.

    Args:
        scores: shape (n,), finite log-odds of spam.
        is_positive: shape (n,), booleans or 0/1; both classes must be present.
        max_fpr: in [0, 1].

    Returns:
        ``(recall, threshold)``; ``(0.0, inf)`` if even the highest score exceeds the budget.
    """
    if not 0.0 <= float(max_fpr) <= 1.0:
        raise ValueError(f"max_fpr must lie in [0, 1], got {max_fpr!r}")
    fpr, tpr, thresholds = roc_curve(scores, is_positive)
    ok = fpr <= max_fpr  # a prefix, since fpr is non-decreasing
    last = int(np.flatnonzero(ok)[-1])
    best = tpr[last]
    first_best = int(np.flatnonzero(tpr[: last + 1] == best)[0])
    return float(best), float(thresholds[first_best])


# --------------------------------------------------------------------------------------------
# Classification metrics (labels)
# --------------------------------------------------------------------------------------------


def confusion_matrix(
    y_true: Any,
    y_pred: Any,
    labels: Sequence[Any],
    pred_labels: Sequence[Any] | None = None,
) -> np.ndarray:
    """Count matrix ``C[i, j] = #{k : y_true[k] = labels[i] and y_pred[k] = pred_labels[j]}``.

    Args:
        y_true: shape (n,), every value among ``labels``.
        y_pred: shape (n,), every value among ``pred_labels``.
        labels: the row labels (true classes), in row order.
        pred_labels: the column labels in column order; defaults to ``labels``.  Pass e.g.
            ``["ham", "spam", "unsure"]`` when predictions may abstain.

    Returns:
        int64 array of shape (len(labels), len(pred_labels)); its entries sum to n.

    Raises:
        ValueError: on lengths that differ, empty input or a value outside its label list.
    """
    row_index = _label_index(labels, "labels")
    col_labels = labels if pred_labels is None else pred_labels
    col_index = _label_index(col_labels, "pred_labels")
    t = _encode(y_true, row_index, "y_true", strict=True)
    p = _encode(y_pred, col_index, "y_pred", strict=True)
    _check_same_length(t, p, "y_true", "y_pred")
    n_rows, n_cols = len(row_index), len(col_index)
    flat = np.bincount(t * n_cols + p, minlength=n_rows * n_cols)
    return flat.reshape(n_rows, n_cols).astype(np.int64)


def precision_recall_f1(
    y_true: Any, y_pred: Any, labels: Sequence[Any]
) -> dict[str, dict[str, float]]:
    """Per-label precision, recall, F1 and support.

    For label ``l``: ``TP = #{y_true = l and y_pred = l}``,
    ``precision = TP / #{y_pred = l}``, ``recall = TP / #{y_true = l}``,
    ``f1 = 2 TP / (#{y_pred = l} + #{y_true = l})`` (the harmonic mean of the two),
    ``support = #{y_true = l}``; a zero denominator gives 0.0.  Values outside ``labels``
    (e.g. an ``"unsure"`` prediction) are allowed and simply match no label.

    Args:
        y_true, y_pred: shape (n,).
        labels: the labels to report, in order.

    Returns:
        ``{str(label): {"precision", "recall", "f1", "support"}}``, ``support`` an int.
    """
    index = _label_index(labels, "labels")
    t = _encode(y_true, index, "y_true", strict=False)
    p = _encode(y_pred, index, "y_pred", strict=False)
    _check_same_length(t, p, "y_true", "y_pred")
    k = len(index)
    support = np.bincount(t[t >= 0], minlength=k)
    predicted = np.bincount(p[p >= 0], minlength=k)
    hit = (t == p) & (t >= 0)
    tp = np.bincount(t[hit], minlength=k)

    def ratio(num: int, den: int) -> float:
        return float(num / den) if den > 0 else 0.0

    out: dict[str, dict[str, float]] = {}
    for lab, i in index.items():
        out[str(lab)] = {
            "precision": ratio(int(tp[i]), int(predicted[i])),
            "recall": ratio(int(tp[i]), int(support[i])),
            "f1": ratio(2 * int(tp[i]), int(predicted[i]) + int(support[i])),
            "support": int(support[i]),
        }
    return out


def accuracy(y_true: Any, y_pred: Any) -> float:
    """Fraction of exact agreements: ``#{y_true = y_pred} / n`` over arrays of shape (n,)."""
    t = _as_1d(y_true, "y_true")
    p = _as_1d(y_pred, "y_pred")
    _check_same_length(t, p, "y_true", "y_pred")
    numeric = "biuf"
    if (t.dtype.kind in numeric and p.dtype.kind in numeric) or (
        t.dtype.kind == p.dtype.kind and t.dtype.kind in "US"
    ):
        equal = t == p
    else:
        equal = np.fromiter(
            (a == b for a, b in zip(t.tolist(), p.tolist(), strict=True)),
            dtype=bool,
            count=t.shape[0],
        )
    return float(np.count_nonzero(equal) / t.shape[0])


def matthews_corrcoef(y_true: Any, y_pred: Any, labels: Sequence[Any]) -> float:
    """Matthews correlation coefficient, multi-class form of Gorodkin (2004).

    From the K x K confusion matrix ``C`` with ``s = sum C``, ``c = trace C``, true counts
    ``t_k`` (row sums) and predicted counts ``p_k`` (column sums):
    ``MCC = (c s - sum_k p_k t_k) / sqrt((s^2 - sum_k p_k^2) (s^2 - sum_k t_k^2))``.
    For two classes this is ``(TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))``.

    Args:
        y_true, y_pred: shape (n,), every value among ``labels`` (labels without items are
            harmless, so ``labels`` may include e.g. ``"unsure"``).
        labels: the classes.

    Returns:
        A value in [-1, 1]; 0.0 when undefined (a zero denominator).
    """
    cm = confusion_matrix(y_true, y_pred, labels).astype(np.float64)
    t_k = cm.sum(axis=1)
    p_k = cm.sum(axis=0)
    c = np.trace(cm)
    s = cm.sum()
    cov_ytyp = c * s - np.dot(t_k, p_k)
    cov_ypyp = s * s - np.dot(p_k, p_k)
    cov_ytyt = s * s - np.dot(t_k, t_k)
    if cov_ypyp == 0.0 or cov_ytyt == 0.0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))


# --------------------------------------------------------------------------------------------
# Probability metrics
# --------------------------------------------------------------------------------------------


def brier_score(prob_positive: Any, is_positive: Any) -> float:
    """Mean squared error of the spam probability: ``mean_i (p_i - y_i)^2``, shapes (n,)."""
    p = _as_probabilities(prob_positive)
    y = _as_binary(is_positive, p.shape[0])
    return float(np.mean((p - y) ** 2))


def log_loss(prob_positive: Any, is_positive: Any, eps: float = 1e-15) -> float:
    """Binary cross-entropy in nats: ``-mean_i [y_i log p_i + (1 - y_i) log(1 - p_i)]``.

    Probabilities (shape (n,), in [0, 1]) are first clipped to ``[eps, 1 - eps]``, so a
    confident mistake costs at most ``-log(eps)``.
    """
    if not 0.0 <= eps < 0.5:
        raise ValueError(f"eps must lie in [0, 0.5), got {eps!r}")
    p = np.clip(_as_probabilities(prob_positive), eps, 1.0 - eps)
    y = _as_binary(is_positive, p.shape[0])
    with np.errstate(divide="ignore"):  # log(0) only when eps == 0, and then it is meant
        losses = np.where(y, -np.log(p), -np.log1p(-p))
    return float(np.mean(losses))


def reliability_table(
    prob_positive: Any, is_positive: Any, n_bins: int = 10
) -> list[dict[str, Any]]:
    """Calibration table over ``n_bins`` equal-width bins of [0, 1].

    Bin ``k`` covers ``[k / n_bins, (k + 1) / n_bins)``; the last bin also holds 1.0.  Each
    row is ``{"lower", "upper", "count", "mean_predicted", "fraction_positive"}``, the means
    taken over the items of the bin; an empty bin is kept with ``count`` 0 and both means
    ``None``.

    Args:
        prob_positive: shape (n,), in [0, 1].
        is_positive: shape (n,), booleans or 0/1.
        n_bins: at least 1.

    Returns:
        A list of ``n_bins`` rows, lowest bin first.
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    p = _as_probabilities(prob_positive)
    y = _as_binary(is_positive, p.shape[0])
    n_bins = int(n_bins)
    edges = np.arange(n_bins + 1) / n_bins  # k / n_bins exactly rounded: 0.6, not 0.6000...1
    which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, n_bins - 1)
    counts = np.bincount(which, minlength=n_bins)
    sum_p = np.bincount(which, weights=p, minlength=n_bins)
    sum_y = np.bincount(which, weights=y.astype(np.float64), minlength=n_bins)
    rows: list[dict[str, Any]] = []
    for k in range(n_bins):
        count = int(counts[k])
        rows.append(
            {
                "lower": float(edges[k]),
                "upper": float(edges[k + 1]),
                "count": count,
                "mean_predicted": float(sum_p[k] / count) if count else None,
                "fraction_positive": float(sum_y[k] / count) if count else None,
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# Platt scaling
# --------------------------------------------------------------------------------------------


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-z))`` without overflow: ``exp`` only ever sees ``-|z|``."""
    with np.errstate(under="ignore"):
        e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _platt_loss(z: np.ndarray, t: np.ndarray) -> float:
    # sum_i -[t_i log sigma(z_i) + (1 - t_i) log sigma(-z_i)] = sum_i softplus(z_i) - t_i z_i
    return float(np.sum(np.logaddexp(0.0, z) - t * z))


def fit_platt(scores: Any, is_positive: Any, *, max_iter: int = 100) -> tuple[float, float]:
    """Fit Platt scaling ``P(spam | s) = 1 / (1 + exp(-(a s + b)))`` to scored items.

    Minimises the cross-entropy ``sum_i softplus(z_i) - t_i z_i`` with ``z_i = a s_i + b``
    against the regularised targets of Platt (1999) and Lin, Lin & Weng (2007):
    ``t_i = (N+ + 1) / (N+ + 2)`` for spam and ``t_i = 1 / (N- + 2)`` for ham, which keep
    ``(a, b)`` finite even on perfectly separated scores.  Newton's method with
    backtracking line search runs on standardised scores ``(s - mean) / std`` (so log-odds
    in the thousands cause neither overflow nor an ill-conditioned Hessian) and the result
    is mapped back to the original scale.  It stops when the gradient vanishes to rounding
    precision, when no step decreases the loss any more, or after ``max_iter`` steps.

    Args:
        scores: shape (n,), finite log-odds of spam.
        is_positive: shape (n,), booleans or 0/1 (one class alone is allowed).
        max_iter: maximum number of Newton steps, at least 1.

    Returns:
        ``(a, b)``; ``a = 0`` when all scores are equal.
    """
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    s = _as_scores(scores)
    pos = _as_binary(is_positive, s.shape[0])
    n = s.shape[0]
    n_pos = int(np.count_nonzero(pos))
    n_neg = n - n_pos
    t = np.where(pos, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))

    mu = float(np.mean(s))
    sd = float(np.std(s))
    if not sd > 0.0 or not np.isfinite(sd):
        t_mean = float(np.mean(t))
        return 0.0, float(np.log(t_mean) - np.log1p(-t_mean))
    x = (s - mu) / sd

    a, b = 0.0, float(np.log((n_pos + 1.0) / (n_neg + 1.0)))
    sigma = 1e-12  # keeps the Hessian positive definite
    z = a * x + b
    loss = _platt_loss(z, t)
    for _ in range(int(max_iter)):
        p = _sigmoid(z)
        d = p - t
        g = np.array([np.dot(d, x), np.sum(d)])
        if np.max(np.abs(g)) <= 1e-12 * n:
            break
        w = p * _sigmoid(-z)  # p (1 - p) without cancellation
        h11 = float(np.dot(w, x * x)) + sigma
        h12 = float(np.dot(w, x))
        h22 = float(np.sum(w)) + sigma
        det = h11 * h22 - h12 * h12
        da = -(h22 * g[0] - h12 * g[1]) / det
        db = -(-h12 * g[0] + h11 * g[1]) / det
        slope = float(g[0] * da + g[1] * db)  # < 0: a descent direction
        step = 1.0
        improved = False
        while step >= 1e-10:
            a_new, b_new = a + step * da, b + step * db
            z_new = a_new * x + b_new
            loss_new = _platt_loss(z_new, t)
            if loss_new <= loss + 1e-4 * step * slope:
                improved = True
                break
            step /= 2.0
        if not improved:
            break
        tiny = abs(a_new - a) <= 1e-13 * (1.0 + abs(a)) and abs(b_new - b) <= 1e-13 * (1.0 + abs(b))
        a, b, z, loss = a_new, b_new, z_new, loss_new
        if tiny:
            break
    return float(a / sd), float(b - a * mu / sd)


def apply_platt(scores: Any, a: float, b: float) -> np.ndarray:
    """Calibrated spam probability ``1 / (1 + exp(-(a s + b)))``, same shape as ``scores``.

    Evaluated without overflow for any magnitude of ``a s + b`` (the result saturates at
    0.0 or 1.0 instead of warning).  Infinite scores are allowed unless ``a`` is 0.
    """
    s = np.asarray(scores, dtype=np.float64)
    if np.any(np.isnan(s)):
        raise ValueError("scores must not contain NaN")
    if not (np.isfinite(a) and np.isfinite(b)):
        raise ValueError(f"Platt parameters must be finite, got a={a!r}, b={b!r}")
    with np.errstate(over="ignore", invalid="ignore"):
        z = a * s + b
    if np.any(np.isnan(z)):
        raise ValueError("a * score + b is undefined (a = 0 with an infinite score)")
    return _sigmoid(z)


# --------------------------------------------------------------------------------------------
# Cross-validation folds
# --------------------------------------------------------------------------------------------


def stratified_folds(labels: Any, k: int, seed: int) -> np.ndarray:
    """Assign each item to one of ``k`` folds, keeping the class proportions.

    The items of each class (classes in sorted order) are shuffled with
    ``np.random.default_rng(seed)`` and dealt round-robin; the deal continues from class to
    class, so every fold holds ``floor`` or ``ceil`` of ``n_c / k`` items of each class c,
    and ``floor`` or ``ceil`` of ``n / k`` items in all.  The result depends only on
    ``labels``, ``k`` and ``seed``.

    Args:
        labels: shape (n,), class labels of any hashable kind.
        k: number of folds, ``2 <= k <= n``.
        seed: seed of the shuffle.

    Returns:
        int64 array of shape (n,) with values in ``0 .. k-1``.
    """
    arr = _as_1d(labels, "labels")
    n = arr.shape[0]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer, got {k!r}")
    if k < 2 or k > n:
        raise ValueError(f"k must be between 2 and the number of items ({n}), got {k}")
    try:
        _, codes = np.unique(arr, return_inverse=True)
        codes = codes.reshape(-1)
    except TypeError:  # unorderable mixed labels: classes in order of first appearance
        first: dict[Any, int] = {}
        codes = np.array([first.setdefault(v, len(first)) for v in arr.tolist()])
    rng = np.random.default_rng(seed)
    folds = np.empty(n, dtype=np.int64)
    offset = 0
    for c in range(int(codes.max()) + 1):
        members = rng.permutation(np.flatnonzero(codes == c))
        folds[members] = (offset + np.arange(members.shape[0])) % k
        offset = (offset + members.shape[0]) % k
    return folds


# --------------------------------------------------------------------------------------------
# Cutoff choice
# --------------------------------------------------------------------------------------------


def _candidate_cutoffs(
    scores: np.ndarray, pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Candidate cutoffs and the counts strictly below each.

    With distinct sorted scores ``v_0 < ... < v_{m-1}`` the candidates are
    ``c_0 = -inf``, ``c_j = midpoint(v_{j-1}, v_j)`` and ``c_m = +inf`` (shape (m + 1,)).
    Returns ``cutoffs`` and, per candidate, the numbers of all items, positives and
    negatives with ``score < c_j`` (int64, shape (m + 1,)).
    """
    order = np.argsort(scores, kind="stable")
    v = scores[order]
    p = pos[order]
    ends = np.flatnonzero(np.r_[v[1:] != v[:-1], True])  # last index of each tie group
    distinct = v[ends]
    lo, hi = distinct[:-1], distinct[1:]
    mid = lo / 2.0 + hi / 2.0  # no overflow near the float limits
    mid = np.where(mid > lo, mid, hi)  # adjacent floats: keep lo < cutoff <= hi
    cutoffs = np.r_[-np.inf, mid, np.inf]
    zero = np.zeros(1, dtype=np.int64)
    below_all = np.r_[zero, (ends + 1).astype(np.int64)]
    below_pos = np.r_[zero, np.cumsum(p, dtype=np.int64)[ends]]
    return cutoffs, below_all, below_pos, below_all - below_pos


def choose_cutoffs_for_fpr(scores: Any, is_positive: Any, target_fpr: float) -> float:
    """The lowest spam cutoff whose false-positive rate on ham is at most ``target_fpr``.

    Spam is predicted iff ``score >= cutoff``; ``fpr(c) = #{ham : s >= c} / N-``.  The
    candidates are ``-inf``, the midpoints between consecutive distinct scores, and
    ``+inf`` (so tied scores are never split); the lowest admissible one also gives the
    highest spam recall.

    Args:
        scores: shape (n,), finite log-odds of spam.
        is_positive: shape (n,), booleans or 0/1; at least one ham item.
        target_fpr: in [0, 1].

    Returns:
        The cutoff: ``-inf`` if every item may be called spam, ``+inf`` if even the group of
        items tied at the highest score holds too much ham.
    """
    if not 0.0 <= float(target_fpr) <= 1.0:
        raise ValueError(f"target_fpr must lie in [0, 1], got {target_fpr!r}")
    s = _as_scores(scores)
    pos = _as_binary(is_positive, s.shape[0])
    n_neg = int(pos.shape[0] - np.count_nonzero(pos))
    if n_neg == 0:
        raise ValueError("no negative (ham) items: the false-positive rate is undefined")
    cutoffs, _, _, neg_below = _candidate_cutoffs(s, pos)
    fpr = (n_neg - neg_below) / n_neg  # non-increasing in the cutoff
    first = int(np.flatnonzero(fpr <= target_fpr)[0])  # exists: fpr(+inf) = 0
    return float(cutoffs[first])


def fpr_upper_bound(false_positives: Any, ham: int, confidence: float) -> np.ndarray:
    """The one-sided Clopper–Pearson upper bound on a rate seen as k of n: the p with
    P(Binomial(n, p) <= k) = 1 - confidence, i.e. the ``confidence`` quantile of
    Beta(k + 1, n - k); 1 where k = n. Elementwise over ``false_positives`` (k), shape kept.

    For k = 0 it is 1 - (1 - confidence)^(1/n), about 3/n at 95%.
    """
    from scipy.special import betaincinv  # the quantile of a Beta; scipy.stats loads numpy.ma

    k = np.asarray(false_positives, dtype=np.float64)
    if ham <= 0:
        raise ValueError("no negative (ham) items: the false-positive rate is undefined")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    inside = k < ham
    bound = np.ones_like(k)
    bound[inside] = betaincinv(k[inside] + 1.0, ham - k[inside], confidence)
    return bound


def choose_cutoffs_for_bound(
    scores: Any,
    is_positive: Any,
    target_fpr: float,
    *,
    confidence: float = 0.95,
    margin: float = 0.0,
    cost_fn: float = 1.0,
    cost_unsure: float = 0.2,
) -> tuple[float, float]:
    """Ham and spam cutoffs whose false-positive rate holds out of sample.

    The spam cutoff is the lowest candidate (as `choose_cutoffs_for_fpr`) whose
    `fpr_upper_bound` of k false positives among the n ham is at most ``target_fpr``, then
    raised by ``margin`` (the drift of new mail, in log-odds). The ham cutoff is the
    candidate at or below it of least ``cost_fn FN + cost_unsure U``, the narrowest band
    on ties. Where the ham are too few for the bound to reach the target even with no
    false positive (n below about 3 / target_fpr at 95%), the spam cutoff is the lowest
    with none. Either cutoff may be infinite.
    """
    s = _as_scores(scores)
    pos = _as_binary(is_positive, s.shape[0])
    n_neg = int(pos.shape[0] - np.count_nonzero(pos))
    cutoffs, below_all, below_pos, below_neg = _candidate_cutoffs(s, pos)
    upper = fpr_upper_bound(n_neg - below_neg, n_neg, confidence)  # non-increasing
    # too few ham to show the target even without a false positive: as few as they can show
    j = int(np.flatnonzero(upper <= max(target_fpr, upper[-1]))[0])
    spam_cut = float(cutoffs[j]) + margin
    # the unsure band is what lies below the spam cutoff and not below the ham cutoff
    at_spam = int(np.searchsorted(cutoffs, spam_cut, side="right")) - 1
    below_spam = int(np.count_nonzero(s < spam_cut))
    g = cost_fn * below_pos[: at_spam + 1] + cost_unsure * (below_spam - below_all[: at_spam + 1])
    i = int(np.flatnonzero(g == g.min())[-1])
    return min(float(cutoffs[i]), spam_cut), spam_cut


def _integer_costs(costs: tuple[float, ...], n: int) -> tuple[int, ...] | None:
    """Scale decimal costs to exact integers (so that e.g. 5 x 0.2 ties with 1 x 1.0).

    Returns ``None`` when some cost has more than 6 decimals or the totals could overflow.
    """
    for digits in range(7):
        scale = 10**digits
        scaled = [c * scale for c in costs]
        rounded = [round(x) for x in scaled]
        if all(abs(x - r) <= 1e-9 * max(1.0, abs(x)) for x, r in zip(scaled, rounded, strict=True)):
            if sum(rounded) * max(n, 1) < 2**62:
                return tuple(int(r) for r in rounded)
            return None
    return None


def choose_cutoffs_by_cost(
    scores: Any,
    is_positive: Any,
    *,
    cost_fp: float = 15.0,
    cost_fn: float = 1.0,
    cost_unsure: float = 0.2,
) -> tuple[float, float]:
    """Ham and spam cutoffs of least total cost, with an "unsure" band between them.

    An item is ham if ``score < ham_cutoff``, spam if ``score >= spam_cutoff`` and unsure
    otherwise.  With ``FP`` = ham called spam, ``FN`` = spam called ham and ``U`` = unsure
    items, the cost ``cost_fp FP + cost_fn FN + cost_unsure U`` is minimised exactly over
    all pairs ``ham_cutoff <= spam_cutoff`` drawn from ``-inf``, the midpoints between
    consecutive distinct scores, and ``+inf``.

    Since ``U = L(spam) - L(ham)`` with ``L(c) = #{s < c}``, the cost splits into
    ``F(spam) + G(ham)``, ``F = cost_fp FP + cost_unsure L`` and
    ``G = cost_fn FN - cost_unsure L``; a running minimum of ``G`` then gives the best ham
    cutoff for every spam cutoff in one pass: O(n log n) for the sort plus O(m) for
    m distinct scores, with no cap on the candidates.

    Ties are broken deterministically: least cost, then fewest unsure items (the narrowest
    band), then the lowest spam cutoff.  Costs with at most 6 decimals are compared exactly
    (scaled to integers), so mathematically equal totals do tie.

    Args:
        scores: shape (n,), finite log-odds of spam.
        is_positive: shape (n,), booleans or 0/1.
        cost_fp, cost_fn, cost_unsure: non-negative finite costs per item.

    Returns:
        ``(ham_cutoff, spam_cutoff)`` with ``ham_cutoff <= spam_cutoff`` (either may be
        infinite).
    """
    costs = (float(cost_fp), float(cost_fn), float(cost_unsure))
    if not all(np.isfinite(c) and c >= 0.0 for c in costs):
        raise ValueError(
            f"costs must be finite and non-negative, got cost_fp={cost_fp!r}, "
            f"cost_fn={cost_fn!r}, cost_unsure={cost_unsure!r}"
        )
    s = _as_scores(scores)
    pos = _as_binary(is_positive, s.shape[0])
    n_pos = int(np.count_nonzero(pos))
    n_neg = s.shape[0] - n_pos
    cutoffs, below_all, below_pos, below_neg = _candidate_cutoffs(s, pos)

    exact = _integer_costs(costs, s.shape[0])
    if exact is not None:
        c_fp, c_fn, c_un = (np.int64(c) for c in exact)
    else:
        c_fp, c_fn, c_un = (np.float64(c) for c in costs)
    fp = n_neg - below_neg  # ham at or above the cutoff, if it is the spam cutoff
    fn = below_pos  # spam below the cutoff, if it is the ham cutoff
    f = c_fp * fp + c_un * below_all
    g = c_fn * fn - c_un * below_all

    best_g = np.minimum.accumulate(g)
    # For each spam index j, the largest ham index i <= j with g[i] == min(g[:j+1]):
    # such an i attains the running minimum at its own position, and the running minimum
    # stays constant after the last such position.
    idx = np.arange(g.shape[0])
    attains = g == best_g
    ham_idx = np.maximum.accumulate(np.where(attains, idx, -1))
    total = f + best_g
    unsure = below_all - below_all[ham_idx]
    # lexsort: last key is primary -> cost, then unsure count, then spam index
    j = int(np.lexsort((idx, unsure, total))[0])
    return float(cutoffs[ham_idx[j]]), float(cutoffs[j])
