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


# -- stopping the workers: never waits on them for ever -----------------------------------------

BIG = 1 << 20  # a result larger than a pipe holds


def _big(context, n):
    return n, bytes(BIG)


@pytest.fixture
def stuck_terminate(monkeypatch):
    """`Pool.terminate` as a Ctrl-C under load found it (py-spy of a hung `train --jobs 2`):
    waiting for ever for the result queue's write lock, which a worker held while blocked
    sending a result larger than the pipe, after the pool's result thread had stopped
    reading. Here the lock is taken before terminate runs, so that it always waits; it is
    let go of at the end of the test. Gives the pools terminated."""
    import multiprocessing.pool

    pools = []
    terminate = multiprocessing.pool.Pool.terminate

    def stuck(pool):
        pool._outqueue._wlock.acquire()
        pools.append(pool)
        terminate(pool)

    monkeypatch.setattr(multiprocessing.pool.Pool, "terminate", stuck)
    yield pools
    for pool in pools:
        pool._outqueue._wlock.release()


def test_a_pool_that_cannot_terminate_has_its_workers_killed(stuck_terminate):
    import threading

    from nbspam.core.parallel import imap_ordered

    results = imap_ordered(_big, None, [(n, n) for n in range(8)], jobs=2)
    assert next(results) == (0, (0, bytes(BIG)))
    closing = threading.Thread(target=results.close, daemon=True)
    closing.start()
    closing.join(30)  # STOP_WAIT (2 s) and the kill; it used to wait for ever
    assert not closing.is_alive()
    (pool,) = stuck_terminate
    assert len(pool._pool) == 2 and not any(worker.is_alive() for worker in pool._pool)


def test_ctrl_c_held_back_while_forking_stops_the_pool(monkeypatch):
    """A Ctrl-C held back while the workers were forked arrives as the mask is restored: the
    pool is stopped then, not left to the program's exit."""
    import multiprocessing.pool
    import signal
    import threading

    from nbspam.core.parallel import imap_ordered

    pools = []
    init = multiprocessing.pool.Pool.__init__

    def ctrl_c_while_forking(pool, *args, **kwargs):
        init(pool, *args, **kwargs)
        pools.append(pool)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # held back

    monkeypatch.setattr(multiprocessing.pool.Pool, "__init__", ctrl_c_while_forking)
    try:
        with pytest.raises(KeyboardInterrupt):
            imap_ordered(_big, None, [(n, n) for n in range(8)], jobs=2)
        (pool,) = pools
        assert len(pool._pool) == 2 and not any(worker.is_alive() for worker in pool._pool)
    finally:
        for pool in pools:
            pool.terminate()


EXIT_PROBE = """
import multiprocessing.pool
from nbspam.core.parallel import imap_ordered

def big(context, n):
    return bytes(1 << 20)

terminate = multiprocessing.pool.Pool.terminate

def stuck(pool):  # as test_parallel.stuck_terminate
    pool._outqueue._wlock.acquire()
    terminate(pool)

multiprocessing.pool.Pool.terminate = stuck
results = imap_ordered(big, None, [(n, n) for n in range(8)], jobs=2)
raise KeyboardInterrupt  # before the results are read: numpy being imported, say
"""


def test_a_program_interrupted_before_reading_the_results_ends():
    """The pool of results never read is stopped as the program exits, before
    multiprocessing's own exit handler, which would wait for ever for a terminate that
    cannot end."""
    import os
    import signal
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-c", EXIT_PROBE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its workers are killed with it if it hangs
    )
    try:
        _, stderr = process.communicate(timeout=30)  # some 2 s; it used to hang
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    assert process.returncode == -signal.SIGINT  # as Python ends on a Ctrl-C not caught
    assert stderr.decode().endswith("KeyboardInterrupt\n")
    with pytest.raises(ProcessLookupError):  # no worker outlives it
        os.killpg(process.pid, 0)


class _SwallowingImport:
    """A module whose loading runs code that drops what it raises, as the initialization of
    numpy's and scipy's compiled modules does; a Ctrl-C comes in the middle of it."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        import signal
        import threading

        try:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        except KeyboardInterrupt:
            pass
        return getattr(self._module, name)


def test_ctrl_c_while_training_imports_numpy_is_not_lost(messages, monkeypatch):
    """A Ctrl-C of `train` while numpy and scipy were imported beside the workers vanished
    in their compiled modules' initialization, and the model was trained and written."""
    import sys

    import nbspam.models.model
    from nbspam.fit.training import train

    loading = _SwallowingImport(nbspam.models.model)
    monkeypatch.setitem(sys.modules, "nbspam.models.model", loading)
    with pytest.raises(KeyboardInterrupt):
        train(messages, build_settings({}), jobs=2)
