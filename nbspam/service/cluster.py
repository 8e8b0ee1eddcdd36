"""Training on a Dask cluster (`train --engine dask`): the same model as `training.train`;
and counting for `evaluate` and scoring for `predict` on one (`count_chunks`, `predict`).

The calling process lists the training data into parts (`sources`: paths and byte ranges,
or messages given in memory) and never opens a message; it keeps at most
`WINDOW_PER_WORKER` parts a worker in flight. For each part the workers (`tally`) read,
digest, tokenize and count its distinct messages; fold its digests into buckets of the
digests seen so far, in input order, which tells the part's copies of earlier messages;
and make its per-class counts without them, which are added up in a binary tree of sums
of sorted arrays as the parts finish. Every `CHECKPOINT_PARTS` parts the sum so far and
the buckets are kept by two workers and given back by tasks without a past
(`_checkpoint`), so that the scheduler forgets the tasks of the parts before: a bucket on
the disks of the two workers that fold it (`digestruns`; each makes the same runs from
the checkpoint before and the digests found since, which are all a fold holds in memory),
the sum in their memory. No checkpoint passes through this process or the scheduler, and
results are fetched from the workers, not through the scheduler. The cross-validation sample is the messages of
smallest keyed hash of their digest (`model.sample_key`, as local training draws it), kept
apart from the sums (which carry no rows) in one chain that takes in part after part, in
place (`tally.add_sample`), whose merges not yet done count in the window of parts in
flight; at each checkpoint it is kept on the disks of two workers (`tally.StoredSample`)
and the chain goes on from the one in memory: the cluster holds one sample of the run,
not one in every partial sum nor a checkpoint's copy beside it. Then the model is made here from the total, the digests of the buckets
(fetched `SLICE` at a time into temporary files, `_spool`) and the sample, and
`training.decide` runs on the same totals and sample as local training.

Every task is a pure function of what it is sent (and of the files it reads, or of the
checkpoint its worker keeps; the sample's merges change it in place, and give the same
sample when run again), so a worker lost mid-run only costs its tasks being run
again elsewhere (by Dask: the digests of a bucket found since the last checkpoint are
folded again from those parts, the checkpoint given back by the other worker that keeps
it, which folds the bucket from then on); a run
that cannot finish (the scheduler lost, a checkpoint lost with both its workers, or no
worker left for `NO_WORKERS_TIMEOUT`) ends in one `NbspamError` and writes nothing. Dask
is an optional dependency: ``pip install 'dask[distributed]'`` (or ``pip install
'.[dask]'`` in nbspam's checkout).

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
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import numpy as np

from ..core.parallel import CHUNK, chunks
from ..core.settings import AUTO, Settings, TokenizerConfig
from ..errors import ConfigError, NbspamError, TrainingError
from ..fit.training import decide
from ..mail.message import Message, Problems
from ..models.model import CV_ROWS
from ..text.counting import ChunkCounts, count_chunk
from .digestruns import LostCheckpoint
from .sources import Part

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
    `NbspamError`. Results are fetched from the workers themselves (through the scheduler,
    Dask's default, where a worker cannot be reached), so that they do not pass through
    the scheduler's memory."""
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
                made = Client(cluster, direct_to_workers=True)
            else:
                made = _connect(scheduler, _security(ca_file, cert, key))
            try:
                yield made
            finally:
                _close(made)
                if cluster is not None:
                    cluster.close()

    return client()


def _close(client: Any) -> None:
    """Close a client, whatever its scheduler became: closing one whose scheduler went away
    tries to connect again, which can fail (over TLS, tornado's "IOStream is not idle;
    cannot convert to SSL"), and that failure must not stand in for the run's own outcome,
    its model or its one error."""
    try:
        client.close()
    except (OSError, ValueError):  # Dask's CommClosedError and time-outs are OSErrors
        pass


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
        return BoundedClient(
            address, security=security, timeout=CONNECT_TIMEOUT, direct_to_workers=True
        )
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


def _wait(client: Any, futures: list[Any], *, first: bool = False) -> set[Any]:
    """Wait for ``futures`` (with ``first``, for one of them at least), failing
    (`NbspamError`) once the cluster has had no worker for `NO_WORKERS_TIMEOUT` seconds;
    the futures done."""
    from distributed import TimeoutError as Pending
    from distributed import wait

    when = "FIRST_COMPLETED" if first else "ALL_COMPLETED"
    alone = _Alone(client)
    while True:
        try:
            return set(wait(futures, timeout=0.5, return_when=when).done)
        except Pending:
            alone.check()


def _result(client: Any, future: Any) -> Any:
    """The result of ``future``, failing as `_wait` does. A finished task's data can go
    with its worker and be computed again, so fetching it waits on the cluster too."""
    from distributed import TimeoutError as Pending

    alone = _Alone(client)
    while True:
        _wait(client, [future])
        try:
            return future.result(timeout=0.5)
        except (Pending, TimeoutError):
            alone.check()


class _Alone:
    """How long a cluster has had no worker: `check` fails (`NbspamError`) past
    `NO_WORKERS_TIMEOUT` seconds without one."""

    def __init__(self, client: Any) -> None:
        self.client, self.since = client, None

    def check(self) -> None:
        if self.client.nthreads():
            self.since = None
            return
        self.since = self.since or time.monotonic()
        if time.monotonic() - self.since > NO_WORKERS_TIMEOUT:
            raise NbspamError(
                f"the Dask cluster has had no worker for {NO_WORKERS_TIMEOUT:g} s; "
                "nothing was written"
            )


def _key(name: str) -> str:
    return f"nbspam-{name}-{uuid.uuid4().hex}"


KINDS = (
    *("read", "fold", "losers", "finish", "sample", "report", "merge", "prune"),
    *("keep", "checkpoint", "size", "slice"),
)
"""The kinds of task of `train_parts` (their keys' names)."""


def _groups(client: Any) -> list[Any]:
    """A task of each of `KINDS` that does nothing, for the run to hold while it goes.
    Dask's scheduler makes a task group of the tasks of each kind (by the name of their
    keys, ``nbspam-fold``) and forgets it once its tasks are all done, to make it anew
    with the next: it made one of most kinds at every checkpoint and more between, and
    kept every group it made, for good, in the run's span and computations (and in the
    groups of the tasks that depended on it), some 2 KB each. One task of each kind held,
    each group is made once a run."""
    return [client.submit(_nothing, key=_key(kind)) for kind in KINDS]


def _nothing() -> None:
    return None


@contextmanager
def _span(name: str) -> Iterator[str | None]:
    """The tasks submitted in the block are of one Dask span, ``name``, whose id it gives
    (None with a Dask without spans). Otherwise the scheduler opens a span of its own
    each time it has been idle, and keeps every span it opened for good."""
    try:
        from distributed import span
    except ImportError:  # before distributed 2023.5
        yield None
        return
    with span(name) as made:
        yield made


def _span_collections(span_id: str | None, dask_worker: Any = None) -> None:
    """On the scheduler: the span ``span_id`` keeps one of each of the descriptions of
    what was submitted in it. Dask adds one for every submission (each ``{"type":
    "Future"}``, some 300 bytes), for good: about ten a part."""
    spans = getattr(dask_worker, "extensions", {}).get("spans")
    span = spans.spans.get(span_id) if spans is not None and span_id else None
    metadata = getattr(span, "_metadata", None)
    if metadata and isinstance(metadata.get("collections"), list):
        kept: list[Any] = []
        for collection in metadata["collections"]:
            if collection not in kept:
                kept.append(collection)
        metadata["collections"][:] = kept


WINDOW_PER_WORKER = 2
"""Parts in flight per worker: the calling process submits no more until one is done (its
report taken, and its part taken into the sample)."""
CHECKPOINT_PARTS = 32
"""Parts between checkpoints: there the calling process fetches the buckets of digests and
the sum so far, and sends them back as tasks of their own, so that the scheduler can forget
the tasks of the parts before (Dask keeps every task whose result a later one was made of,
to make it again if a worker is lost)."""


def train(
    messages: Iterable[Message],
    settings: Settings,
    client: Any,
    *,
    progress: Callable[[int, int], None] | None = None,
    limit: int | None = None,
    min_docs: int | None = None,
    max_terms: int | None = None,
) -> Any:
    """Train on a Dask cluster (``client``) on messages given in memory (they travel in
    their partitions): the model `training.train` gives for the same messages and
    settings. ``limit`` is the most rows the cross-validation sample keeps
    (`model.CV_ROWS`); ``min_docs`` and ``max_terms`` as for `train_parts`."""
    from .sources import inline_parts

    return train_parts(
        inline_parts(messages, CHUNK),
        settings,
        client,
        progress=progress,
        limit=limit,
        min_docs=min_docs,
        max_terms=max_terms,
    )


def train_parts(
    parts: Iterable[Part],
    settings: Settings,
    client: Any,
    *,
    progress: Callable[[int, int], None] | None = None,
    problems: Problems | None = None,
    limit: int | None = None,
    min_docs: int | None = None,
    max_terms: int | None = None,
) -> Any:
    """Train on a Dask cluster (``client``) on the partitions ``parts`` (`sources`), which
    its workers read: the model `training.train` gives for the same messages and settings
    (with ``min_docs`` or ``max_terms``, that model's terms, counts and digests pruned as
    `update.prune` prunes them, on the worker that makes the last sum, and its decision
    rule fitted on the pruned counts). What the workers could not read is reported to
    ``problems``, the number of messages read and their bytes to ``progress``."""
    from .tally import (
        add_sample,
        finish,
        fold,
        losers,
        merge,
        prune_terms,
        read_counts,
        report,
        with_sample,
    )

    started = time.perf_counter()
    cfg = settings.training
    keep_rows = cfg.calibrate or cfg.event_model == AUTO
    limit = CV_ROWS if limit is None else limit
    take = limit if keep_rows else 0
    levels: dict[int, Any] = {}

    def add_up(tally: Any, level: int = 0) -> None:
        # a binary counter of partial sums: at most one a level, log2(parts) in all
        while level in levels:
            tally = client.submit(merge, levels.pop(level), tally, 0, key=_key("merge"))
            level += 1
        levels[level] = tally

    def add_all() -> Any:
        # the sum of the partial sums (and of the last checkpoint's), or None
        sums = [levels.pop(level) for level in sorted(levels)]
        total = base
        for other in sums:
            if total is not None:
                other = client.submit(merge, total, other, 0, key=_key("merge"))
            total = other
        return total

    base: Any = None  # the sum of the parts before the last checkpoint
    sampled: Any = None  # the sample so far, a chain apart from the sums (`add_sample`)
    chain: deque[Any] = deque()  # its last merges (one sample, changed in place), not all done
    tokens: list[str] = []  # what the workers keep of the last checkpoint
    groups: list[Any] = []  # a task of each kind, held: one task group of each a run
    spans = ExitStack()
    span = spans.enter_context(_span("nbspam-train"))  # the run's tasks are of one span
    try:
        client.run(_allocator, on_error="ignore")
        client.run(_profiler, False, on_error="ignore")
        _short_logs(client, LOG_LENGTH)
        groups = _groups(client)
        names = sorted(client.scheduler_info()["workers"])
        workers = max(1, len(names))
        buckets, window = max(2, workers), WINDOW_PER_WORKER * workers
        states: list[Any] = [None] * buckets
        # the workers that keep each bucket's checkpoint on their disk, and fold it; any (None)
        # where the client's view of the cluster, refreshed from time to time, names no
        # worker yet (a cluster starting): the first checkpoint picks two then
        holders: list[list[str] | None] = [
            sorted({names[b % workers], names[(b + 1) % workers]}) if names else None
            for b in range(buckets)
        ]
        pending: dict[Any, Any] = {}  # a part's report -> its tally
        for number, part in enumerate(parts):
            counted = client.submit(read_counts, settings.tokenizer, part, number, key=_key("read"))
            lost = []
            for b in range(buckets):
                states[b] = client.submit(
                    *(_here, fold, states[b], counted, b, buckets),
                    key=_key("fold"),
                    **_on(holders[b]),
                )
                lost.append(client.submit(losers, states[b], key=_key("losers")))
            tally = client.submit(finish, counted, lost, take, key=_key("finish"))
            if take:
                sampled = client.submit(add_sample, sampled, tally, take, key=_key("sample"))
                chain.append(sampled)
            pending[client.submit(report, counted, key=_key("report"))] = tally
            del counted, lost, tally
            while len(pending) >= window:
                _take_reports(client, pending, add_up, progress, problems)
            while len(chain) >= window:  # the parts' tallies waiting for the chain
                _wait(client, [chain.popleft()])
            if (number + 1) % CHECKPOINT_PARTS == 0:
                while pending:
                    _take_reports(client, pending, add_up, progress, problems)
                chain.clear()
                ours = [] if sampled is None else [sampled]
                made, tokens, kept_at = _checkpoint(
                    client,
                    [add_all(), *ours, *states],
                    [None] * (1 + len(ours)) + holders,
                    tokens,
                )
                base, states, holders = made[0], made[-buckets:], kept_at[-buckets:]
                sampled = made[1] if ours else None
                del ours
                client.run_on_scheduler(_span_collections, span)
        while pending:
            _take_reports(client, pending, add_up, progress, problems)
        total = add_all()
        base = None
        if total is None:
            raise TrainingError("no messages to train on")
        if sampled is not None:
            total = client.submit(with_sample, total, sampled, key=_key("sample"))
            sampled = None
        if min_docs is not None or max_terms is not None:
            total = client.submit(prune_terms, total, min_docs, max_terms, key=_key("prune"))
        states, last, holders = _checkpoint(client, states, holders, [])
        tokens += last
        _wait(client, [total, *states])
        tally = _result(client, total)
        del total
        now = int(time.time())
        digests = _spool(client, states, holders, tuple(sorted(tally.labels)), now)
        del states
    except NbspamError:
        raise
    except Exception as error:  # a worker or the scheduler lost, a task failed
        raise _failed(
            "training on the Dask cluster failed, no model was written", client, error
        ) from None
    finally:
        levels.clear()
        chain.clear()
        base = sampled = None
        groups.clear()
        release(client, tokens, span)
        spans.close()
    return _model(tally, digests, settings, started, keep_rows, limit, now)


def _checkpoint(
    client: Any, futures: list[Any], where: list[list[str] | None], dropped: list[str]
) -> tuple[list[Any], list[str], list[list[str]]]:
    """Tasks without a past that give the results of ``futures`` (done), the tokens they
    are kept under, and the workers that keep each. Each result is kept (`_keep`) by the
    workers of ``where`` still in the cluster (None: the first two), never through the
    scheduler or this process: a bucket of digests on their disks, from the checkpoint
    before that they keep and the digests found since (`digestruns.keep`), a sum in their
    memory (moved from worker to worker by Dask). The new tasks (`_kept`) give it back from
    there, so the scheduler forgets the tasks it was made of. A worker lost costs a rerun
    of `_kept` on the other; a result lost with every worker that kept it fails the run
    (`LostCheckpoint`). The checkpoint before, whose tokens are ``dropped``, is let go on
    every worker."""
    _wait(client, futures)
    alive = sorted(client.scheduler_info()["workers"])
    chosen = [[w for w in given if w in alive] or given if given else alive[:2] for given in where]
    tokens = [uuid.uuid4().hex for _ in futures]
    try:
        made, holders = _keep_all(client, futures, tokens, chosen)
    except BaseException:  # what this checkpoint kept so far goes with the run
        release(client, tokens)
        raise
    client.run(_drop, dropped, on_error="ignore")  # a worker lost has nothing to drop
    client.run(_trim, on_error="ignore")
    _forget_keys()
    client.run_on_scheduler(_forget_keys)
    client.run(_forget_keys, on_error="ignore")
    return made, tokens, holders


def _forget_keys() -> None:
    """In a Dask process (this one, the scheduler, a worker): Dask's cache of the group
    name of each task key it has seen (`dask.utils.key_split`, up to 100,000 keys, some
    170 bytes each with the key it keeps: about ten keys a part, so it grew with the
    parts up to some 10^7 messages, 17 MB) emptied, at each checkpoint."""
    from dask.utils import key_split

    clear = getattr(key_split, "cache_clear", None)
    if clear is not None:
        clear()


def _keep_all(
    client: Any, futures: list[Any], tokens: list[str], chosen: list[list[str]]
) -> tuple[list[Any], list[list[str]]]:
    """`_checkpoint`'s results kept under ``tokens`` by the workers ``chosen`` for each,
    and given back by tasks without a past: those tasks, and the workers that keep each."""
    keeps = [
        [
            client.submit(
                *(_keep, future, token, w), key=_key("keep"), workers=[w], allow_other_workers=True
            )
            for w in workers
        ]
        for future, token, workers in zip(futures, tokens, chosen)
    ]
    holders = [sorted({_result(client, keep) for keep in kept} - {None}) for kept in keeps]
    del keeps
    if not all(holders):
        raise LostCheckpoint("a checkpoint was lost with the workers that kept it")
    made = [
        client.submit(
            *(_kept, token, tuple(at)), key=_key("checkpoint"), workers=at, allow_other_workers=True
        )
        for token, at in zip(tokens, holders)
    ]
    _wait(client, made)
    return made, holders


_KEPT: dict[str, Any] = {}
"""In a worker: the sums of the checkpoints it keeps a copy of, by token (`_checkpoint`),
and their samples (on its disk: `tally.StoredSample`); the buckets of digests are
`digestruns.BASES`."""


def _keep(value: Any, token: str, where: str) -> str | None:
    """In a worker (``where``, or another where Dask moved the task): keep ``value`` under
    ``token`` (a bucket of digests or a sample on its disk); the worker's address, or None where a
    bucket cannot be kept (this worker does not keep the checkpoint before, ``where``
    lost)."""
    from distributed import Reschedule, get_worker

    from . import digestruns
    from .tally import Bucket, Reservoir, StoredSample

    here = get_worker().address
    if isinstance(value, Bucket):
        if here != where and where in _workers():
            raise Reschedule()  # work stealing moved it: back to where it is kept
        if value.base is not None and value.base not in digestruns.BASES:
            return None
        digestruns.keep(token, value.base, value.fresh, value.labels, value.size)
    elif isinstance(value, Reservoir):  # on disk: the chain goes on from the one in memory
        _KEPT[token] = StoredSample(value)
    else:
        _KEPT[token] = value
    return here


def _kept(token: str, holders: tuple[str, ...]) -> Any:
    """In a worker: the value kept under ``token`` (a bucket: its name on the disks of
    ``holders``)."""
    from . import digestruns
    from .tally import Bucket, StoredSample

    if token in _KEPT:
        value = _KEPT[token]
        return value.get() if isinstance(value, StoredSample) else value
    kept = _here(digestruns.base, token, holders)
    return Bucket(token, [], kept.labels, kept.size, holders=holders)


def _here(function: Callable[..., Any], *args: Any) -> Any:
    """In a worker: ``function(*args)``. Where it needs a bucket of digests (or a sum)
    that this worker does not keep (`digestruns.NotHere`: Dask moved the task here, by
    work stealing or because the workers that keep it were lost), the task is given back
    to the scheduler, which runs it again on one of those that keep it (Dask's
    `Reschedule`: the tasks are restricted to them, loosely); with none of them left,
    the checkpoint is lost (`LostCheckpoint`)."""
    from distributed import Reschedule

    from .digestruns import NotHere

    try:
        return function(*args)
    except NotHere as missing:
        if set(missing.holders) & _workers():
            raise Reschedule() from None
        raise


def _workers() -> set[str]:
    """In a worker: the workers of its cluster."""
    from distributed import get_client

    return set(get_client().scheduler_info()["workers"])


def _drop(tokens: list[str]) -> None:
    """In a worker: let the values kept under ``tokens`` go."""
    from . import digestruns

    for token in tokens:
        _KEPT.pop(token, None)
    digestruns.drop(tokens)


SLICE = 1 << 16
"""Digests the calling process fetches at a time when it spools them (1.25 MiB)."""


def _on(where: list[str] | None) -> dict[str, Any]:
    """`Client.submit`'s arguments for a task run on one of the workers ``where`` (or on
    another, where Dask must), or on any (None)."""
    return {} if where is None else {"workers": where, "allow_other_workers": True}


def _spool(
    client: Any,
    states: list[Any],
    holders: list[list[str] | None],
    labels: tuple[str, ...],
    now: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The digests of the buckets ``states`` (sorted: the buckets are ranges of them, in
    order), the label of each (an index into ``labels``) and its learn time ``now``,
    fetched `SLICE` at a time into temporary files (unnamed, this process's alone) and
    mapped from there: the model's digests, which this process never holds whole."""
    import tempfile

    from .tally import bucket_labels, bucket_slice

    def on(where: list[str] | None, *task: Any, name: str) -> Any:  # a worker that keeps it
        return client.submit(*task, key=_key(name), **_on(where))

    names = [_result(client, on(w, bucket_labels, s, name="size")) for s, w in zip(states, holders)]
    n = sum(size for size, _ in names)
    if not n:
        return np.zeros((0, 16), np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64)
    files: list[Any] = []
    try:
        files += [tempfile.TemporaryFile() for _ in range(3)]
        for state, where, (size, mine) in zip(states, holders, names):
            remap = np.array([labels.index(x) for x in mine], "<i4")
            for start in range(0, size, SLICE):
                part = on(where, _here, bucket_slice, state, start, start + SLICE, name="slice")
                digests, codes = _result(client, part)
                del part
                files[0].write(np.ascontiguousarray(digests, np.uint8).tobytes())
                files[1].write(remap[codes].astype("<i4").tobytes())
                files[2].write(np.full(len(codes), now, "<i8").tobytes())
                del digests, codes
        for f in files:
            f.flush()
        return (
            np.memmap(files[0], "|u1", "r", shape=(n, 16)),
            np.memmap(files[1], "<i4", "r", shape=(n,)),
            np.memmap(files[2], "<i8", "r", shape=(n,)),
        )
    except OSError as error:  # the disk, not the cluster
        raise TrainingError(
            f"cannot keep the {n:,} digests in a temporary file in {tempfile.gettempdir()}: "
            f"{error.strerror or error}; nothing was written"
        ) from None
    finally:  # the mappings keep the files until they go
        for f in files:
            try:
                f.close()
            except OSError:  # what it could not write: already said
                pass


def _take_reports(
    client: Any,
    pending: dict[Any, Any],
    add_up: Callable[[Any], None],
    progress: Callable[[int, int], None] | None,
    problems: Problems | None,
) -> None:
    """Wait for the reports of one or more parts in flight, pass them on, and add their
    tallies up."""
    for done in _wait(client, list(pending), first=True):
        read, size, lines = _result(client, done)
        if problems is not None:
            for where, reason in lines:
                if reason is None:
                    problems.note(where)
                else:
                    problems.skip(where, reason)
        if progress:
            progress(read, size)
        add_up(pending.pop(done))


def _model(
    tally: Any,
    digests: tuple[Any, Any, Any],
    settings: Settings,
    started: float,
    keep_rows: bool,
    limit: int,
    now: int,
) -> Any:
    """The model of the cluster's total, with the cross-validation sample and the
    decision rule (`training.decide`), as local training makes it."""
    import dataclasses

    import numpy as np
    import scipy.sparse as sp

    from ..models.model import SampledRows, from_counts, utc_timestamp
    from ..text.counts import ClassCounts

    if tally.read - tally.duplicates <= 0:
        raise TrainingError("no messages to train on")
    terms, place = tally.vocab.terms()
    order = np.empty(len(place), np.int64)
    order[place] = np.arange(len(place))
    arrival = sorted(range(len(tally.labels)), key=lambda c: int(tally.first[c]))
    total = ClassCounts(
        tuple(tally.labels[c] for c in arrival),
        tuple(terms),
        tally.class_count[arrival],
        tally.term_count[np.ix_(arrival, order)],
        tally.doc_count[np.ix_(arrival, order)],
    )
    info: dict[str, Any] = {
        "created": utc_timestamp(),
        "seconds": round(time.perf_counter() - started, 3),
        "duplicates": tally.duplicates,
    }
    if tally.pruned:  # as `update.prune` records it
        info["pruned"] = {"terms_dropped": tally.pruned, "last": info["created"]}
    model = from_counts(total, settings, info, None, sorted_terms=True, default_time=now)
    seen, codes, times = digests  # `_spool`: the codes index the sorted labels, the model's
    model = dataclasses.replace(model, seen_digests=seen, seen_labels=codes, seen_times=times)
    rows = None
    if keep_rows:
        sample = tally.sample
        columns, found = sample.vocab.columns_in(tally.vocab)
        columns = np.where(found, place[np.minimum(columns, max(len(place) - 1, 0))], -1)
        indices = columns[sample.indices]
        known = indices >= 0
        n = len(sample.labels)
        sizes = np.bincount(np.repeat(np.arange(n), np.diff(sample.indptr))[known], minlength=n)
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=indptr[1:])
        X = sp.csr_matrix(
            (
                sample.data[known].astype(np.int32),
                indices[known].astype(np.int32),
                indptr.astype(np.int32),
            ),
            shape=(n, len(terms)),
        )
        rows = SampledRows(limit)
        rows.seen = tally.read - tally.duplicates
        if n:
            rows.chunks.append((X, list(sample.labels), sample.positions))
        rows.terms, rows.order, rows.totals = total.terms, np.arange(len(terms)), total
        return decide(model, rows, settings, sample.times.tolist())
    return decide(model, rows, settings)


def release(client: Any, tokens: list[str] | None = None, span: str | None = None) -> None:
    """Have the workers let go the checkpoint kept under ``tokens`` and give the memory of
    a run back to the system (a Python process keeps what it freed otherwise), and the
    scheduler the run's span ``span`` but one of each of its descriptions
    (`_span_collections`); a cluster that cannot is left as it is."""
    try:
        client.run(_drop, tokens or [])
        client.run(_trim, on_error="ignore")
        client.run(_profiler, True, on_error="ignore")
        client.run_on_scheduler(_span_collections, span)
    except Exception:  # noqa: BLE001 - a lost cluster has nothing to give back
        pass
    _short_logs(client, None)


LOG_LENGTH = 100
"""Entries each of Dask's low-level logs keeps for the length of a run (Dask's own length,
``distributed.admin.low-level-log-length``, is 1,000), in this process's client, the
scheduler and each worker: the messages each sent (a batch a line: the scheduler's to each
worker hold the tasks it sent, some 9 KB a batch of nbspam's), the scheduler's events (one
an update of its graph, about ten a part) and transitions, a worker's stimuli and
transfers. With 1,000 entries they filled up over the first 300 parts or so (4 * 10^5
messages), to some 19 MB on the scheduler with two workers, 6 MB in this process and 3
MB in each worker, so each process's peak grew with the messages until then; with 100,
they are full after the first ten parts."""


def _short_logs(client: Any, length: int | None) -> None:
    """Dask's low-level logs cut to ``length`` entries (`LOG_LENGTH`) in this process's
    ``client``, on the scheduler and on each worker, or given back Dask's own length
    (None); a cluster that cannot is left as it is."""
    _logs(length, client)
    try:
        client.run_on_scheduler(_logs, length)  # Dask passes the scheduler as dask_worker
        client.run(_logs, length, on_error="ignore")
    except Exception:  # noqa: BLE001 - a lost cluster: nothing to cut or give back
        pass


def _logs(length: int | None, dask_worker: Any = None) -> None:
    """In a Dask process: the low-level logs of ``dask_worker`` (the scheduler, a worker,
    or a client) cut to ``length`` entries, the newest kept, or given back Dask's own
    length (None). Each is a deque that Dask only appends to, so a new one of another
    length takes its place; new topics of the scheduler's events get the same."""
    from functools import partial

    import dask

    full = dask.config.get("distributed.admin.low-level-log-length")
    size = full if length is None else min(length, full)
    server = dask_worker
    comms = [getattr(server, name, None) for name in ("scheduler_comm", "batched_stream")]
    for name in ("stream_comms", "client_comms"):  # the scheduler's, to workers and clients
        comms += list(getattr(server, name, {}).values())
    held = [(comm, "recent_message_log") for comm in comms if comm is not None]
    for holder, names in (
        (server, ("transition_log", "transfer_incoming_log", "transfer_outgoing_log")),
        (getattr(server, "state", None), ("log", "stimulus_log")),  # a worker's state machine
    ):
        held += [(holder, name) for name in names if hasattr(holder, name)]
    topics = getattr(getattr(server, "_broker", None), "_topics", None)  # scheduler's events
    if topics is not None:
        held += [(topic, "events") for topic in topics.values()]
        if isinstance(topics.default_factory, partial):
            topics.default_factory = partial(topics.default_factory.func, maxlen=size)
    for holder, name in held:
        log = getattr(holder, name)
        if isinstance(log, deque) and log.maxlen != size:
            setattr(holder, name, deque(log, maxlen=size))


MMAP_THRESHOLD = 1 << 16
"""Bytes from which a worker's glibc malloc gives a block a mapping of its own (returned to
the system when freed): glibc's default moves this threshold up to 32 MiB as blocks are
freed, after which the arrays of every part are carved from heaps that it keeps, and a
worker's peak grew with the parts it had counted."""


def _allocator() -> None:
    """In a worker: its allocator set as `MMAP_THRESHOLD` says (glibc alone), for good."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD, fixed
        libc.mallopt(-1, 4 * MMAP_THRESHOLD)  # M_TRIM_THRESHOLD: heaps' free tops go back
    except (OSError, AttributeError):  # not glibc
        pass


PROFILER = ("profile", "profile-cycle")
"""A Dask worker's statistical profiler (for its dashboard): a sample of the running
task's stack every 10 ms, and every second a tree of them kept in a history of the last
1,000 (about 40 KB a second of nbspam's tasks, so 40 MB after 17 minutes of a run, where
it stops growing). `train_parts` pauses it on the workers for the length of a run, so that
a worker's memory does not grow with the length of the run."""


def _profiler(on: bool, dask_worker: Any = None) -> None:
    """In a worker: its statistical profiler paused (``on`` False) or started again."""
    for name in PROFILER:
        callback = getattr(dask_worker, "periodic_callbacks", {}).get(name)
        if callback is not None and callback.is_running() != on:
            callback.start() if on else callback.stop()


def _trim() -> None:
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _submit_count(client: Any, tokenizer: TokenizerConfig, datas: list[bytes | str]) -> Any:
    return client.submit(count_chunk, tokenizer, datas, key=_key("count"))


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


def _scorer(model: bytes, journal: bytes | None, key: str) -> Any:
    """In a worker: the scorer (`array_scoring.load_scorer`) of the model file whose bytes are
    ``model`` with the journal whose bytes are ``journal`` (None: none), made once per
    worker process."""
    scorer = _SCORERS.get(key)
    if scorer is None:
        import os
        import shutil
        import tempfile

        from .array_scoring import load_scorer

        folder = tempfile.mkdtemp(prefix="nbspam-model-")
        path = os.path.join(folder, "model.nbm")
        try:
            for name, data in ((path, model), (f"{path}.journal", journal)):
                if data is not None:
                    with open(name, "xb") as f:
                        f.write(data)
            scorer = _SCORERS[key] = load_scorer(path)  # read whole into memory
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return scorer


def score_part(model: bytes, journal: bytes | None, key: str, messages: list[Message]) -> list[Any]:
    """In a worker: the predictions of a partition of messages, as `predict` gives them."""
    return list(_scorer(model, journal, key).predict_messages(messages))


def predict(
    model_path: str,
    messages: Iterable[Message],
    client: Any,
    *,
    ahead: int | None = None,
) -> Iterator[Any]:
    """The predictions `array_scoring.load_scorer(model_path).predict_messages` gives, in input
    order, scored by the workers of a Dask cluster (``client``): the bytes of the model file
    and of its journal (read once, as every reader checks them: `container.file_bytes`,
    `journal.file_bytes`) are sent to every worker once, then partitions of
    `array_scoring.SCORE_CHUNK` messages, at most ``ahead`` (four per worker) at a time, so
    that memory stays bounded."""

    from ..store import container, journal
    from .array_scoring import SCORE_CHUNK

    data, learned = container.file_bytes(model_path), journal.file_bytes(model_path)
    key = uuid.uuid4().hex
    try:
        model = client.scatter(data, broadcast=True, hash=False)
        if learned is not None:
            learned = client.scatter(learned, broadcast=True, hash=False)
        if ahead is None:
            ahead = 4 * max(1, len(client.scheduler_info()["workers"]))
        pending: deque[Any] = deque()
        for part in chunks(messages, SCORE_CHUNK):
            pending.append(client.submit(score_part, model, learned, key, part, key=_key("score")))
            if len(pending) >= ahead:
                yield from _result(client, pending.popleft())
        while pending:
            yield from _result(client, pending.popleft())
    except NbspamError:
        raise
    except Exception as error:  # a worker or the scheduler lost, a task failed
        raise _failed("scoring on the Dask cluster failed", client, error) from None
