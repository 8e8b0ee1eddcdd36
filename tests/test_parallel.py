"""Any number of jobs gives exactly the result of one."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbspam.core.settings import build_settings
from nbspam.evaluation.evaluation import tokenize_all
from nbspam.mail.message import Message, Problems
from nbspam.mail.messages import read_labelled
from nbspam.models.model import fit_messages, score
from tests.helpers import assert_same_model

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def messages(sample_messages):
    """624 distinct messages (more than two chunks, so that worker processes start)."""
    return [
        Message(f"{m.id}#{n}", f"X-Copy: {n}\n".encode() + m.data, m.label)
        for n in range(13)
        for m in sample_messages
    ]


def test_training_with_two_jobs_equals_one(messages):
    settings = build_settings({})
    one = fit_messages(messages, settings, jobs=1)
    two = fit_messages(messages, settings, jobs=2)
    assert_same_model(one, two)


def test_scoring_with_two_jobs_equals_one(messages):
    model = fit_messages(messages[::7], build_settings({}))
    assert list(score(model, messages, jobs=2)) == list(score(model, messages, jobs=1))


def test_tokenizing_with_two_jobs_equals_one(messages):
    tokenizer = build_settings({}).tokenizer
    one = tokenize_all(messages, tokenizer, jobs=1)
    two = tokenize_all(messages, tokenizer, jobs=2)
    assert one.terms == two.terms and one.ids == two.ids
    assert (one.X != two.X).nnz == 0


def test_counting_workers_import_neither_numpy_nor_scipy():
    """Workers count in plain Python, so that training can import numpy beside them: run
    in this process (one job), counting leaves numpy and scipy unimported."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from nbspam.core.settings import build_settings\n"
        "from nbspam.text.counting import LabelledChunks\n"
        "from nbspam.mail.messages import Problems, read_labelled\n"
        f"messages = read_labelled([{str(SAMPLE / 'train')!r}], Problems())\n"
        "counted = LabelledChunks(messages, build_settings({}).tokenizer, jobs=1)\n"
        "total = sum(len(counts.sizes) for _, counts in counted)\n"
        "print(total, len(counted.seen), sorted(m for m in ('numpy', 'scipy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    n = len(list(read_labelled([str(SAMPLE / "train")], Problems())))
    assert out.stdout.split() == [str(n), str(n), "[]"]


def _ctrl_c_held_back(context, work):
    import signal

    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())


def test_workers_are_born_deaf_to_ctrl_c():
    """Ctrl-C reaches the whole process group: a worker forked before its initializer ignored
    it died of it, and the pool forked a replacement that outlived the command (holding its
    output open, so that a pipe reading it never ended). Workers are forked with it held
    back, and so are the replacements the pool forks from its own thread."""
    from nbspam.core.parallel import imap_ordered

    results = imap_ordered(_ctrl_c_held_back, None, [(n, n) for n in range(6)], jobs=2)
    assert [held for _, held in results] == [True] * 6
