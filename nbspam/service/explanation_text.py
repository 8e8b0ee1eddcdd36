"""One message's explanation as the text `nbspam explain` prints and spamd's REPORT sends:
its log-odds as bias and word contributions, or a Robinson–Fisher score from its clues.

Below both front ends, the command line (`render`, which adds JSON Lines and TSV) and the
daemon (`serve.scoring`); standard library only, as the explanations come from `explain`.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..models.decision import cutoff_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # explain needs numpy; what scoring one message imports must not
    from ..models.explain import FisherExplanation, MessageExplanation


def explanation_lines(e: MessageExplanation | FisherExplanation, top: int | None) -> Iterator[str]:
    """The lines of one message's explanation, its ``top`` words or clues (None: all)."""
    if not hasattr(e, "contributions"):
        yield from _fisher_lines(e, top)
        return
    shown = e.contributions if top is None else e.contributions[:top]
    yield f"{e.id}: {e.verdict or e.label} (log-odds {e.positive} vs {e.negative}: {e.log_odds:+.4f}{_by_cutoffs(e)})"
    yield f"  {'contribution':>12}  {'count':>5}  {'weight':>9}  term"
    yield f"  {e.bias:>+12.4f}  {'':>5}  {'':>9}  (bias: prior and absent words)"
    for c in shown:
        yield f"  {c.contribution:>+12.4f}  {c.count:>5}  {c.weight:>+9.4f}  {c.term}"
    hidden = len(e.contributions) - len(shown)
    if hidden:
        rest = sum(c.contribution for c in e.contributions[len(shown) :])
        yield f"  {rest:>+12.4f}  {'':>5}  {'':>9}  ({hidden} more words)"
    yield f"  {e.log_odds:>+12.4f}  {'':>5}  {'':>9}  = log-odds ({e.unknown_tokens} tokens not in the model)"


def _fisher_lines(e: FisherExplanation, top: int | None) -> Iterator[str]:
    """A Robinson–Fisher score from its clues: each clue's f, ln f and ln(1 - f), strongest
    first; their sums, the two chi-square log tails, and logit(I)."""
    shown = e.clues if top is None else e.clues[:top]
    k = len(e.clues)
    yield (
        f"{e.id}: {e.verdict or e.label} (Robinson-Fisher log-odds {e.positive} vs {e.negative}: "
        f"{e.log_odds:+.4f}, {k} clues{_by_cutoffs(e)})"
    )
    yield f"  {'f':>8}  {'ln f':>9}  {'ln(1-f)':>9}  term"
    for c in shown:
        yield f"  {c.f:>8.4f}  {c.log_f:>+9.4f}  {c.log_not_f:>+9.4f}  {c.term}"
    if len(shown) < k:
        yield f"  {'':>8}  {'':>9}  {'':>9}  ({k - len(shown)} more clues)"
    if not k:
        yield f"  no clue: I = 1/2, logit(I) = 0 ({e.unknown_tokens} tokens are no clue)"
        return
    yield f"  {'':>8}  {e.sum_log_f:>+9.4f}  {e.sum_log_not_f:>+9.4f}  = the sums"
    yield (
        f"  ln H = ln Q({-2 * e.sum_log_f:.4f}, {2 * k}) = {e.log_h:.4f}, "
        f"ln S = ln Q({-2 * e.sum_log_not_f:.4f}, {2 * k}) = {e.log_s:.4f}"
    )
    yield (
        f"  logit(I) = {e.log_odds:+.4f}, I = (1 + H - S) / 2 "
        f"({e.unknown_tokens} tokens are no clue)"
    )


def _by_cutoffs(e: MessageExplanation | FisherExplanation) -> str:
    """The cutoffs that gave an explanation's verdict and the Bayes label beside it, for the
    first line of a two-class model's explanation ('' without cutoffs: the verdict is the
    Bayes label)."""
    if e.cutoffs is None:
        return ""
    return f"; {cutoff_text(e.negative, e.positive, e.cutoffs)}; Bayes label {e.label}"
