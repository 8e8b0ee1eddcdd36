"""Speed of `nbspam serve` as mail hosts use it, beside a process per message.

On SpamAssassin's test fold (the first fold of bench/speed.py's split; the model trained on
the other four):

- spamc CHECK, one client at a time: latency at the client (median, p99), each a whole
  `spamc -c` process (fork, connect, send, answer), and the server's own part read from a
  raw socket in the same way;
- 8 concurrent clients speaking SPAMC/1.5 over raw sockets: messages per second;
- beside it, `nbspam filter` and bogofilter (where installed) started once per message;
- the server's resident memory less the size of the model file.

    python bench/serve.py [--corpus ../shared/corpora/spamassassin] [--messages 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import speed  # noqa: E402  (the same split as the speed benchmark)

TARGETS = {"median_ms": 3.0, "p99_ms": 20.0, "messages_s": 1500.0, "rss_mb": 60.0}


def request(path: str, data: bytes, head: bytes = b"CHECK SPAMC/1.5\r\n") -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(head + b"Content-length: %d\r\n\r\n" % len(data) + data)
        parts = []
        while part := s.recv(65536):
            parts.append(part)
    return b"".join(parts)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def python_pass_ms(runs: int = 20) -> float:
    """The median time of `python -c pass`: how loaded the machine is, beside the numbers."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-S", "-c", "pass"], check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def per_process(command: list[str], datas: list[bytes]) -> float:
    """Messages per second with one process per message."""
    start = time.perf_counter()
    for data in datas:
        subprocess.run(command, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return len(datas) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(HERE.parent.parent / "shared/corpora/spamassassin"))
    parser.add_argument("--messages", type=int, default=1000, help="messages of the test fold used")
    parser.add_argument(
        "--per-process", type=int, default=100, help="messages run one process each"
    )
    args = parser.parse_args()
    files = speed.corpus_files(Path(args.corpus))
    fold = speed.split(sys.executable, [label for _, label in files], None)
    test = set(fold["test"])
    train = [f for i, f in enumerate(files) if i not in test]
    tests = [files[i][0] for i in sorted(test)][: args.messages]
    datas = [p.read_bytes() for p in tests]
    nbspam = [sys.executable, "-m", "nbspam"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "train"
        speed.link_tree(folder, train, by_label=True)
        model = Path(tmp) / "spam.nbm"
        subprocess.run(
            [*nbspam, "train", "--follow-links", str(folder), "-o", str(model)],
            check=True,
            capture_output=True,
        )
        sock = str(Path(tmp) / "spamd.sock")
        taught = Path(tmp) / "taught.nbm"  # TELL changes a copy (its journal)
        shutil.copyfile(model, taught)
        tell_sock = str(Path(tmp) / "tell.sock")
        server = subprocess.Popen(
            [*nbspam, "serve", "-m", str(model), "--listen", f"spamd:unix:{sock}"],
            stderr=subprocess.DEVNULL,
        )
        teller = subprocess.Popen(
            [*nbspam, "serve", "-m", str(taught), "--allow-tell"]
            + ["--listen", f"spamd:unix:{tell_sock}"],
            stderr=subprocess.DEVNULL,
        )
        try:
            while not (os.path.exists(sock) and os.path.exists(tell_sock)):
                time.sleep(0.05)
            for data in datas[:50]:
                request(sock, data)  # warm up
            results = {}
            spamc = shutil.which("spamc")
            if spamc:
                latencies = []
                for data in datas:
                    start = time.perf_counter()
                    subprocess.run([spamc, "-c", "-U", sock], input=data, stdout=subprocess.DEVNULL)
                    latencies.append((time.perf_counter() - start) * 1000)
                results["spamc median ms"] = statistics.median(latencies)
                results["spamc p99 ms"] = statistics.quantiles(latencies, n=100)[98]
            raw = []
            for data in datas:
                start = time.perf_counter()
                request(sock, data)
                raw.append((time.perf_counter() - start) * 1000)
            results["raw socket median ms"] = statistics.median(raw)
            results["raw socket p99 ms"] = statistics.quantiles(raw, n=100)[98]
            work = datas * max(1, 4000 // len(datas))

            def client(k: int) -> None:
                for data in work[k::8]:
                    request(sock, data)

            threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            results["8 clients messages/s"] = len(work) / (time.perf_counter() - start)
            results["server RSS less model MB"] = rss_mb(server.pid) - model.stat().st_size / 2**20
            tells = []
            for i, data in enumerate(datas[:200]):
                kind = b"spam" if i % 2 else b"ham"
                head = b"TELL SPAMC/1.5\r\nMessage-class: %s\r\nSet: local\r\n" % kind
                start = time.perf_counter()
                request(tell_sock, data, head)
                tells.append((time.perf_counter() - start) * 1000)
            results["TELL median ms (raw socket)"] = statistics.median(tells)
            results["python -c pass ms (load indicator)"] = python_pass_ms()
            few = datas[: args.per_process]
            results["nbspam filter, a process a message: messages/s"] = per_process(
                [*nbspam, "filter", "-m", str(model)], few
            )
            bogofilter = shutil.which("bogofilter")
            if bogofilter:
                bogo = Path(tmp) / "bogo"
                bogo.mkdir()
                for path, label in train:
                    flag = "-s" if label == "spam" else "-n"
                    subprocess.run(
                        [bogofilter, "-d", str(bogo), flag, "-I", str(path)], check=False
                    )
                results["bogofilter, a process a message: messages/s"] = per_process(
                    [bogofilter, "-d", str(bogo), "-p"], few
                )
        finally:
            for process in (server, teller):
                process.send_signal(signal.SIGTERM)
                process.wait()
    print(f"nbspam serve on {len(datas)} test messages of {Path(args.corpus).name}:")
    for name, value in results.items():
        print(f"  {name}: {value:,.2f}")
    checks = [
        ("median latency (spamc)", results.get("spamc median ms"), "<=", TARGETS["median_ms"]),
        ("p99 latency (spamc)", results.get("spamc p99 ms"), "<=", TARGETS["p99_ms"]),
        ("8 clients messages/s", results["8 clients messages/s"], ">=", TARGETS["messages_s"]),
        ("RSS less model MB", results["server RSS less model MB"], "<=", TARGETS["rss_mb"]),
    ]
    for name, value, how, target in checks:
        if value is None:
            continue
        met = value <= target if how == "<=" else value >= target
        print(f"  {'met' if met else 'not met'}: {name} {value:,.2f} {how} {target:,.0f}")


if __name__ == "__main__":
    main()
