"""Output: explanations as text, JSON Lines or TSV, one line at a time; what train and info
say; the evaluation report as text, JSON or Markdown. Predictions are `prediction_lines`',
whose escapes of names that are not UTF-8 these outputs share (`tsv_cell`, `json_line`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence

from ..core.jsonl import json_line
from ..models.decision import cutoff_text
from .prediction_lines import tsv_cell
from .printable import printable

TYPE_CHECKING = False
if TYPE_CHECKING:  # explain needs numpy; render's other outputs need not
    from typing import Any, Literal

    from ..models.explain import ClassTerms, FisherExplanation, MessageExplanation
    from ..models.model import Model

    Format = Literal["text", "jsonl", "tsv"]
    ReportFormat = Literal["text", "json", "markdown"]

REPORT_FORMATS: tuple[str, ...] = ("text", "json", "markdown")


def top_terms(
    groups: Sequence[ClassTerms], labels: Sequence[str], kind: str, fmt: Format
) -> Iterator[str]:
    """The global explanation: per class, its strongest terms with weight and counts."""
    if fmt == "tsv":
        yield "\t".join(["toward", "against", "term", "weight", *[f"{kind}_{x}" for x in labels]])
    for group in groups:
        if fmt == "text":
            yield f"toward {group.toward} (against {group.against}): log-odds weight, {kind} per label"
            yield "  " + "  ".join([f"{'weight':>9}", *[f"{x:>9.9}" for x in labels], "term"])
        for t in group.terms:
            if fmt == "jsonl":
                yield json_line(
                    {
                        "toward": group.toward,
                        "against": group.against,
                        "term": t.term,
                        "weight": t.weight,
                        kind: dict(zip(labels, t.counts)),
                    }
                )
            elif fmt == "tsv":
                yield "\t".join(
                    [
                        tsv_cell(group.toward),
                        tsv_cell(group.against),
                        tsv_cell(t.term),
                        repr(t.weight),
                        *map(str, t.counts),
                    ]
                )
            else:
                counts = [f"{k:>9}" for k in t.counts]
                yield "  " + "  ".join([f"{t.weight:>+9.4f}", *counts, t.term])
        if fmt == "text":
            yield ""


def message_explanation(
    e: MessageExplanation | FisherExplanation, fmt: Format, top: int | None
) -> Iterator[str]:
    """One message's log-odds split into bias and word contributions, largest first (for a
    Robinson–Fisher model, `fisher_explanation`)."""
    if not hasattr(e, "contributions"):
        yield from fisher_explanation(e, fmt, top)
        return
    shown = e.contributions if top is None else e.contributions[:top]
    if fmt == "jsonl":
        yield json_line(
            {
                **_explained(e),
                "bias": e.bias,
                "unknown_tokens": e.unknown_tokens,
                "contributions": [
                    {
                        "term": c.term,
                        "count": c.count,
                        "weight": c.weight,
                        "contribution": c.contribution,
                    }
                    for c in shown
                ],
            }
        )
        return
    if fmt == "tsv":
        yield "\t".join(["path", "term", "count", "weight", "contribution"])
        yield "\t".join([tsv_cell(e.id), "(bias)", "", "", repr(e.bias)])
        for c in shown:
            yield "\t".join(
                [
                    tsv_cell(e.id),
                    tsv_cell(c.term),
                    str(c.count),
                    repr(c.weight),
                    repr(c.contribution),
                ]
            )
        return
    from ..service.explanation_text import explanation_lines

    yield from map(printable, explanation_lines(e, top))


def fpr_text(estimate: dict[str, Any], negative: str) -> str:
    """The false-positive rate the out-of-fold scores give at a model's cutoffs
    (`calibration.expected_fpr`), with its upper bound and the share left unsure; the
    ``negative`` class by its label (ham in mail)."""
    try:
        text = (
            f"{100 * estimate['fpr']:.2f}% of {negative} ({estimate['false_positives']:,} of "
            f"{estimate['ham']:,} out of fold), at most {100 * estimate['fpr_upper']:.2f}% at "
            f"{100 * estimate['confidence']:.0f}% confidence; "
            f"{100 * estimate['unsure_rate']:.1f}% unsure"
        )
    except (KeyError, TypeError, ValueError):  # a model file's info is only JSON
        return "unknown"
    return text


def drift_text(estimate: dict[str, Any], negative: str, positive: str) -> str | None:
    """How far the cutoff of the ``positive`` class was raised for drift
    (`calibration.drift_from_dates`), and from what: a chronological split of the dated
    training messages, or the fixed share; None where the model does not say (cutoffs
    given, or of least cost). The classes by their labels (ham and spam in mail)."""
    drift = estimate.get("drift")
    try:
        share = (
            f"{positive} cutoff raised by {100 * drift['drift']:.1f}% of the {negative}'s spread"
        )
        if "dated" not in drift:
            return share + " (fixed: too few training messages carry a date to measure it)"
        return share + (
            f", measured by date on {drift['dated']:,} messages: {drift['newer_false_positives']:,}"
            f" of the newer {drift['newer_ham']:,} {negative} scored above the cutoff fitted on the "
            "older half"
        )
    except (KeyError, TypeError, ValueError):
        return None


def _explained(e: MessageExplanation | FisherExplanation) -> dict[str, object]:
    """What every explanation of one message says first, as JSON keys."""
    return {
        "path": e.id,
        "verdict": e.verdict or e.label,
        "label": e.label,
        "positive": e.positive,
        "negative": e.negative,
        "log_odds": e.log_odds,
    }


def fisher_explanation(e: FisherExplanation, fmt: Format, top: int | None) -> Iterator[str]:
    """A Robinson–Fisher score from its clues: each clue's f, ln f and ln(1 - f), strongest
    first; their sums, the two chi-square log tails, and logit(I)."""
    shown = e.clues if top is None else e.clues[:top]
    if fmt == "jsonl":
        yield json_line(
            {
                **_explained(e),
                "clues": [
                    {"term": c.term, "f": c.f, "log_f": c.log_f, "log_not_f": c.log_not_f}
                    for c in shown
                ],
                "sum_log_f": e.sum_log_f,
                "sum_log_not_f": e.sum_log_not_f,
                "log_h": e.log_h,
                "log_s": e.log_s,
                "unknown_tokens": e.unknown_tokens,
            }
        )
        return
    if fmt == "tsv":
        yield "\t".join(["path", "term", "f", "log_f", "log_not_f"])
        for c in shown:
            cells = [tsv_cell(e.id), tsv_cell(c.term), repr(c.f), repr(c.log_f), repr(c.log_not_f)]
            yield "\t".join(cells)
        yield "\t".join([tsv_cell(e.id), "(sums)", "", repr(e.sum_log_f), repr(e.sum_log_not_f)])
        return
    from ..service.explanation_text import explanation_lines

    yield from map(printable, explanation_lines(e, top))


def _event_model_settings(cfg: dict[str, Any]) -> str:
    """The event model and the settings it uses, as `info` shows them."""
    name = cfg["event_model"]
    if name == "fisher":
        return (
            f"fisher (strength {cfg['strength']:g}, background {cfg['background']:g}, "
            f"min-dev {cfg['min_dev']:g})"
        )
    presence = (
        " on word presence" if name in ("multinomial", "complement") and cfg["binary"] else ""
    )
    if name == "complement":  # no prior
        normalised = ", weights normalised" if cfg["complement_norm"] else ""
        return f"{name}{presence}, alpha {cfg['alpha']:g}{normalised}"
    return f"{name}{presence}, alpha {cfg['alpha']:g}, prior {cfg['prior']}"


def _selection(cfg: dict[str, Any]) -> str:
    """The cut of --max-features, as `info` shows it ('' for none); a file written before
    --select existed selects by frequency."""
    if cfg["max_features"] is None:
        return ""
    by = "mutual information" if cfg.get("select") == "mi" else "document frequency"
    return f", max-features {cfg['max_features']:,} by {by}"


def auto_lines(auto: dict[str, Any]) -> list[str]:
    """The choice of --event-model auto (a model's ``info["auto"]``, `selection.Choice.info`)
    as a table of the candidates tried, the chosen one marked, each with why it was kept
    or not."""
    if auto.get("chosen") is None:
        return [
            f"event model: {auto.get('event_model')}, the fallback of auto: too few messages "
            f"({auto.get('messages', 0):,}) to choose by cross-validation"
        ]
    from ..fit.selection import MARGIN_CHANGE, MARGIN_MODEL, TIE

    dated = "date" in auto.get("criterion", "")
    lines = [
        f"event model: {auto['chosen']}, chosen by cross-validation ({auto['folds']} folds of "
        f"{auto['messages']:,} messages)"
        + (" and a split by date (each ROC AUC the mean of the two)" if dated else ""),
        "  error: the share of message pairs ranked the wrong way round (1 - ROC AUC); another "
        f"event model must remove {MARGIN_MODEL:.0%} of the best error, a change "
        f"{MARGIN_CHANGE:.0%}",
        f"  {'candidate':<38} {'ROC AUC':>9} {'error %':>8}  verdict",
    ]
    chosen = auto["chosen"].split(" + ")
    best: float | None = None
    for row in auto.get("candidates", []):
        name, auc = row["name"], row["auc"]
        first_round = not name.startswith("+ ")
        mark = "*" if (name == chosen[0] if first_round else name[2:] in chosen[1:]) else " "
        if auc is None:
            lines.append(f"{mark} {name:<38} {'-':>9} {'-':>8}  {row.get('note', '')}")
            continue
        margin = MARGIN_MODEL if first_round else MARGIN_CHANGE
        verdict, best = _verdict(auc, best, margin, TIE)
        lines.append(f"{mark} {name:<38} {auc:>9.5f} {100 * (1 - auc):>8.3f}  {verdict}")
    return lines


def _verdict(auc: float, best: float | None, margin: float, tie: float) -> tuple[str, float]:
    """Why auto kept a candidate or not, against the best so far (as `selection.better`
    judges), and the best after it."""
    if best is None:
        return "the first tried", auc
    gain = (auc - best) / (1.0 - best) if best < 1.0 else 0.0
    if 1.0 - auc < (1.0 - best) * (1.0 - margin) and auc > best + tie:
        return f"better by {gain:.0%}: kept", auc
    if auc > best + tie:
        return f"better by {gain:.0%}, less than the {margin:.0%} a change needs", best
    if auc >= best - tie:
        return "as good, so not taken", best
    return "worse", best


# -- train and info ---------------------------------------------------------------------------


def train_summary(model: Model, output: str, size: int, *, verbose: bool = False) -> list[str]:
    """What `train` says when it is done: what was read, what was chosen, the expected
    false positives, the file written (``size`` bytes) and the next command to try; with
    ``verbose`` also the candidates of auto, the vocabulary, cutoffs and calibration."""
    counts = ", ".join(f"{label} {n:,}" for label, n in zip(model.labels, model.class_count))
    total = int(model.class_count.sum())
    lines = [f"read {total:,} messages ({counts}) in {model.info['seconds']:.1f} s"]
    if model.info.get("duplicates"):
        lines.append(f"{model.info['duplicates']:,} repeated message(s) counted once")
    auto = model.info.get("auto")
    if auto is not None and auto.get("chosen") is not None:
        lines.append(
            f"chose {_plain_choice(auto['chosen'])}, the best of "
            f"{len(auto.get('candidates', []))} settings tried on the messages"
            + ("" if verbose else " (-v shows them)")
        )
    else:
        fallback = (
            f", as {auto.get('messages', 0):,} messages are too few to choose by cross-validation"
            if auto is not None
            else ""
        )
        lines.append(f"model: {_plain_choice(model.training.event_model)}{fallback}")
    if verbose:
        if auto is not None and auto.get("chosen") is not None:
            lines += auto_lines(auto)
        lines.append(
            f"vocabulary: {model.form.kept.size:,} terms kept of {len(model.terms):,} seen "
            f"(min-count {model.training.min_count}{_stop_words(model.training.stop_words)})"
        )
    if model.is_binary:
        negative, positive = model.labels[model.negative_index], model.training.positive
        if verbose:
            lines.append(f"positive class: {positive} (log-odds > 0 point to it)")
            if model.cutoffs is not None:
                lines.append(
                    f"cutoffs: {cutoff_text(negative, positive, model.cutoffs)} "
                    "log-odds, unsure between"
                )
        if model.cutoffs is not None and "cutoffs" in model.info:
            lines.append(f"expected false positives: {fpr_text(model.info['cutoffs'], negative)}")
        if verbose and model.calibration is not None:
            lines.append("calibration: Platt scaling fitted by internal cross-validation")
        drift = drift_text(model.info.get("cutoffs") or {}, negative, positive) if verbose else None
        if drift and model.cutoffs is not None:
            lines.append(f"drift: {drift}")
    lines.append(f"wrote {output} ({size / 1e6:.1f} MB)")
    from shlex import quote

    lines.append(f"next: nbspam predict -m {quote(output)} MESSAGE")
    return lines


#: The event models in plain words.
_PLAIN_MODELS = {
    "multinomial": "the multinomial model (how often each word occurs)",
    "bernoulli": "the Bernoulli model (which words occur)",
    "complement": "the complement model (word counts against the other classes)",
    "complement norm": "the complement model (word counts against the other classes)",
    "fisher": "the Robinson-Fisher scorer (the strongest clues of each message)",
}


def _plain_choice(name: str) -> str:
    """auto's choice ('bernoulli + min-count 2') or an event model in words."""
    model, *changes = name.split(" + ")
    return _PLAIN_MODELS.get(model, model) + "".join(f" with {c}" for c in changes)


def model_info(
    model_path: str,
    header: dict[str, Any],
    model: Model,
    fmt: Literal["text", "json"],
    *,
    sizes: dict[str, int] | None = None,
) -> Iterator[str]:
    """What `info` shows of a model file: labels, counts, vocabulary, settings, history,
    and the bytes each part takes (``sizes``, `modelfile.part_sizes`); ``header`` is the
    file's (`modelfile.read_header`). A pruned model says what is no longer exact."""
    summary = {
        "path": model_path,
        "format_version": header["format_version"],
        "nbspam_version": header["nbspam_version"],
        "labels": {label: int(n) for label, n in zip(model.labels, model.class_count)},
        "positive": model.training.positive,
        "messages": int(model.class_count.sum()),
        "terms_seen": len(model.terms),
        "terms_kept": int(model.form.kept.size),
        "settings": {"train": header["train"], "tokenizer": header["tokenizer"]},
        "cutoffs": header.get("cutoffs"),
        "calibration": header.get("calibration"),
        "history": model.info,
    }
    if sizes is not None:
        summary["sizes"] = sizes
    pruned = "pruned" in model.info or "expired" in model.info
    if pruned:
        from ..service.update import PRUNE_NOTE

        summary["inexact"] = PRUNE_NOTE
    if fmt == "json":
        yield from json_line(summary, indent=2).splitlines()
        return
    train_cfg = header["train"]
    lines = [
        f"model:      {model_path} (format {summary['format_version']}, "
        f"written by nbspam {summary['nbspam_version']})",
        "labels:     "
        + ", ".join(f"{k} {v:,}" for k, v in summary["labels"].items())
        + (f" (positive: {model.training.positive})" if model.is_binary else ""),
        f"vocabulary: {summary['terms_kept']:,} terms kept of {summary['terms_seen']:,} seen",
        f"settings:   {_event_model_settings(train_cfg)}, min-count {train_cfg['min_count']}"
        + _selection(train_cfg)
        + _stop_words(train_cfg.get("stop_words", ())),
    ]
    if model.is_binary:
        negative = model.labels[model.negative_index]
        lines.append(
            "cutoffs:    none (the Bayes decision, no unsure band)"
            if model.cutoffs is None
            else f"cutoffs:    {cutoff_text(negative, model.training.positive, model.cutoffs)} "
            "log-odds, unsure between"
        )
        if model.cutoffs is not None and isinstance(model.info.get("cutoffs"), dict):
            lines.append(f"expected:   {fpr_text(model.info['cutoffs'], negative)}")
            drift = drift_text(model.info["cutoffs"], negative, model.training.positive)
            if drift:
                lines.append(f"drift:      {drift}")
        if model.calibration is not None:
            a, b = model.calibration
            lines.append(
                f"calibrated: P({model.training.positive}) = 1 / (1 + exp(-({a:.5g} log-odds {b:+.5g})))"
            )
    if sizes is not None:
        lines.append(
            f"size:       {sizes['file']:,} bytes: terms {sizes['terms']:,}, counts "
            f"{sizes['counts']:,}, digests {sizes['digests']:,} ({len(model.seen_labels):,} "
            f"messages), scoring table {sizes['scoring']:,}"
        )
    if "auto" in model.info:
        lines += auto_lines(model.info["auto"])
    for key, value in model.info.items():
        count = (
            value.get("terms_dropped", value.get("digests")) if isinstance(value, dict) else None
        )
        if key in ("pruned", "expired") and type(count) is int:
            what = "terms dropped" if key == "pruned" else "digests expired"
            lines.append(f"{key + ':':<11} {count:,} {what}, last on {value.get('last')}")
        elif key in ("auto", "cutoffs"):
            continue
        elif isinstance(value, dict):  # the journal's records and id: words, not a dict
            lines.append(f"{key + ':':<11} " + ", ".join(f"{k} {v}" for k, v in value.items()))
        else:
            lines.append(f"{key + ':':<11} {value}")
    if pruned:
        lines.append(f"inexact:    {summary['inexact']}")
    tok = header["tokenizer"]
    removed = len(tok["stop_words"])
    lines.append(
        "tokenizer:  "
        + ", ".join(
            f"{k} {v}"
            for k, v in tok.items()
            if k not in ("stop_words", "value_headers", "ignore_headers")
        )
        + (f", removes {removed} stop words" if removed else "")
    )
    yield from lines


def _stop_words(words: Sequence[str]) -> str:
    """', N stop words left out', or nothing without stop words."""
    return f", {len(words)} stop words left out" if words else ""


# -- the evaluation report ---------------------------------------------------------------------


class _Grid:
    """A grid of text cells in the report (not a typed table): the first column is aligned
    left, the others right.

    (A plain class: a dataclass costs scoring one message, which imports this module, a
    millisecond.)
    """

    __slots__ = ("header", "rows")

    def __init__(self, header: tuple[str, ...], rows: tuple[tuple[str, ...], ...]) -> None:
        self.header, self.rows = header, rows


_Block = str | _Grid
_Section = tuple[str, list[_Block]]


def render_report(report: dict[str, Any], fmt: ReportFormat) -> Iterator[str]:
    """The report as lines: an aligned plain-text table, JSON, or Markdown."""
    if fmt == "json":
        yield from json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False).splitlines()
        return
    if fmt not in REPORT_FORMATS:
        raise ValueError(f"unknown report format {fmt!r}")
    layout = _markdown_section if fmt == "markdown" else _text_section
    for i, section in enumerate(_sections(report)):
        if i:
            yield ""
        yield from layout(section)


def _text_section(section: _Section) -> Iterator[str]:
    title, blocks = section
    yield title
    for block in blocks:
        if isinstance(block, _Grid):
            yield from ("  " + line for line in _aligned(block))
        else:
            yield "  " + block


def _aligned(grid: _Grid) -> Iterator[str]:
    rows = [grid.header, *grid.rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(grid.header))]
    for row in rows:
        cells = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        yield "  ".join(cells).rstrip()


def _markdown_section(section: _Section) -> Iterator[str]:
    title, blocks = section
    yield f"## {title}"
    for block in blocks:
        yield ""
        if isinstance(block, _Grid):
            yield _markdown_row(block.header)
            yield "|" + "|".join([":---", *["---:"] * (len(block.header) - 1)]) + "|"
            yield from (_markdown_row(row) for row in block.rows)
        else:
            yield block


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _sections(report: dict[str, Any]) -> list[_Section]:
    """The report's content, format-neutral: titled sections of lines and tables."""
    sections = [_overview(report), _classification_section(report), _confusion_section(report)]
    if report["positive"] is not None:
        sections.append(_ranking_section(report))
        if report["cutoffs"] is not None:
            sections.append(_cutoff_section(report))
        if report["calibration"] is not None:
            sections.append(_calibration_section(report))
    if report.get("online") is not None:
        sections.append(_online_section(report["online"]))
    if report["seconds"]:
        times = ", ".join(f"{stage} {s:.1f} s" for stage, s in report["seconds"].items())
        sections.append(("Timings", [times]))
    return sections


def _overview(report: dict[str, Any]) -> _Section:
    counts = report["counts"]
    by_class = counts["by_class"]
    evaluated = ", ".join(f"{c} {v['evaluated']:,}" for c, v in by_class.items())
    lines = [
        report["protocol"].get("description", "evaluation"),
        f"{counts['evaluated']:,} of {counts['messages']:,} messages evaluated: {evaluated}",
    ]
    if counts["evaluated"] < counts["messages"]:
        trained = ", ".join(f"{c} {v['train_only']:,}" for c, v in by_class.items())
        lines.append(f"used only for training: {trained}")
    by_fold = report["protocol"].get("auto_by_fold")
    if by_fold and len(by_fold) == 1:
        lines.append(f"auto chose, on the training part: {next(iter(by_fold.values()))}")
    elif by_fold:
        # folds numbered as in the JSON report and the --scores file
        choices = "; ".join(f"fold {k}: {name}" for k, name in by_fold.items())
        lines.append(f"auto chose, in each fold's training part: {choices}")
    return "Evaluation", lines


def _classification_section(report: dict[str, Any]) -> _Section:
    header = ("class", "precision", "recall", "F1", "support")
    rows = [
        (c, f"{m['precision']:.4f}", f"{m['recall']:.4f}", f"{m['f1']:.4f}", f"{m['support']:,}")
        for c, m in report["per_class"].items()
    ]
    macro = report["macro"]
    total = sum(m["support"] for m in report["per_class"].values())
    rows.append(
        (
            "macro average",
            f"{macro['precision']:.4f}",
            f"{macro['recall']:.4f}",
            f"{macro['f1']:.4f}",
            f"{total:,}",
        )
    )
    summary = f"accuracy {report['accuracy']:.4f}, Matthews correlation {report['mcc']:.4f}"
    return f"Classification ({report['decision']})", [_Grid(header, tuple(rows)), summary]


def _confusion_grid(confusion: dict[str, Any]) -> _Grid:
    header = ("true \\ predicted", *confusion["predicted"])
    rows = tuple(
        (label, *(f"{n:,}" for n in row))
        for label, row in zip(confusion["true"], confusion["matrix"], strict=True)
    )
    return _Grid(header, rows)


def _confusion_section(report: dict[str, Any]) -> _Section:
    return "Confusion matrix (rows: true label, columns: predicted)", [
        _confusion_grid(report["confusion"])
    ]


def _ranking_section(report: dict[str, Any]) -> _Section:
    ranking = report["ranking"]
    title = "Ranking by log-odds"
    if ranking is None:
        return title, ["ROC metrics need messages of both classes among the evaluated ones"]
    line = f"ROC AUC {ranking['roc_auc']:.6f}, (1-ROCA)% {ranking['one_minus_roca_percent']:.4f}"
    header = ("false-positive rate", f"{report['positive']} recall", "log-odds cutoff")
    rows = tuple(
        (f"{100 * r['max_fpr']:g}%", f"{r['recall']:.4f}", _cut(r["threshold"]))
        for r in ranking["recall_at_fpr"]
    )
    return title, [line, _Grid(header, rows)]


def _cut(value: float | str) -> str:
    """A log-odds cutoff for people: signed, three decimals, or +inf / -inf."""
    if isinstance(value, str):
        return value if value.startswith("-") else "+" + value
    return f"{value:+.3f}"


def _cutoff_section(report: dict[str, Any]) -> _Section:
    cut = report["cutoffs"]
    positive = report["positive"]
    negative = next(c for c in report["classes"] if c != positive)
    if "per_fold" in cut:
        pairs = [
            "none"
            if rule["ham_cutoff"] is None
            else f"{_cut(rule['ham_cutoff'])}..{_cut(rule['spam_cutoff'])}"
            for rule in cut["per_fold"].values()
        ]
        whose = (
            "the cutoffs train fits on the warm-up"
            if "online" in report
            else "each fold's own cutoffs, as train fits them on the fold's training part"
        )
        line = (
            f"{whose}: "
            f"{negative} below, {positive} from, unsure between (log-odds): {', '.join(pairs)}"
        )
    else:
        line = (
            f"{negative} below {_cut(cut['ham_cutoff'])}, {positive} from "
            f"{_cut(cut['spam_cutoff'])} (log-odds), unsure between"
        )
    outcome = (
        f"false positives {cut['false_positives']:,}, false negatives "
        f"{cut['false_negatives']:,}, unsure {cut['unsure']:,} ({cut['unsure_rate']:.2%})"
    )
    return "Cutoffs", [line, _confusion_grid(cut["confusion"]), outcome]


def _online_section(online: dict[str, Any]) -> _Section:
    """The learning curve of an online evaluation: errors per block of messages."""
    line = (
        f"policy {online['policy']}: {online['learned']:,} of {online['scored']:,} messages "
        f"learned ({online['learned_wrong']:,} under the wrong label), "
        f"{online['errors']:,} errors, {online['errors_per_1000']:.2f} per 1,000"
    )
    header = ("messages", "false pos.", "false neg.", "unsure", "errors per 1,000", "learned")
    rows = tuple(
        (
            f"{b['first']:,}-{b['last']:,}",
            f"{b['fp']:,}",
            f"{b['fn']:,}",
            f"{b['unsure']:,}",
            f"{b['errors_per_1000']:.1f}",
            f"{b['learned']:,}",
        )
        for b in online["curve"]
    )
    return "Learning curve", [line, _Grid(header, rows)]


def _calibration_section(report: dict[str, Any]) -> _Section:
    cal = report["calibration"]
    positive = report["positive"]
    blocks: list[_Block] = []
    if cal["platt"] is not None:
        blocks.append(
            f"Platt: P({positive}) = 1 / (1 + exp(-(a log-odds + b))), "
            f"a = {cal['platt']['a']:.6g}, b = {cal['platt']['b']:.6g}"
        )
    kinds = [("raw posterior", cal["raw"])]
    if cal["calibrated"] is not None:
        blocks.append(f"calibrated: {cal['calibrated_by']}")
        kinds.append(("calibrated", cal["calibrated"]))
    if cal["note"]:
        blocks.append(f"note: {cal['note']}")
    blocks.append(
        _Grid(
            ("probability", "Brier", "log loss"),
            tuple((name, f"{q['brier']:.5f}", f"{q['log_loss']:.5f}") for name, q in kinds),
        )
    )
    header = [f"P({positive})"]
    for name, _ in kinds:
        short = name.split()[0]
        header += [f"{short} n", f"{short} mean", f"{short} observed"]
    rows = []
    for i, first in enumerate(kinds[0][1]["reliability"]):
        row = [f"{first['lower']:.1f}-{first['upper']:.1f}"]
        for _, quality in kinds:
            b = quality["reliability"][i]
            row += [f"{b['count']:,}", _mean(b["mean_predicted"]), _mean(b["fraction_positive"])]
        rows.append(tuple(row))
    blocks.append(_Grid(tuple(header), tuple(rows)))
    return "Calibration", blocks


def _mean(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


# --------------------------------------------------------------------------------------------
# Table models (`tables`)
# --------------------------------------------------------------------------------------------


def table_train_summary(model: Any, output: str, size: int) -> list[str]:
    """What `train` says about a table model: rows per class, the kind chosen for each
    column (grouped by kind), auto's choice, and the file written."""
    counts = ", ".join(f"{label} {n:,}" for label, n in zip(model.labels, model.class_count))
    lines = [f"trained a table model on {sum(model.class_count):,} rows ({counts})"]
    lines += [f"note: {note}" for note in model.notes]
    by_kind: dict[str, list[str]] = {}
    for c in model.columns:
        kind = c.kind if c.edges is None else "categorical (binned)"
        by_kind.setdefault(kind, []).append(c.name)
    for kind, names in by_kind.items():
        shown = ", ".join(names[:6]) + (f", ... ({len(names) - 6} more)" if len(names) > 6 else "")
        lines.append(f"columns {kind}: {len(names)}: {shown}")
    if model.info.get("auto"):
        lines += table_auto_lines(model.info["auto"])
    if model.is_binary:
        lines.append(f"positive class: {model.positive} (log-odds > 0 point to it)")
        if model.cutoffs is not None:
            lines.append(f"cutoffs: {_table_cutoffs(model)} log-odds, unsure between")
        if model.calibration is not None:
            lines.append("calibration: Platt scaling fitted by internal cross-validation")
    lines.append(f"wrote {output} ({size / 1e6:.1f} MB)")
    return lines


def _table_cutoffs(model: Any) -> str:
    """A two-class table model's cutoffs with the verdicts they give, as a message
    model's: 'a below -0.441, b from +0.379'."""
    negative = next(label for label in model.labels if label != model.positive)
    return cutoff_text(negative, model.positive, model.cutoffs)


def table_auto_lines(auto: dict[str, Any]) -> list[str]:
    """auto's choice for a table model's continuous columns (``info["auto"]``) in words."""
    lines = []
    tried = ", ".join(
        f"{name} {loss:.4f}"
        + (f" (ROC AUC {auto['roc_auc'][name]:.4f})" if "roc_auc" in auto else "")
        for name, loss in auto["log_loss"].items()
    )
    lines.append(
        f"auto chose {auto['chose']} for the continuous columns "
        f"(internal {auto['folds']}-fold log-loss: {tried})"
    )
    if auto.get("columns"):
        changed: dict[str, list[str]] = {}
        for name, how in auto["columns"].items():
            changed.setdefault(how, []).append(name)
        parts = "; ".join(f"{how}: {', '.join(names)}" for how, names in changed.items())
        lines.append(
            f"auto then modelled {len(auto['columns'])} column(s) otherwise, "
            f"internal log-loss {auto['log_loss_mixed']:.4f} ({parts})"
        )
    return lines


def table_model_info(model_path: str, model: Any, size: int, fmt: str) -> Iterator[str]:
    """What `info` shows of a table model: rows per class, each column's kind (and bins),
    the decision rule, its history and the file's size."""
    columns = [
        {"column": c.name, "kind": c.kind, **({"bin_edges": c.edges} if c.edges else {})}
        for c in model.columns
    ]
    summary = {
        "path": model_path,
        "kind": "table",
        "labels": {label: int(n) for label, n in zip(model.labels, model.class_count)},
        "positive": model.positive if model.is_binary else None,
        "label_column": model.label_column,
        "columns": columns,
        "alpha": model.alpha,
        "prior": model.prior if isinstance(model.prior, str) else dict(model.prior),
        "cutoffs": None if model.cutoffs is None else list(model.cutoffs),
        "calibration": None if model.calibration is None else list(model.calibration),
        "history": model.info,
        "bytes": size,
    }
    if fmt == "json":
        yield from json_line(summary, indent=2).splitlines()
        return
    yield f"model:      {model_path} (a table model, {size:,} bytes)"
    yield (
        "labels:     "
        + ", ".join(f"{k} {v:,}" for k, v in summary["labels"].items())
        + (
            f" (positive: {model.positive}; label column {model.label_column})"
            if model.is_binary
            else f" (label column {model.label_column})"
        )
    )
    by_kind: dict[str, list[str]] = {}
    for c in model.columns:
        kind = c.kind if c.edges is None else f"categorical ({len(c.edges) + 1} bins)"
        by_kind.setdefault(kind, []).append(c.name)
    for kind, names in by_kind.items():
        yield f"columns:    {kind}: {', '.join(names)}"
    prior = (
        model.prior
        if isinstance(model.prior, str)
        else ",".join(f"{k}={w:g}" for k, w in model.prior)
    )
    yield f"settings:   alpha {model.alpha:g} (categorical columns), prior {prior}"
    if model.cutoffs is not None:
        yield f"cutoffs:    {_table_cutoffs(model)} log-odds, unsure between"
    if model.calibration is not None:
        a, b = model.calibration
        yield f"calibrated: P({model.positive}) = 1 / (1 + exp(-({a:.5g} log-odds {b:+.5g})))"
    for key, value in model.info.items():
        if key == "auto" and isinstance(value, dict):
            yield from table_auto_lines(value)
        else:
            yield f"{key + ':':<11} {value}"


def unseen_note(unseen: Any) -> str | None:
    """One line on the categories not seen in training that scoring left out, or None."""
    if not unseen:
        return None
    (name, value), _ = unseen.most_common(1)[0]
    columns = len({n for n, _ in unseen})
    return (
        f"{sum(unseen.values()):,} value(s) in {columns} column(s) were categories not seen in "
        f"training and were left out of their rows' scores (e.g. {name}={value!r})"
    )


def table_description(entries: Sequence[dict[str, Any]], fmt: Format) -> Iterator[str]:
    """The global explanation of a table model: per Gaussian column the mean and variance
    per class and the kind of boundary; per categorical column each category's weight."""
    if fmt == "jsonl":
        for entry in entries:
            yield json_line(entry)
        return
    if fmt == "tsv":
        yield "\t".join(["column", "kind", "what", "value"])
        for e in entries:
            for key in ("mean", "variance", "weights", "log_theta"):
                for what, value in e.get(key, {}).items():
                    yield "\t".join(
                        [tsv_cell(e["column"]), e["kind"], tsv_cell(f"{key} {what}"), str(value)]
                    )
        return
    for e in entries:
        if e["kind"] == "gaussian":
            parts = ", ".join(
                f"{label}: mean {e['mean'][label]:.6g} variance {e['variance'][label]:.6g}"
                for label in e["mean"]
            )
            boundary = f" ({e['boundary']} boundary)" if "boundary" in e else ""
            yield f"{e['column']}: gaussian{boundary}: {parts}"
        elif "weights" in e:
            parts = ", ".join(f"{cat} {w:+.4f}" for cat, w in e["weights"].items())
            yield f"{e['column']}: {e['kind']}, log-odds weight per category: {parts}"
        elif "log_theta" in e:
            yield f"{e['column']}: {e['kind']}, {len(e['log_theta'])} categories"
        elif e["kind"] == "text":
            yield f"{e['column']}: text, {e['terms']:,} terms"
        else:
            yield f"{e['column']}: {e['kind']}"


def row_explanation(e: dict[str, Any], fmt: Format, top: int | None) -> Iterator[str]:
    """One row's log-odds split into the bias and each column's contribution."""
    shown = e["contributions"] if top is None else e["contributions"][:top]
    if fmt == "jsonl":
        yield json_line(
            {**e, "contributions": [{"column": n, "contribution": v} for n, v in shown]}
        )
        return
    if fmt == "tsv":
        yield "\t".join(["path", "column", "contribution"])
        yield "\t".join([tsv_cell(e["path"]), "(bias)", repr(e["bias"])])
        for n, v in shown:
            yield "\t".join([tsv_cell(e["path"]), tsv_cell(n), repr(v)])
        return
    yield f"{printable(e['path'])}: log-odds {e['log_odds']:+.4f}"
    yield f"  {e['bias']:>+12.4f}  (bias: the prior)"
    for n, v in shown:
        yield f"  {v:>+12.4f}  {n}"
    hidden = len(e["contributions"]) - len(shown)
    if hidden:
        rest = sum(v for _, v in e["contributions"][len(shown) :])
        yield f"  {rest:>+12.4f}  ({hidden} more columns)"
    yield f"  {e['log_odds']:>+12.4f}  = log-odds"


def model_explanation(
    model: Any, explained: Any, fmt: Format, top: int | None = None
) -> Iterator[str]:
    """`explain` without inputs: each class's terms of most weight (a model of messages) or
    each column's statistics (a table model), as ``model.explain()`` gave them."""
    if model.kind == "table":
        yield from table_description(explained, fmt)
        return
    from ..models.explain import count_kind

    yield from top_terms(explained, model.labels, count_kind(model), fmt)


def input_explanations(explained: Iterable[Any], fmt: Format, top: int | None) -> Iterator[str]:
    """`explain` with inputs: each message's or row's contributions, in turn."""
    for e in explained:
        if isinstance(e, dict):  # a row of a table (`table_model.explain_rows`)
            yield from row_explanation(e, fmt, top)
        else:
            yield from message_explanation(e, fmt, top)


def info(model_path: str, model: Any, facts: dict[str, Any], fmt: str) -> Iterator[str]:
    """What `info` shows of a model file of either kind (`store.kinds.describe`)."""
    if model.kind == "table":
        yield from table_model_info(model_path, model, facts["size"], fmt)
        return
    yield from model_info(model_path, facts["header"], model, fmt, sizes=facts["sizes"])  # type: ignore[arg-type]


def train_summary_of(model: Any, output: str, size: int, *, verbose: bool = False) -> list[str]:
    """What `train` says of the model it wrote, of either kind."""
    if model.kind == "table":
        return table_train_summary(model, output, size)
    return train_summary(model, output, size, verbose=verbose)


def restored_line(output: str, model: Any) -> str:
    """What `restore` says of the model it wrote."""
    if model.kind == "table":
        return (
            f"restored {output}: a table model, {len(model.labels)} classes, "
            f"{len(model.columns)} columns, {sum(model.class_count):,} rows learned"
        )
    return (
        f"restored {output}: {len(model.labels)} classes, {len(model.terms):,} terms, "
        f"{len(model.seen_labels):,} messages learned"
    )
