"""Training's serial parts: what the main process does before its workers start, beside
them, and after the last chunk (docs/speed.md, "Training's serial parts")."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

from nbspam.core.parallel import imap_ordered

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


def _pid(context, work):
    import os

    return os.getpid()


def _pulled(log: list[int], n: int):
    """n items, each noting, as it is taken, how many worker processes this process has."""
    for i in range(n):
        log.append(len(multiprocessing.active_children()))
        yield i, i


def test_the_workers_start_before_the_second_item_is_taken():
    """The pool is forked as soon as the first item exists, and that item handed out, so
    that a training's first chunk is tokenized while its second is read (the second was
    read before any worker started)."""
    log: list[int] = []
    results = imap_ordered(_pid, None, _pulled(log, 5), jobs=2)
    pids = [pid for _, pid in results]
    before = log[0]  # any pool of an earlier test still ending
    assert log[1] == before + 2
    assert len(pids) == 5 and multiprocessing.current_process().pid not in pids


def test_one_item_is_worked_on_by_the_pool():
    """The pool is forked before it is known whether a second item follows."""
    ((tag, pid),) = imap_ordered(_pid, None, _pulled([], 1), jobs=2)
    assert tag == 0 and pid != multiprocessing.current_process().pid
    assert list(imap_ordered(_pid, None, _pulled([], 0), jobs=2)) == []


FORK_PROBE = """
import multiprocessing.pool, sys
from nbspam.cli.fast_start import run

init = multiprocessing.pool.Pool.__init__

def probe(pool, *args, **kwargs):
    print("forked with", sorted(m for m in ("numpy", "scipy") if m in sys.modules), file=sys.stderr)
    init(pool, *args, **kwargs)

multiprocessing.pool.Pool.__init__ = probe
sys.argv = ["nbspam", "train", *sys.argv[1:]]
run()
"""


def _copies(folder: Path, n: int) -> None:
    """n distinct copies of each sample message, under its label."""
    for source in sorted((SAMPLE / "train").glob("*/*")):
        for k in range(n):
            target = folder / source.parent.name / f"{k}-{source.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f"X-Copy: {k}\n".encode() + source.read_bytes())


def test_train_forks_its_workers_before_importing_numpy(tmp_path):
    """numpy and scipy (some 0.3 s of CPU) are imported beside the workers, not before
    them: telling messages from a typed table imported numpy with `text.tables`."""
    _copies(tmp_path / "data", 6)
    model = tmp_path / "m.nbm"
    done = subprocess.run(
        [sys.executable, "-c", FORK_PROBE, str(tmp_path / "data"), "-o", str(model), "--jobs", "2"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "forked with []"
    assert model.exists()


def test_training_digests_each_message_once(monkeypatch, tmp_path):
    """Each message read is digested once, for its copies and its date both: the dates of
    the drift check digested every message a second time (55 ms of the main process's CPU
    on SpamAssassin's 4,836 messages)."""
    import nbspam.mail.headers
    import nbspam.text.counting
    from nbspam.core.settings import build_settings
    from nbspam.fit.training import train
    from nbspam.mail.message import Problems
    from nbspam.mail.messages import read_labelled

    calls = []
    digest = nbspam.mail.headers.message_digest

    def counted(data):
        calls.append(data)
        return digest(data)

    monkeypatch.setattr(nbspam.mail.headers, "message_digest", counted)
    monkeypatch.setattr(nbspam.text.counting, "message_digest", counted)
    messages = list(read_labelled([str(SAMPLE / "train")], Problems()))
    model = train(messages + messages[:5], build_settings({}), jobs=1)  # 5 read twice
    assert len(calls) == len(messages) + 5
    assert model.info["duplicates"] == 5 and model.info["cutoffs"]["drift"]


SAVE_PROBE = """
import sys
from nbspam import api
from nbspam.store.kinds import save

save(api.train([sys.argv[1]]).model, sys.argv[2])
print(sorted(m for m in ("numpy.ma", "scipy.special") if m in sys.modules))
"""


def test_training_and_writing_the_model_leave_numpy_ma_unimported(tmp_path):
    """The term groups of the model file were found with np.unique, which imports numpy.ma
    on first use in numpy 2 (10 ms of training's serial end); scipy.special is the
    cutoffs' bound's."""
    model = tmp_path / "m.nbm"
    done = subprocess.run(
        [sys.executable, "-c", SAVE_PROBE, str(SAMPLE / "train"), str(model)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "['scipy.special']"
