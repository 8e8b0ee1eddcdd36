"""Time and peak memory of `nbspam train`, locally and on a Dask scheduler with two
workers started here as processes of their own on 127.0.0.1 (TLS, a certificate made for
the run), for docs/scale.md.

Usage: ``python bench/scale.py CORPUS [CORPUS ...] [--jobs 2] [--engines local,dask]``
(corpora of `bench/gencorpus.py`). For each corpus and engine: the wall-clock time, the
peak resident memory (VmHWM) of the calling process, of the scheduler and of each worker,
and the memory the scheduler and workers still hold after the run (VmRSS), and the most
disk each worker's digests took (its unnamed files, sampled every 2 s); then whether
the two models hold the same terms, counts and digests. A fresh scheduler and workers for
each corpus, so that each peak is that run's. The output is a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

NBSPAM = [sys.executable, "-m", "nbspam"]


def status(pid: int, field: str) -> int:
    """A /proc/PID/status field in kB (VmHWM: the peak resident memory)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cluster(folder: str) -> tuple[str, list[subprocess.Popen], list[str]]:
    from distributed.security import Security

    made = Security.temporary()
    ca, key = os.path.join(folder, "ca.pem"), os.path.join(folder, "key.pem")
    with open(ca, "w") as f:
        f.write(made.tls_ca_file)
    with open(key, "w") as f:
        f.write(made.tls_client_key)
    files = ["--tls-ca-file", ca, "--tls-cert", ca, "--tls-key", key]
    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "dask"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [
        subprocess.Popen(
            [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
            + ["--protocol", "tls", *files],
            **quiet,
        )
    ]
    time.sleep(3)
    for _ in range(2):
        procs.append(
            subprocess.Popen(
                [*dask, "worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard"]
                + ["--host", "127.0.0.1", "--memory-limit", "0", *files],
                **quiet,
            )
        )
    time.sleep(8)
    return address, procs, files


def unnamed_bytes(pid: int) -> int:
    """The bytes of the unnamed (deleted) files process ``pid`` holds open."""
    total = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").endswith("(deleted)"):
                total += os.stat(f"/proc/{pid}/fd/{fd}").st_size
        except OSError:
            pass
    return total


def run(command: list[str], watch: dict[int, int] | None = None) -> tuple[float, int, str]:
    """(seconds, peak kB of the process, stderr); the most bytes of unnamed files each
    process of ``watch`` held meanwhile, into it."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def sample() -> None:
        while not done.wait(2):
            for pid in watch or {}:
                watch[pid] = max(watch[pid], unnamed_bytes(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    err = proc.stderr.read().decode()
    _, code, usage = os.wait4(proc.pid, 0)
    done.set()
    sampler.join()
    seconds = time.perf_counter() - started
    if code:
        raise SystemExit(f"{' '.join(command)} failed:\n{err}")
    return seconds, usage.ru_maxrss, err


def same(a: str, b: str) -> str:
    from nbspam.store.modelfile import load_model

    x, y = load_model(a), load_model(b)
    checks = [
        x.labels == y.labels,
        x.terms == y.terms,
        all(
            np.array_equal(getattr(x, k), getattr(y, k))
            for k in ("class_count", "term_count", "doc_count", "seen_digests", "seen_labels")
        ),
    ]
    verdict = "same terms, counts and digests" if all(checks) else "DIFFERENT"
    return f"{len(x.terms):,} terms, {len(x.seen_digests):,} digests: {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpora", nargs="+")
    parser.add_argument("--jobs", default="2")
    parser.add_argument("--engines", default="local,dask")
    parser.add_argument("--options", default="", help="more options for train")
    args = parser.parse_args()
    print(
        "| corpus | engine | seconds | caller MB | scheduler MB (after) | workers MB (after) "
        "| workers' digests on disk MB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for corpus in args.corpora:
        models = {}
        with tempfile.TemporaryDirectory() as folder:
            for engine in args.engines.split(","):
                out = os.path.join(folder, f"{engine}.nbm")
                command = [*NBSPAM, "train", corpus, "-o", out, *args.options.split()]
                if engine == "local":
                    seconds, peak, _ = run([*command, "-j", args.jobs])
                    row = f"| {corpus} | local -j {args.jobs} | {seconds:.1f} | {peak / 1024:.0f} | | | |"
                else:
                    address, procs, files = start_cluster(folder)
                    disk = {p.pid: 0 for p in procs[1:]}
                    try:
                        seconds, peak, _ = run(
                            [*command, "--engine", "dask", "--scheduler", address, *files], disk
                        )
                        time.sleep(2)
                        mem = [(status(p.pid, "VmHWM"), status(p.pid, "VmRSS")) for p in procs]
                    finally:
                        for p in procs[1:] + procs[:1]:
                            p.terminate()
                            p.wait()
                    workers = ", ".join(f"{h / 1024:.0f} ({r / 1024:.0f})" for h, r in mem[1:])
                    row = (
                        f"| {corpus} | dask, 2 workers | {seconds:.1f} | {peak / 1024:.0f} | "
                        f"{mem[0][0] / 1024:.0f} ({mem[0][1] / 1024:.0f}) | {workers} | "
                        + ", ".join(f"{b / 2**20:.1f}" for b in disk.values())
                        + " |"
                    )
                models[engine] = out
                print(row, flush=True)
            if len(models) == 2:
                print(f"<!-- {corpus}: {same(*models.values())} -->", flush=True)
            else:
                print(f"<!-- {corpus}: {same(out, out)} -->", flush=True)


if __name__ == "__main__":
    main()
