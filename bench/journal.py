"""What one `learn` costs with the journal beside the model, against rewriting the model.

Trains a model on a corpus (SpamAssassin by default: 6,046 messages), then relabels some
of its messages one at a time (a relabel is the costliest learn) and measures:

* ``journal.learn`` of one message, in this process (the work a learn does beyond the
  start of the process): median and maximum over ``--messages`` learns;
* ``update.update_model_file`` (the old learn: load the model, rewrite it) of one message;
* ``nbspam learn`` of one message as a whole process, and ``python -c pass`` beside it;
* a reader's ``load_model`` with a journal of N records, minus without: the replay cost.

    .venv/bin/python bench/journal.py [--corpus ../shared/corpora/spamassassin] [--messages 20]

Writes only to a temporary folder; the Markdown table goes to stdout.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared/corpora/spamassassin"))
    parser.add_argument("--messages", type=int, default=20)
    args = parser.parse_args()
    from nbspam.mail.messages import Problems, read_labelled
    from nbspam.service import journalled
    from nbspam.service.update import learn, update_model_file
    from nbspam.store import journal
    from nbspam.store.modelfile import load_model

    corpus = Path(args.corpus)
    if not corpus.is_dir():
        sys.exit(f"{corpus} is absent")
    work = Path(tempfile.mkdtemp(prefix="nbspam-bench-journal-"))
    try:
        model = work / "model.nbm"
        subprocess.run(
            [sys.executable, "-m", "nbspam", "train", str(corpus), "-o", str(model)],
            check=True,
            capture_output=True,
        )
        size = model.stat().st_size
        messages = list(read_labelled([str(corpus)], Problems()))[: args.messages]
        rows = []

        def timed(action) -> list[float]:
            out = []
            for m in messages:
                other = "ham" if m.label == "spam" else "spam"
                started = time.perf_counter()
                action(m, other)
                out.append(time.perf_counter() - started)
            return out

        copy = work / "copy.nbm"
        shutil.copy(model, copy)
        one = timed(lambda m, label: journalled.learn(copy, [m], label))
        rows.append(("journal.learn, one message (in process)", one))
        records = len(journal.read(journal.journal_path(copy)).records)
        replay = []
        for _ in range(3):
            started = time.perf_counter()
            load_model(copy)
            with_journal = time.perf_counter() - started
            started = time.perf_counter()
            load_model(model)
            replay.append(with_journal - (time.perf_counter() - started))
        rows.append((f"reader: load_model with {records} records, minus without", replay))
        shutil.copy(model, copy)
        old = timed(lambda m, label: update_model_file(copy, lambda x: learn(x, [m], label)))
        rows.append(("rewrite the model (the learn before the journal)", old))
        shutil.copy(model, copy)
        path = work / "one.eml"
        process = []
        for m in messages[:5]:
            path.write_bytes(m.data)
            label = "ham" if m.label == "spam" else "spam"
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "nbspam", "learn", "-m", str(copy), "-l", label, str(path)],
                check=True,
                capture_output=True,
            )
            process.append(time.perf_counter() - started)
        rows.append(("nbspam learn, one message (whole process)", process))
        start = []
        for _ in range(5):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            start.append(time.perf_counter() - started)
        rows.append(("python -c pass", start))
        print(f"model: {corpus.name}, {size / 1e6:.1f} MB\n")
        print("| what | median ms | max ms | n |\n|---|---|---|---|")
        for what, times in rows:
            ms = [t * 1000 for t in times]
            print(f"| {what} | {statistics.median(ms):.1f} | {max(ms):.1f} | {len(ms)} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
