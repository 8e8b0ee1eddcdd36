"""Pictures of an evaluation: the ROC curve and the score histogram, as PNG or SVG.

matplotlib is optional (``pip install matplotlib``); it is imported only when a plot is
drawn, and always through its Agg canvas, so no window or display is ever needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PlotError
from ..fit import metrics
from ..fit.crossval import Scores

PLOT_SUFFIXES: dict[str, str] = {".png": "png", ".svg": "svg"}
INSTALL_HINT = "pip install matplotlib (pipx inject nbspam matplotlib under pipx)"
HISTOGRAM_BINS = 60
#: The histogram's x axis: from this percentile of the scores to its complement, where
#: nearly all the messages are (those beyond are counted in the end bins).
CLIP_PERCENTILE = 0.5


def plot_format(path: str) -> str:
    """The image format of ``path`` by its suffix: 'png' or 'svg'; PlotError otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise PlotError(
            f"cannot tell the image format of {path}: give a file ending in .png or .svg"
        )
    return PLOT_SUFFIXES[suffix]


def check_plot(path: str) -> None:
    """Refuse (PlotError) a plot that could not be drawn, before the work it would show:
    a path of no known image format, or no matplotlib."""
    plot_format(path)
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise PlotError(f"--plot needs matplotlib: {INSTALL_HINT}")


def plot_evaluation(
    scores: Scores, path: str, *, cutoffs: tuple[float, float] | None = None
) -> None:
    """Write the ROC curve and the log-odds histogram of a two-class evaluation to ``path``.

    Left: spam recall against the false-positive rate on a logarithmic axis, as the TREC
    spam track draws it (a false-positive rate of 0 is drawn at half a message, the left
    edge), from the lowest recall shown. Right: the log-odds of ham and spam as two
    histograms where nearly all of them are, with the ``cutoffs`` marked and labelled
    (the median of the folds' own where there are several).
    """
    fmt = plot_format(path)
    mask, odds, pos = _two_classes(scores)
    figure = _figure(11)
    roc_axes, hist_axes = figure.subplots(1, 2)
    draw_roc(roc_axes, odds, pos, scores.positive)
    folds = len(scores.rules)
    whose = f"the median of the {folds} folds' own" if folds > 1 else None
    draw_histogram(hist_axes, odds, pos, scores.positive, scores.negative or "", cutoffs, whose)
    _save(figure, path, fmt)


def _two_classes(scores: Scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the evaluated messages (n,), their log-odds, whether each is positive), or
    PlotError unless a two-class model scored messages of both classes."""
    if scores.log_odds is None or scores.positive is None:
        raise PlotError("the plots need a two-class model (log-odds of a positive class)")
    mask = scores.evaluated
    pos = np.array(scores.labels, dtype=object)[mask] == scores.positive
    if pos.all() or not pos.any():
        raise PlotError("the plots need evaluated messages of both classes")
    return mask, scores.log_odds[mask], pos


def _figure(width: float) -> Any:
    """A matplotlib figure ``width`` inches wide that draws without a screen, or PlotError
    saying how to install matplotlib."""
    try:
        import matplotlib  # noqa: F401  (the package first: its parts may be loaded already)
    except ImportError:
        raise PlotError(f"--plot needs matplotlib: {INSTALL_HINT}") from None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Any, path: str, fmt: str) -> None:
    """Write the figure to ``path``; the same plot gives the same file.

    Drawn in memory, then written as every output that is not a model
    (`container.write_output`), not by savefig, which opens the name as it is: through a
    link planted there, into a FIFO, and leaving half a file where it fails."""
    import io

    import matplotlib

    from ..store.container import write_output

    image = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "nbspam"}):  # same plot, same SVG ids
        figure.savefig(image, format=fmt, metadata=_metadata(fmt))
    write_output(path, [image.getvalue()], what="plot", error=PlotError)


def _metadata(fmt: str) -> dict[str, Any]:
    """Image metadata without a creation date, so that the file depends only on the data."""
    return {"Date": None} if fmt == "svg" else {"Software": "nbspam"}


def roc_points(odds: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(false-positive rate, recall, floor) of the ROC curve for a logarithmic x axis.

    Rates of 0 become ``floor`` = half a ham message, so the curve starts at the left edge.
    """
    fpr, tpr, _ = metrics.roc_curve(odds, pos)
    floor = 0.5 / int(np.count_nonzero(~pos))
    return np.maximum(fpr, floor), tpr, floor


def recall_floor(fpr: np.ndarray, tpr: np.ndarray, floor: float) -> float:
    """The lowest recall the ROC plot shows (%), rounded down to 5: that at its left edge,
    the false-positive rate ``floor``, less a margin; the rest below it is empty."""
    shown = float(tpr[fpr <= floor].max())
    return max(0.0, 5.0 * np.floor((100 * shown - 2.0) / 5.0))


def draw_roc(axes: Any, odds: np.ndarray, pos: np.ndarray, positive: str) -> None:
    """The ROC curve with a log-scaled false-positive axis, from the lowest recall shown,
    and the recall at 0.1% and 1% false positives marked (the report's rows)."""
    fpr, tpr, floor = roc_points(odds, pos)
    auc = metrics.roc_auc(odds, pos)
    axes.plot(100 * fpr, 100 * tpr, color="tab:blue")
    for rate in (0.001, 0.01):
        recall, _ = metrics.recall_at_fpr(odds, pos, rate)
        axes.axvline(100 * rate, color="grey", linestyle=":", linewidth=1)
        axes.plot([100 * rate], [100 * recall], "o", color="tab:blue", markersize=4)
        axes.annotate(
            f"{100 * recall:.1f}% at {100 * rate:g}%",
            (100 * rate, 100 * recall),
            fontsize=8,
            xytext=(4, -12),
            textcoords="offset points",
        )
    axes.set_xscale("log")
    axes.set_xlim(100 * floor, 100)
    axes.set_ylim(recall_floor(fpr, tpr, floor), 100.5)
    axes.set_xlabel("false-positive rate: ham called spam (%, log scale)")
    axes.set_ylabel(f"{positive} recall (%)")
    axes.set_title(f"ROC: AUC {auc:.5f}, (1-ROCA)% {100 * (1 - auc):.3f}")
    axes.grid(True, which="both", alpha=0.3)


def draw_histogram(
    axes: Any,
    odds: np.ndarray,
    pos: np.ndarray,
    positive: str,
    negative: str,
    cutoffs: tuple[float, float] | None,
    whose: str | None = None,
) -> None:
    """Histograms of the log-odds of both classes on shared bins, on the span where nearly
    all of them are (`histogram_span`; the others counted in the end bins), and the cutoffs
    as vertical lines labelled with what they mean ("ham below", "spam from"); ``whose``
    says where the cutoffs come from."""
    lo, hi = histogram_span(odds, cutoffs)
    edges = np.linspace(lo, hi, HISTOGRAM_BINS + 1)
    shown = np.clip(odds, lo, hi)
    ham, _, _ = axes.hist(shown[~pos], bins=edges, alpha=0.6, color="tab:green", label=negative)
    spam, _, _ = axes.hist(shown[pos], bins=edges, alpha=0.6, color="tab:red", label=positive)
    peak = max(float(ham.max()), float(spam.max()))
    if cutoffs is not None:
        if np.isfinite(cutoffs).all() and cutoffs[0] < cutoffs[1]:
            axes.axvspan(*cutoffs, color="grey", alpha=0.12, linewidth=0, label="unsure")
        marks = (
            (cutoffs[0], f"{negative} below {cutoffs[0]:+.1f}", "darkgreen", "--", "right"),
            (cutoffs[1], f"{positive} from {cutoffs[1]:+.1f}", "darkred", ":", "left"),
        )
        for value, text, color, style, side in marks:
            if np.isfinite(value):
                where = (value - lo) / (hi - lo)  # a label near an edge turns inwards
                side = "left" if where < 0.3 else "right" if where > 0.7 else side
                axes.axvline(value, color=color, linestyle=style, linewidth=1.5)
                axes.text(  # the ham label left of its line, the spam label right of its
                    value,
                    0.98,
                    f" {text} ",
                    transform=axes.get_xaxis_transform(),
                    ha=side,
                    va="top",
                    fontsize=8,
                    color=color,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
                )
    axes.set_xlim(lo, hi)
    axes.set_yscale("log")
    axes.set_ylim(0.7, 8 * peak)  # room above the bars for the labels
    axes.set_xlabel(
        f"log-odds {positive} vs {negative} (the middle {100 - 2 * CLIP_PERCENTILE:g}%; "
        "the rest in the end bins)"
    )
    axes.set_ylabel("messages (log scale)")
    title = "Scores of the evaluated messages"
    axes.set_title(title if whose is None else f"{title}\ncutoffs: {whose}", fontsize=10)
    axes.legend(loc="upper left", bbox_to_anchor=(0, 0.9))


def histogram_span(odds: np.ndarray, cutoffs: tuple[float, float] | None) -> tuple[float, float]:
    """The histogram's x axis: from the `CLIP_PERCENTILE` percentile of the log-odds to its
    complement, widened to show the finite cutoffs, with a margin of 5% each side."""
    lo, hi = np.percentile(odds, [CLIP_PERCENTILE, 100 - CLIP_PERCENTILE])
    for value in cutoffs or ():
        if np.isfinite(value):
            lo, hi = min(lo, value), max(hi, value)
    margin = 0.05 * (hi - lo) or 1.0
    return float(lo - margin), float(hi + margin)


def plot_online(scores: Scores, curve: list[dict[str, Any]], path: str) -> None:
    """Write an online evaluation's ROC curve, log-odds histogram and learning curve to
    ``path``: the learning curve is the errors (false positives and negatives) per 1,000
    messages in each block of the stream, and over all the messages so far."""
    fmt = plot_format(path)
    if scores.verdicts is None:
        raise PlotError("the plots need a two-class model (log-odds of a positive class)")
    mask, odds, pos = _two_classes(scores)
    truth = np.array(scores.labels, dtype=object)[mask]
    figure = _figure(16)
    roc_axes, hist_axes, curve_axes = figure.subplots(1, 3)
    draw_roc(roc_axes, odds, pos, scores.positive)
    rule = scores.rules.get(0)
    draw_histogram(
        hist_axes, odds, pos, scores.positive, scores.negative or "", rule and rule.cutoffs
    )
    verdicts = scores.verdicts[mask]
    wrong = (verdicts != truth) & (verdicts != "unsure")
    seen = np.arange(1, wrong.size + 1)
    curve_axes.plot(seen, 1000 * np.cumsum(wrong) / seen, color="tab:blue", label="so far")
    edges = [b["first"] - 1 for b in curve] + [curve[-1]["last"]]
    rates = [b["errors_per_1000"] for b in curve]
    curve_axes.stairs(rates, edges, color="tab:orange", label="in each block")
    curve_axes.set_xlabel("messages scored")
    curve_axes.set_ylabel("errors per 1,000 messages")
    curve_axes.set_title(f"Learning curve: policy {scores.protocol.get('policy', '?')}")
    curve_axes.grid(True, alpha=0.3)
    curve_axes.legend()
    _save(figure, path, fmt)
