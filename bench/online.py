"""Online evaluation (the TREC spam track's protocol) of nbspam's training policies beside
bogofilter run the same way on the same stream.

    python bench/online.py                                   # the three corpora, ~10 min
    python bench/online.py ../shared/corpora/enron1 --policies errors autolearn
    python bench/online.py CORPUS --no-bogofilter --json online.json

Order: by Date header where nine in ten messages have one (SpamAssassin), else a fixed
shuffle with seed 42 (SMS Spam Collection and Enron1 have no dates). Both tools get the
same stream and the same warm-up (the first 10% of the messages, at most 1,000): nbspam
trains on it as `train` does (which fixes the event model and the cutoffs); bogofilter
registers it in bulk (-s, -n). After it, each message is scored, then learned:

- nbspam: `run_online` with each policy (all, errors, unsure, autolearn);
- bogofilter ``all``: -u (it registers what it scores, unsure ones excepted), then -Ns or -Sn
  to correct an error and -s or -n for an unsure message: every message ends up learned
  with its true label, as nbspam's ``all``;
- bogofilter ``errors``: scored without -u; a misclassified message is registered (-s or
  -n) with its true label, unsure ones are not: as nbspam's ``errors``.

Printed per run: (1-ROCA)% of the scores, errors (false positives and false negatives at
the tool's own cutoffs) per 1,000 messages, the false positives, false negatives and unsure
ones, the messages learned, and the seconds taken.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbspam.core.settings import build_settings  # noqa: E402
from nbspam.evaluation.online import POLICIES, read_stream, run_online, warmup_size  # noqa: E402
from nbspam.fit.metrics import roc_auc  # noqa: E402
from nbspam.mail.headers import message_time  # noqa: E402
from nbspam.mail.message import Problems
from nbspam.mail.messages import read_labelled  # noqa: E402

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
DEFAULT = ["spamassassin", "sms-spam-collection", "enron1"]


def stream_of(root: Path):
    """The corpus as an nbspam stream, by Date where nine in ten messages have one."""
    messages = list(read_labelled([str(root)], Problems()))
    dated = sum(message_time(m.data) is not None for m in messages)
    order = "date" if dated >= 0.9 * len(messages) else "shuffle"
    return read_stream(messages, build_settings({}), order=order, seed=42, jobs=2)


def line(name: str, row: dict) -> str:
    return (
        f"{name:<28} (1-ROCA)% {row['one_minus_roca_percent']:7.3f}  errors/1000 "
        f"{row['errors_per_1000']:6.2f}  FP {row['fp']:>4}  FN {row['fn']:>4}  "
        f"unsure {row['unsure']:>5}  learned {row['learned']:>5}  {row['seconds']:6.1f} s"
    )


def outcome(odds, truth_spam, verdicts, learned: int, seconds: float) -> dict:
    """The row printed for one run: verdicts are 'spam', 'ham' or 'unsure'."""
    fp = int(((verdicts == "spam") & ~truth_spam).sum())
    fn = int(((verdicts == "ham") & truth_spam).sum())
    return {
        "one_minus_roca_percent": 100 * (1 - roc_auc(odds, truth_spam)),
        "errors_per_1000": 1000 * (fp + fn) / len(truth_spam),
        "fp": fp,
        "fn": fn,
        "unsure": int((verdicts == "unsure").sum()),
        "learned": learned,
        "seconds": seconds,
    }


def nbspam_run(stream, policy: str) -> dict:
    started = time.perf_counter()
    result = run_online(stream, build_settings({}), policy=policy)
    scores = result.scores
    mask = scores.evaluated
    truth = np.array(scores.labels, dtype=object)[mask] == scores.positive
    kinds = np.array(
        [
            "spam" if v == scores.positive else "unsure" if v == "unsure" else "ham"
            for v in scores.verdicts[mask]
        ]
    )
    row = outcome(
        scores.log_odds[mask],
        truth,
        kinds,
        result.summary["learned"],
        time.perf_counter() - started,
    )
    row["event_model"] = scores.protocol["event_model"]
    row["learned_wrong"] = result.summary["learned_wrong"]
    return row


def bogofilter_run(stream, mode: str) -> dict:
    """bogofilter online on the stream (module docstring), in its own fresh word list."""
    paths, labels = stream.data.ids, stream.data.labels
    w = warmup_size(len(paths))
    started = time.perf_counter()
    spam = np.array([label == "spam" for label in labels])
    odds, kinds, learned = [], [], 0
    with tempfile.TemporaryDirectory() as wordlist:
        for flag, chosen in (("-s", spam[:w]), ("-n", ~spam[:w])):
            files = [p for p, c in zip(paths[:w], chosen) if c]
            for i in range(0, len(files), 500):
                subprocess.run(
                    ["bogofilter", "-d", wordlist, flag, "-B", *files[i : i + 500]], check=True
                )
        for path, is_spam in zip(paths[w:], spam[w:].tolist()):
            auto = ["-u"] if mode == "all" else []
            done = subprocess.run(
                ["bogofilter", "-d", wordlist, "-TT", *auto, "-I", path],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode not in (0, 1, 2):
                raise SystemExit(f"bogofilter failed on {path}: {done.stderr.strip()}")
            kind = ("spam", "ham", "unsure")[done.returncode]
            odds.append(float(done.stdout.split()[0]) - 0.5)
            kinds.append(kind)
            truth = "spam" if is_spam else "ham"
            register = ["-s"] if is_spam else ["-n"]
            fix = None
            if kind != truth and kind != "unsure":  # an error: both modes learn it
                fix = (["-Sn"] if kind == "spam" else ["-Ns"]) if mode == "all" else register
            elif kind == "unsure" and mode == "all":
                fix = register
            if fix:
                subprocess.run(["bogofilter", "-d", wordlist, *fix, "-I", path], check=True)
            learned += mode == "all" or fix is not None
    return outcome(
        np.array(odds), spam[w:], np.array(kinds), learned, time.perf_counter() - started
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", help="corpus folders (ham/, spam/)")
    parser.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES))
    parser.add_argument("--no-bogofilter", action="store_true")
    parser.add_argument("--json", help="also write every row to this file")
    args = parser.parse_args()
    roots = [Path(c) for c in args.corpora] or [CORPORA / name for name in DEFAULT]
    bogofilter = not args.no_bogofilter and shutil.which("bogofilter") is not None
    rows = []
    for root in roots:
        if not root.is_dir():
            print(f"{root}: not found, skipped", flush=True)
            continue
        stream = stream_of(root)
        n = len(stream.data.ids)
        w = warmup_size(n)
        print(
            f"\n{root.name}: {n:,} messages by {stream.order['by']}, warm-up {w:,}, "
            f"scored {n - w:,}",
            flush=True,
        )
        for policy in args.policies:
            row = nbspam_run(stream, policy)
            print(line(f"nbspam {policy} ({row['event_model']})", row), flush=True)
            rows.append({"corpus": root.name, "tool": "nbspam", "policy": policy, **row})
        if bogofilter:
            for mode in ("all", "errors"):
                row = bogofilter_run(stream, mode)
                print(line(f"bogofilter {mode}", row), flush=True)
                rows.append({"corpus": root.name, "tool": "bogofilter", "policy": mode, **row})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
