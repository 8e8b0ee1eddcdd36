"""Training on a Dask cluster (`train --engine dask`): the same model as `training.train`;
and counting for `evaluate` and scoring for `predict` on one (`count_chunks`, `predict`).

The messages are read here, in input order, and each distinct message is kept once, the
first occurrence winning (by `headers.message_digest`, as `counting.LabelledChunks` does),
in partitions of `parallel.CHUNK` messages. Each partition is sent to the cluster, whose
workers parse, tokenize and count it (`counting.count_chunk`), then, once the number of
messages is known, turn its counts into per-class counts and its share of the
cross-validation sample (`model.SampledRows`: the rows whose number in the stream is a multiple
of the final stride, the smallest power of two that leaves at most `model.CV_ROWS` rows).
The per-class counts are added up in a tree of sparse additions (`counts.ClassCounts.plus`,
over the union of the terms) on the workers. Then `training.decide` runs here, on the
same totals and the same sample as local training, so the terms, counts, digests, auto's
choice, cutoffs and calibration are those local training gives.

Every task is a pure function of what it is sent, so a worker lost mid-run only costs its
tasks being run again elsewhere (by Dask); a run that cannot finish (the scheduler lost,
or no worker left for `NO_WORKERS_TIMEOUT`) ends in one `NbspamError` and writes nothing. Dask is an optional dependency: ``pip install
'dask[distributed]'`` (or ``pip install '.[dask]'`` in nbspam's checkout).

A Dask scheduler can run any code in its clients (its messages hold pickles), so nbspam
talks only to one that proves who it is (`dask_client`): a scheduler it is given must be
``tls://HOST:PORT`` with a certificate signed by the CA the user names, and reaching it
must end within `CONNECT_TIMEOUT`; a local cluster it starts runs in this process, or in
processes that talk TLS on 127.0.0.1 with a certificate made for the run. Dask's log is
kept quiet meanwhile, so that a failure is one line.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ..core.parallel import CHUNK, chunks
from ..core.settings import AUTO, Settings, TokenizerConfig
from ..errors import ConfigError, NbspamError
from ..fit.training import Dates, decide
from ..mail.message import Message
from ..text.counting import ChunkCounts, count_chunk, first_copies

MISSING = "--engine dask needs Dask: pip install 'dask[distributed]' (pipx inject nbspam 'dask[distributed]' under pipx)"
NO_CRYPTOGRAPHY = (
    "--engine dask needs the cryptography package for its local cluster's TLS: "
    "pip install cryptography (pipx inject nbspam cryptography under pipx)"
)
CONNECT_TIMEOUT = 20.0
"""How long, in seconds, reaching a scheduler given by --scheduler may take: the TCP
connection, the TLS handshake and Dask's handshake together."""
NO_WORKERS_TIMEOUT = 60.0
"""How long a run waits, in seconds, while the cluster has no worker, before it fails
(Dask itself would wait for workers for ever)."""
_ADDRESS = re.compile(
    r"tls://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):([0-9]{1,5})"
)


def check_scheduler(address: str) -> None:
    """Refuse (`ConfigError`) a scheduler address nbspam does not connect to: anything but
    ``tls://HOST:PORT``. A scheduler can run any code in the client, so it must prove who
    it is. Plain ``tcp://`` is refused even on 127.0.0.1: any local user can listen on a
    loopback port while the scheduler is down, and be sent the run."""
    if address[:6].lower() == "tcp://":
        raise ConfigError(
            f"--scheduler {address!r} is plain TCP, neither encrypted nor authenticated, "
            "and whoever listens there can run code as you: give tls://HOST:PORT"
        )
    match = _ADDRESS.fullmatch(address)
    if match is None or not 0 < int(match[2]) < 65536:
        raise ConfigError(f"--scheduler must be tls://HOST:PORT, not {address!r}")


def dask_client(
    scheduler: str | None,
    workers: int,
    *,
    ca_file: str | None = None,
    cert: str | None = None,
    key: str | None = None,
) -> Any:
    """A context manager giving a `distributed.Client`: of the cluster at ``scheduler``
    (``tls://HOST:PORT``, trusted through the CA file ``ca_file``, with this client's
    certificate ``cert`` and ``key``; where not given, those of Dask's settings
    ``distributed.comm.tls``), or of a local cluster of ``workers`` worker processes started
    (and stopped) here. Dask's log stays quiet meanwhile: its failures end in one
    `NbspamError`."""
    if scheduler is not None:
        check_scheduler(scheduler)
    try:
        from distributed import Client
    except ImportError:
        raise NbspamError(MISSING) from None

    @contextmanager
    def client() -> Iterator[Any]:
        with _quiet_logs():
            cluster = None
            if scheduler is None:
                cluster = _local_cluster(workers)
                made = Client(cluster)
            else:
                made = _connect(scheduler, _security(ca_file, cert, key))
            try:
                yield made
            finally:
                made.close()
                if cluster is not None:
                    cluster.close()

    return client()


def _security(ca_file: str | None, cert: str | None, key: str | None) -> Any:
    """Dask's `Security` for a client: TLS, the files given, or else Dask's settings."""
    from distributed.security import Security

    given = {"tls_ca_file": ca_file, "tls_client_cert": cert, "tls_client_key": key}
    security = Security(
        require_encryption=True, **{k: v for k, v in given.items() if v is not None}
    )
    if not (security.tls_ca_file and security.tls_client_cert):
        raise ConfigError(
            "--scheduler needs --tls-ca-file (the CA that signed the scheduler's "
            "certificate) and --tls-cert (this client's certificate; --tls-key for its key "
            "if apart), or Dask's distributed.comm.tls settings"
        )
    return security


def _connect(address: str, security: Any) -> Any:
    """A `distributed.Client` of the scheduler at ``address``, or one `NbspamError` within
    `CONNECT_TIMEOUT` seconds. Dask bounds the TCP connection alone: a peer that accepts
    and never answers would keep its handshake waiting for ever."""
    import asyncio

    from distributed import Client

    class BoundedClient(Client):
        async def _start(self, timeout: Any = None, **kwargs: Any) -> Any:
            return await asyncio.wait_for(
                super()._start(timeout=timeout, **kwargs), CONNECT_TIMEOUT
            )

    try:
        return BoundedClient(address, security=security, timeout=CONNECT_TIMEOUT)
    except asyncio.TimeoutError:
        reason = f"no answer in {CONNECT_TIMEOUT:g} s"
    except (OSError, ValueError) as error:
        reason = one_line(error)
    raise NbspamError(f"cannot reach the Dask scheduler {address}: {reason}")


def _local_cluster(workers: int) -> Any:
    """A `LocalCluster` of ``workers`` single-threaded workers that no one else can talk
    to: one worker runs in this process (in-process transport, nothing listens); more are
    processes that talk TLS on 127.0.0.1, with a certificate made for this run alone. The
    HTTP servers Dask always starts listen on 127.0.0.1 and serve nothing."""
    import dask
    from distributed import LocalCluster
    from distributed.security import Security

    options: dict[str, Any] = {"processes": False}
    if workers > 1:
        try:
            security = Security.temporary()
        except ImportError:
            raise NbspamError(NO_CRYPTOGRAPHY) from None
        options = {"host": "127.0.0.1", "protocol": "tls://", "security": security}
    no_routes = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
    with dask.config.set(no_routes):
        return LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            dashboard_address="127.0.0.1:0",  # no fixed port to collide on
            worker_dashboard_address="127.0.0.1:0",
            scheduler_kwargs={"dashboard": False},
            silence_logs=logging.CRITICAL,
            **options,
        )


@contextmanager
def _quiet_logs() -> Iterator[None]:
    """Dask's and tornado's log records dropped for the length of the block: a failure
    of the cluster is one `NbspamError`, not their log on stderr."""
    names = [
        name
        for name in ["distributed", "tornado", *logging.root.manager.loggerDict]
        if name.split(".")[0] in ("distributed", "tornado")
    ]
    loggers = [logging.getLogger(name) for name in dict.fromkeys(names)]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _failed(what: str, client: Any, error: Exception) -> NbspamError:
    """The one error of a run the cluster could not finish: ``what``, and the scheduler
    lost (the client no longer running, a connection closed) or the error a task raised,
    on one line of at most 300 characters of it."""
    if isinstance(error, OSError) or client.status != "running":
        return NbspamError(f"{what}: the connection to the Dask scheduler was lost")
    return NbspamError(f"{what}: {type(error).__name__}: {one_line(error)[:300]}")


def one_line(error: BaseException) -> str:
    """An exception's text on one line (its type where it has none)."""
    return " ".join(str(error).split()) or type(error).__name__


def stride_for(n: int, limit: int) -> int:
    """The stride `model.SampledRows` ends with after n messages: the smallest power of two that
    keeps at most ``limit`` of them (those numbered 0, stride, 2 * stride, ...)."""
    stride = 1
    while -(-n // stride) > limit:
        stride *= 2
    return stride


def summarize(
    counted: ChunkCounts, labels: list[str], first: int, stride: int
) -> tuple[Any, ChunkCounts, list[str], list[int]]:
    """On a worker: a partition's per-class counts (labels in order of first appearance,
    terms in the partition's order), and the rows of it the sample takes (as `ChunkCounts`
    over the same terms), with their labels and numbers in the stream; none with a
    ``stride`` of 0."""
    import numpy as np

    from ..models import naive_bayes as nb
    from ..text.counts import ClassCounts
    from ..text.vocabulary import TermIndex, renumber

    X = renumber(counted, TermIndex(), grow=True)
    order = list(dict.fromkeys(labels))
    y = np.array([order.index(label) for label in labels], np.int64)
    part = ClassCounts(tuple(order), tuple(counted.terms), *nb.class_counts(X, y, len(order)))
    numbers = [first + i for i in range(len(labels)) if stride and (first + i) % stride == 0]
    take = [n - first for n in numbers]
    sizes = list(counted.sizes)
    starts = [0]
    for size in sizes:
        starts.append(starts[-1] + size)
    cols, counts = [], []
    for i in take:
        cols.extend(counted.cols[starts[i] : starts[i + 1]])
        counts.extend(counted.counts[starts[i] : starts[i + 1]])
    sample = ChunkCounts(
        counted.terms,
        type(counted.cols)("i", cols),
        type(counted.counts)("i", counts),
        type(counted.sizes)("i", [sizes[i] for i in take]),
    )
    return part, sample, [labels[i] for i in take], numbers


def add(a: Any, b: Any) -> Any:
    """On a worker: the sum of two partial per-class counts (over the union of terms)."""
    return a.plus(b)


def _tree_sum(client: Any, parts: list[Any]) -> Any:
    """The sum of futures of per-class counts, added pairwise on the cluster."""
    while len(parts) > 1:
        pairs = [
            client.submit(add, parts[i], parts[i + 1], key=_key("add"))
            for i in range(0, len(parts) - 1, 2)
        ]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def _wait(client: Any, futures: list[Any]) -> None:
    """Wait for ``futures``, failing (`NbspamError`) once the cluster has had no worker for
    `NO_WORKERS_TIMEOUT` seconds."""
    from distributed import TimeoutError as Pending
    from distributed import wait

    alone_since = None
    while True:
        try:
            wait(futures, timeout=0.5)
            return
        except Pending:
            pass
        if client.nthreads():
            alone_since = None
            continue
        alone_since = alone_since or time.monotonic()
        if time.monotonic() - alone_since > NO_WORKERS_TIMEOUT:
            raise NbspamError(
                f"the Dask cluster has had no worker for {NO_WORKERS_TIMEOUT:g} s; "
                "nothing was written"
            )


def _result(client: Any, future: Any) -> Any:
    _wait(client, [future])
    return future.result()


def _key(name: str) -> str:
    return f"nbspam-{name}-{uuid.uuid4().hex}"


class Partitions:
    """The distinct messages of a stream in partitions, read here: ``seen`` maps each
    digest to its label (the first occurrence's), ``duplicates`` counts the others, and
    ``labels`` are the labels of the messages kept, in order of first appearance."""

    def __init__(self, messages: Iterable[Message], progress: Callable[[int], None] | None):
        self.seen: dict[bytes, str] = {}
        self.duplicates = 0
        self.total = 0
        self._messages, self._progress = messages, progress

    def __iter__(self) -> Iterator[tuple[list[str], list[bytes | str]]]:
        for chunk in chunks(self._messages, CHUNK):
            fresh = first_copies(chunk, self.seen)
            self.duplicates += len(chunk) - len(fresh)
            if self._progress:
                self._progress(len(chunk))
            if fresh:
                self.total += len(fresh)
                yield [m.label for m in fresh], [m.data for m in fresh]


def train(
    messages: Iterable[Message],
    settings: Settings,
    client: Any,
    *,
    progress: Callable[[int], None] | None = None,
    limit: int | None = None,
) -> Any:
    """Train on a Dask cluster (``client``): the model `training.train` gives for the same
    messages and settings. ``limit`` is the most rows the cross-validation sample keeps
    (`model.CV_ROWS`)."""
    import numpy as np

    from ..errors import TrainingError
    from ..models.model import CV_ROWS, SampledRows, from_counts, utc_timestamp
    from ..text.vocabulary import TermIndex, renumber, sorted_order

    started = time.perf_counter()
    cfg = settings.training
    keep_rows = cfg.calibrate or cfg.event_model == AUTO
    dates = Dates(settings.tokenizer.mail) if keep_rows else None  # read here, as locally
    parts = Partitions(messages if dates is None else dates.reading(messages), progress)
    try:
        counted, labels = [], []
        for part_labels, datas in parts:
            counted.append(_submit_count(client, settings.tokenizer, datas))
            labels.append(part_labels)
        if not counted:
            raise TrainingError("no messages to train on")
        stride = stride_for(parts.total, CV_ROWS if limit is None else limit)
        summaries, first = [], 0
        for future, part_labels in zip(counted, labels):
            summaries.append(
                client.submit(
                    summarize,
                    future,
                    part_labels,
                    first,
                    stride if keep_rows else 0,
                    key=_key("summarize"),
                )
            )
            first += len(part_labels)
        del counted  # the workers may drop a partition's counts once summarized
        partials = [client.submit(_first, s, key=_key("part")) for s in summaries]
        total = _tree_sum(client, partials)
        rest = [client.submit(_rest, s, key=_key("rows")) for s in summaries]
        _wait(client, [total, *rest])
        total = total.result()
        samples = client.gather(rest)
    except NbspamError:
        raise
    except Exception as error:  # a worker or the scheduler lost, a task failed
        raise _failed(
            "training on the Dask cluster failed, no model was written", client, error
        ) from None
    # labels in order of first appearance, as local training has them; terms sorted
    arrival = list(dict.fromkeys(label for part in labels for label in part))
    total = total.in_order(
        [total.labels.index(label) for label in arrival], sorted_order(total.terms)
    )
    info = {
        "created": utc_timestamp(),
        "seconds": round(time.perf_counter() - started, 3),
        "duplicates": parts.duplicates,
    }
    model = from_counts(
        total, settings, info, parts.seen, sorted_terms=True, default_time=int(time.time())
    )
    rows = None
    if keep_rows:
        rows = SampledRows(CV_ROWS if limit is None else limit)
        rows.seen, rows.stride = parts.total, stride
        index = TermIndex(total.terms)
        for sample, sample_labels, numbers in samples:
            if not sample_labels:
                continue
            X = renumber(sample, index, grow=False)
            X = X.__class__(
                (X.data.astype(np.int32), X.indices.astype(np.int32), X.indptr.astype(np.int32)),
                shape=X.shape,
            )
            rows.chunks.append((X, list(sample_labels), np.array(numbers, np.int64)))
        rows.terms, rows.order, rows.totals = total.terms, np.arange(len(total.terms)), total
    return decide(model, rows, settings, dates.of(parts.seen) if dates else None)


def _submit_count(client: Any, tokenizer: TokenizerConfig, datas: list[bytes | str]) -> Any:
    return client.submit(count_chunk, tokenizer, datas, key=_key("count"))


def _first(summary: tuple) -> Any:
    return summary[0]


def _rest(summary: tuple) -> tuple:
    return summary[1:]


# -- counting for evaluate -------------------------------------------------------------------


def count_chunks(
    client: Any,
    items: Iterable[tuple[Any, list[bytes | str]]],
    tokenizer: TokenizerConfig,
    jobs: int | None = None,
    *,
    ahead: int | None = None,
) -> Iterator[tuple[Any, ChunkCounts]]:
    """(tag, counts) for each (tag, messages) chunk, in order, as `counting.count_chunks`
    gives them, counted by the workers of a Dask cluster, at most ``ahead`` chunks (four
    per worker) ahead of the reader. (``jobs`` is the local engine's, unused.)"""
    from collections import deque

    try:
        if ahead is None:
            ahead = 4 * max(1, len(client.scheduler_info()["workers"]))
        pending: deque[tuple[Any, Any]] = deque()
        for tag, datas in items:
            pending.append((tag, _submit_count(client, tokenizer, datas)))
            if len(pending) >= ahead:
                tag, future = pending.popleft()
                yield tag, _result(client, future)
        while pending:
            tag, future = pending.popleft()
            yield tag, _result(client, future)
    except NbspamError:
        raise
    except Exception as error:  # a worker or the scheduler lost, a task failed
        raise _failed("counting on the Dask cluster failed", client, error) from None


# -- batch scoring ---------------------------------------------------------------------------

_SCORERS: dict[str, Any] = {}  # in a worker: the scorer of each model file it was sent


def _scorer(model: bytes, key: str) -> Any:
    """In a worker: the scorer (`array_scoring.load_scorer`) of the model file whose bytes are
    ``model``, made once per worker process."""
    scorer = _SCORERS.get(key)
    if scorer is None:
        import os
        import tempfile

        from .array_scoring import load_scorer

        fd, path = tempfile.mkstemp(suffix=".nbm")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(model)
            scorer = _SCORERS[key] = load_scorer(path)  # read whole into memory
        finally:
            os.unlink(path)
    return scorer


def score_part(model: bytes, key: str, messages: list[Message]) -> list[Any]:
    """In a worker: the predictions of a partition of messages, as `predict` gives them."""
    return list(_scorer(model, key).predict_messages(messages))


def predict(
    model_path: str,
    messages: Iterable[Message],
    client: Any,
    *,
    ahead: int | None = None,
) -> Iterator[Any]:
    """The predictions `array_scoring.load_scorer(model_path).predict_messages` gives, in input
    order, scored by the workers of a Dask cluster (``client``): the model file's bytes are
    sent to every worker once, then partitions of `array_scoring.SCORE_CHUNK` messages, at most
    ``ahead`` (four per worker) at a time, so that memory stays bounded."""
    from collections import deque

    from .array_scoring import SCORE_CHUNK

    with open(model_path, "rb") as f:
        data = f.read()
    key = uuid.uuid4().hex
    try:
        model = client.scatter(data, broadcast=True, hash=False)
        if ahead is None:
            ahead = 4 * max(1, len(client.scheduler_info()["workers"]))
        pending: deque[Any] = deque()
        for part in chunks(messages, SCORE_CHUNK):
            pending.append(client.submit(score_part, model, key, part, key=_key("score")))
            if len(pending) >= ahead:
                yield from _result(client, pending.popleft())
        while pending:
            yield from _result(client, pending.popleft())
    except NbspamError:
        raise
    except Exception as error:  # a worker or the scheduler lost, a task failed
        raise _failed("scoring on the Dask cluster failed", client, error) from None
