"""Where messages are tokenized and counted (--engine): worker processes on this machine, or
the workers of a Dask cluster (`cluster`). The checks every command that takes --engine
makes, in one place."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..core.arguments import one_of, optional, text, whole
from ..core.settings import MAX_JOBS
from ..errors import ConfigError, NbspamError


def check_jobs(jobs: Any) -> int:
    """--jobs, refused unless a whole number from 1 to `MAX_JOBS`: the pool forks all its
    workers at once, so a huge number would fork processes until the system has none left,
    and a number below 1 or not a number was silently taken as one."""
    return whole("--jobs", jobs, 1, MAX_JOBS)


ENGINES = ("local", "dask")


@dataclass(frozen=True)
class Engine:
    """--engine (``local`` or ``dask``), --scheduler, its TLS files (--tls-ca-file,
    --tls-cert, --tls-key) and --jobs."""

    name: str = "local"
    scheduler: str | None = None
    tls_ca_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    jobs: int = 1

    def __post_init__(self) -> None:
        one_of("--engine", self.name, ENGINES)  # any other name, "Dask" too, ran locally
        for name in ("scheduler", "tls_ca_file", "tls_cert", "tls_key"):
            optional(text, f"--{name.replace('_', '-')}", getattr(self, name))
        check_jobs(self.jobs)

    @property
    def dask(self) -> bool:
        return self.name == "dask"

    def check(self) -> None:
        """--scheduler is for --engine dask, and its TLS files for --scheduler."""
        if self.scheduler is not None and not self.dask:
            raise ConfigError("--scheduler is for --engine dask")
        if self.scheduler is None and any((self.tls_ca_file, self.tls_cert, self.tls_key)):
            raise ConfigError("--tls-ca-file, --tls-cert and --tls-key are for --scheduler")

    def refuse(self, what: str) -> None:
        """Refuse --engine dask where it cannot serve: ``what`` says why, after
        '--engine dask '."""
        if self.dask:
            raise NbspamError(f"--engine dask {what}")

    @contextlib.contextmanager
    def client(self) -> Iterator[Any]:
        """The Dask client of --scheduler (with the TLS files), or of a local cluster of
        --jobs workers, for the length of the block."""
        from .cluster import dask_client

        with dask_client(
            self.scheduler,
            self.jobs,
            ca_file=self.tls_ca_file,
            cert=self.tls_cert,
            key=self.tls_key,
        ) as client:
            yield client

    @contextlib.contextmanager
    def counter(self) -> Iterator[Any]:
        """What tokenizes and counts (`counting.count_chunks`' signature): worker processes
        here, or the Dask cluster, connected to (or started) for the length of the block."""
        from ..text.counting import count_chunks

        if not self.dask:
            yield count_chunks
            return
        from functools import partial

        from .cluster import count_chunks as count_on_cluster

        with self.client() as client:
            yield partial(count_on_cluster, client)
