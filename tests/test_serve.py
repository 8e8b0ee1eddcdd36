"""`nbspam serve` with real clients: Debian's spamc, raw sockets speaking SPAMC/1.5 under
load and faults, and the listeners' safety. The Postfix milter test is in
test_serve_postfix.py.

Each test starts its own server in a child process on a Unix socket in its tmp folder and
stops it with SIGTERM. spamc tests skip, saying why, where spamc is not installed (.ci/run
installs it)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nbspam.errors import ServeError
from nbspam.serve.models import check_template, check_user
from nbspam.serve.server import STREAM_LIMIT, Listener, unix_socket
from nbspam.serve.spamd import EX_PROTOCOL, Refusal, read_request
from nbspam.store import journal
from tests.helpers import ENV, SAMPLE, cli_run, missing

MESSAGES = sorted((SAMPLE / "new").iterdir())


class Served:
    """A running `nbspam serve`: its socket, its log, its process."""

    def __init__(self, tmp: Path, model: Path, *options: str, name: str = "spamd.sock") -> None:
        self.socket = tmp / name
        self.log = tmp / "serve.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nbspam", "serve", "-m", str(model)]
            + ["--listen", f"spamd:unix:{self.socket}", *options],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=open(self.log, "wb"),
        )
        deadline = time.monotonic() + 20
        while not self.socket.exists():
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=20)

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()


@pytest.fixture
def served(tmp_path, sample_model):
    servers = []

    def start(*options: str, model: Path = sample_model) -> Served:
        server = Served(tmp_path, model, *options)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def spamd(path: Path, verb: str, data: bytes = b"", headers: dict | None = None) -> tuple:
    """One SPAMC/1.5 request over a raw socket: (status line, headers, body)."""
    lines = [f"{verb} SPAMC/1.5", f"Content-length: {len(data)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(path))
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        answer = _read_all(s)
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *rest = head.decode().split("\r\n")
    return status, dict(line.split(": ", 1) for line in rest if line), body


def _read_all(s: socket.socket) -> bytes:
    parts = []
    while True:
        part = s.recv(65536)
        if not part:
            return b"".join(parts)
        parts.append(part)


def predicted(model: Path, paths) -> dict[str, dict]:
    """`nbspam predict -f jsonl`'s record of each path, by path."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "nbspam",
            "predict",
            "-m",
            str(model),
            "-f",
            "jsonl",
            *map(str, paths),
        ],
        env=ENV,
        capture_output=True,
        check=True,
    ).stdout
    records = [json.loads(line) for line in out.splitlines()]
    return {r["path"]: r for r in records}


def need_spamc() -> str:
    found = shutil.which("spamc")
    if found is None:
        missing("spamc is not installed (Debian package spamc; .ci/run installs it)")
    return found


def spamc(server: Served, *args: str, data: bytes) -> subprocess.CompletedProcess:
    return subprocess.run(
        [need_spamc(), "-x", "-U", str(server.socket), *args],
        input=data,
        capture_output=True,
        timeout=30,
    )


# -- spamc ------------------------------------------------------------------------------------


def test_spamc_check_exits_1_for_spam_and_0_otherwise_as_predict_decides(served, sample_model):
    need_spamc()
    server = served()
    expected = predicted(sample_model, MESSAGES)
    assert {r["verdict"] for r in expected.values()} >= {"spam", "ham"}
    for path in MESSAGES:
        result = spamc(server, "-c", data=path.read_bytes())
        record = expected[str(path)]
        assert result.returncode == (1 if record["verdict"] == "spam" else 0), path
        score, threshold = result.stdout.decode().strip().split("/")
        assert float(score) == pytest.approx(record["log_odds"], abs=0.05)
        assert float(threshold) == 5.0  # the sample model's spam cutoff
    assert sum(" log_odds=" in line for line in server.lines()) == len(MESSAGES)


def test_spamc_process_returns_the_message_with_filters_header(served, sample_model):
    server = served()
    for path in MESSAGES[:4]:
        data = path.read_bytes()
        filtered = subprocess.run(
            [sys.executable, "-m", "nbspam", "filter", "-m", str(sample_model)],
            input=data,
            env=ENV,
            capture_output=True,
            check=True,
        ).stdout
        result = spamc(server, data=data)
        assert result.returncode == 0
        assert result.stdout == filtered
        headers = spamc(server, "--headers", data=data)
        assert headers.stdout.startswith(filtered.split(b"\n", 1)[0])


def test_spamc_report_is_explains(served, sample_model):
    server = served()
    path = MESSAGES[0]
    explained = cli_run("explain", "-m", sample_model, "--top", "20", path).stdout
    shown = spamc(server, "-R", data=path.read_bytes()).stdout.decode()
    score, report = shown.split("\n", 1)  # spamc prints SCORE/THRESHOLD first
    assert score.endswith("/5.0")
    # explain names the file; the report names the message "-"
    assert report.split("\n", 1)[1] == explained.split("\n", 1)[1]
    assert report.startswith("-: ")


def test_spamc_tell_learns_and_forgets_only_when_allowed(served, sample_model, tmp_path):
    need_spamc()
    message = b"From: a@example.com\nSubject: zqxtold\n\nzqxtold zqxtold words\n"
    without = served()
    assert spamd(without.socket, "TELL", message, {"Message-class": "spam", "Set": "local"})[0] == (
        "SPAMD/1.1 77 EX_NOPERM"
    )
    (tmp_path / "t").mkdir()
    server = Served(tmp_path / "t", sample_model, "--allow-tell")
    try:
        before = spamd(server.socket, "CHECK", message)[1]["Spam"]
        learned = spamc(server, "-L", "spam", data=message)
        assert learned.stdout.decode().strip() == "Message successfully un/learned"
        again = spamc(server, "-L", "spam", data=message)
        assert again.stdout.decode().strip() == "Message was already un/learned"
        after = spamd(server.socket, "CHECK", message)[1]["Spam"]
        assert float(after.split(";")[1].split("/")[0]) > float(before.split(";")[1].split("/")[0])
        assert cli_run("info", "-m", sample_model, "-f", "json").exit_code == 0
        forgot = spamc(server, "-L", "forget", data=message)
        assert forgot.stdout.decode().strip() == "Message successfully un/learned"
        assert spamd(server.socket, "CHECK", message)[1]["Spam"] == before
    finally:
        server.stop()


def test_tell_appends_to_the_journal_and_leaves_the_model_file_alone(served, sample_model):
    """A TELL costs the message, not the model: the model file keeps its bytes and inode,
    the lesson is a record in its journal, and `nbspam predict` (model + journal) gives
    the log-odds the server now answers."""
    server = served("--allow-tell")
    inode, original = sample_model.stat().st_ino, sample_model.read_bytes()
    data = MESSAGES[0].read_bytes()
    headers = {"Message-class": "spam", "Set": "local"}
    assert spamd(server.socket, "TELL", data, headers)[1] == {"DidSet": "local"}
    assert sample_model.stat().st_ino == inode and sample_model.read_bytes() == original
    assert journal.read(journal.journal_path(sample_model)).records[0].new == "spam"
    score = float(spamd(server.socket, "CHECK", data)[1]["Spam"].split(";")[1].split("/")[0])
    assert score == round(predicted(sample_model, [MESSAGES[0]])[str(MESSAGES[0])]["log_odds"], 3)


def test_a_learn_from_the_command_line_is_seen_at_the_next_message(served, sample_model):
    """`nbspam learn` appends to the journal and leaves the model file as it was: the server
    notices by the journal's version and scores with the lesson."""
    server = served()
    path = MESSAGES[1]
    before = spamd(server.socket, "CHECK", path.read_bytes())[1]["Spam"]
    assert cli_run("learn", "-m", sample_model, "--label", "spam", path).exit_code == 0
    time.sleep(0.1)  # the server looks at the files at most every CHECK_EVERY seconds
    after = spamd(server.socket, "CHECK", path.read_bytes())[1]["Spam"]
    expected = predicted(sample_model, [path])[str(path)]["log_odds"]
    assert after != before and after.split(";")[1].split("/")[0].strip() == f"{expected:.3f}"


def _spamc_score(server: Served, user: str, data: bytes) -> str:
    return spamc(server, "-c", "-u", user, data=data).stdout.decode().strip()


def test_spamc_users_score_with_their_layer_and_tell_moves_only_theirs(
    served, sample_model, tmp_path
):
    """--user-models is the commands' layer template (%u): after alice's TELL, alice's
    score moves, equal to `nbspam predict --user alice`; bob's and the site's do not."""
    need_spamc()
    users = tmp_path / "users"
    users.mkdir()
    template = str(users / "%u.nbj")
    server = served("--user-models", template, "--allow-tell")
    path = MESSAGES[2]
    data = path.read_bytes()
    site = spamc(server, "-c", data=data).stdout.decode().strip()
    assert _spamc_score(server, "alice", data) == site == _spamc_score(server, "bob", data)
    told = spamc(server, "-u", "alice", "-L", "spam", data=data)
    assert told.stdout.decode().strip() == "Message successfully un/learned"
    assert (users / "alice.nbj").exists() and not (users / "bob.nbj").exists()
    assert not journal.journal_path(sample_model).exists()
    alice = _spamc_score(server, "alice", data)
    out = subprocess.run(
        [sys.executable, "-m", "nbspam", "predict", "-m", str(sample_model), "-f", "jsonl"]
        + ["--user", "alice", "--user-models", template, str(path)],
        env=ENV,
        capture_output=True,
        check=True,
    ).stdout
    expected = json.loads(out)["log_odds"]
    assert alice == f"{expected:.1f}/5.0" and float(alice.split("/")[0]) > float(site.split("/")[0])
    assert _spamc_score(server, "bob", data) == site
    assert spamc(server, "-c", data=data).stdout.decode().strip() == site
    status = spamd(server.socket, "CHECK", data, {"User": "../alice"})[0]
    assert status == "SPAMD/1.1 67 EX_NOUSER"
    os.symlink(users / "alice.nbj", users / "mallory.nbj")
    status = spamd(server.socket, "CHECK", data, {"User": "mallory"})[0]
    assert status == "SPAMD/1.1 75 EX_TEMPFAIL"
    assert any("user=alice learned spam" in line for line in server.lines())


def _spam_digests(model) -> set[bytes]:
    spam = model.labels.index("spam")
    return {bytes(d) for d, label in zip(model.seen_digests, model.seen_labels) if label == spam}


def test_sigkill_during_tells_keeps_every_acknowledged_lesson(served, sample_model):
    """TELL answers after the journal's fsync: a server killed while eight clients teach
    it leaves model + journal holding every lesson it acknowledged (and none it was not
    sent), readable by the commands."""
    from nbspam.mail.headers import message_digest
    from nbspam.store.modelfile import load_model

    before = _spam_digests(load_model(sample_model))
    server = served("--allow-tell")
    sent = [b"Subject: lesson %d\n\nzq%dx words of lesson %d\n" % (i, i, i) for i in range(400)]
    acknowledged, stop = [], threading.Event()

    def client(k: int) -> None:
        for data in sent[k::8]:
            if stop.is_set():
                return
            try:
                answer = spamd(
                    server.socket, "TELL", data, {"Message-class": "spam", "Set": "local"}
                )
            except OSError:
                return
            if answer[1].get("DidSet") == "local":
                acknowledged.append(data)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(acknowledged) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.process.send_signal(signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert len(acknowledged) >= 20
    learned = _spam_digests(load_model(sample_model)) - before
    assert {message_digest(d) for d in acknowledged} <= learned
    assert learned <= {message_digest(d) for d in sent}
    assert cli_run("learn", "-m", sample_model, "--label", "ham", MESSAGES[0]).exit_code == 0


# -- raw protocol, reloads, load and faults ---------------------------------------------------


def test_ping_symbols_and_a_model_replaced_on_disk_is_read_before_the_next_message(
    served, sample_model, sample_models
):
    server = served()
    assert spamd(server.socket, "PING")[0] == "SPAMD/1.5 0 PONG"
    data = MESSAGES[0].read_bytes()
    status, headers, body = spamd(server.socket, "SYMBOLS", data)
    assert status == "SPAMD/1.1 0 EX_OK" and body in (
        b"NBSPAM_HAM",
        b"NBSPAM_SPAM",
        b"NBSPAM_UNSURE",
    )
    assert headers["Spam"].endswith("/ 5.000")
    replacement = sample_model.with_name("new.nbm")
    shutil.copyfile(sample_models("--cutoffs=-1,1"), replacement)
    os.replace(replacement, sample_model)
    time.sleep(0.1)  # the server looks at the files at most every CHECK_EVERY seconds
    assert spamd(server.socket, "CHECK", data)[1]["Spam"].endswith("/ 1.000")


def test_load_50_connections_while_the_model_is_replaced_20_times(
    served, sample_model, sample_models, spamassassin, tmp_path
):
    """10,000 messages (each of 500 SpamAssassin messages 20 times) over 50 concurrent
    clients, one connection a message as spamc makes; two models swapped into place 20
    times meanwhile: every answer is predict's under one of the two, none torn."""
    files = (
        sorted((spamassassin / "ham").iterdir())[:250]
        + sorted((spamassassin / "spam").iterdir())[:250]
    )
    other = tmp_path / "other.nbm"
    shutil.copyfile(sample_models("--cutoffs=-1,1"), other)
    first = predicted(sample_model, files)
    second = predicted(other, files)
    expected = {
        p.read_bytes(): {
            (first[str(p)]["verdict"] == "spam"),
            (second[str(p)]["verdict"] == "spam"),
        }
        for p in files
    }
    datas = list(expected)
    server = served("--max-connections", "100")
    errors, done = [], []
    stop = threading.Event()

    def client(k: int) -> None:
        try:
            for i in range(k, 20 * len(datas), 50):
                data = datas[i % len(datas)]
                status, headers, _ = spamd(server.socket, "CHECK", data)
                assert status == "SPAMD/1.1 0 EX_OK", status
                assert headers["Spam"].startswith(("True", "False"))
                assert (headers["Spam"].startswith("True")) in expected[data]
                done.append(1)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    def swapper() -> None:
        models = [sample_model.read_bytes(), other.read_bytes()]
        for i in range(20):
            if stop.wait(0.3):
                return
            tmp = sample_model.with_name(f"swap{i}.nbm")
            tmp.write_bytes(models[(i + 1) % 2])
            os.replace(tmp, sample_model)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(50)]
    swap = threading.Thread(target=swapper)
    swap.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    stop.set()
    swap.join()
    assert errors == []
    assert len(done) == 20 * len(datas)


def test_a_message_over_the_limit_is_refused_before_it_is_read(served):
    server = served("--max-size", "1000000", "--timeout", "5")
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(server.socket))
        s.sendall(b"CHECK SPAMC/1.5\r\nContent-length: 100000000\r\n\r\n" + b"x" * 65536)
        answer = s.recv(1000)
    assert answer.startswith(b"SPAMD/1.1 98 EX_TOOBIG")


def test_a_100_mb_message_without_a_length_is_cut_at_the_limit(served):
    """An old client sends no Content-length: the server reads up to the limit and refuses,
    holding at most the limit, while the client is still sending."""
    server = served("--max-size", "1000000")
    refused = []

    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(server.socket))
        s.sendall(b"CHECK SPAMC/1.5\r\n\r\n")
        chunk = b"y" * (1 << 20)
        try:
            for _ in range(100):
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            refused.append(True)
        try:
            refused.append(s.recv(1000))
        except ConnectionResetError:
            pass
    assert refused and refused[-1] in (True, b"SPAMD/1.1 98 EX_TOOBIG\r\n\r\n")
    assert spamd(server.socket, "PING")[0] == "SPAMD/1.5 0 PONG"


def test_a_message_without_a_length_sent_in_small_pieces_is_read_in_linear_time():
    """Each piece of an old client's message was added to a copy of all the pieces before
    it, in the server's one event loop: 8 MiB in 1 KiB pieces took 16 s."""
    size, piece = 8 << 20, b"x" * 1023 + b"\n"

    async def read() -> bytes:
        reader = asyncio.StreamReader(limit=STREAM_LIMIT)

        async def client() -> None:
            reader.feed_data(b"CHECK SPAMC/1.5\r\n\r\n")
            for _ in range(size // len(piece)):
                reader.feed_data(piece)
                await asyncio.sleep(0)  # the server reads each piece as it comes
            reader.feed_eof()

        sending = asyncio.create_task(client())
        request = await read_request(reader, 10 << 20)
        await sending
        return request.body

    start = time.process_time()
    body = asyncio.run(read())
    assert time.process_time() - start < 3
    assert len(body) == size and body.endswith(piece)


@pytest.mark.parametrize("length", ["\xb2", "\xb9\xb3", "1\xb2"])
def test_a_content_length_of_other_digits_is_refused_as_a_bad_one(length):
    """str.isdigit() is true of the superscripts of Latin-1 (a header is read as Latin-1),
    which int() refuses: the ValueError was an internal error, and the client got no
    answer."""

    async def read() -> None:
        reader = asyncio.StreamReader(limit=STREAM_LIMIT)
        head = f"CHECK SPAMC/1.5\r\nContent-length: {length}\r\n\r\nhi"
        reader.feed_data(head.encode("latin-1"))
        reader.feed_eof()
        await read_request(reader, 1000)

    with pytest.raises(Refusal) as refused:
        asyncio.run(read())
    assert refused.value.code == EX_PROTOCOL and "bad Content-length" in str(refused.value)


def test_reports_are_made_one_at_a_time(monkeypatch):
    # a user's report builds a whole model: clients asking at once must not hold several
    from nbspam.serve import scoring
    from nbspam.serve import spamd as protocol

    running, most = 0, 0
    guard = threading.Lock()

    def slow_report(models, outcome, data):
        nonlocal running, most
        with guard:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with guard:
            running -= 1
        return "report\n"

    monkeypatch.setattr(scoring, "report", slow_report)
    service = scoring.Service(models=None)
    request = protocol.Request("REPORT", {}, b"Subject: x\n\nhello\n")

    async def three() -> list:
        return await asyncio.gather(*(protocol._body(service, request, None) for _ in range(3)))

    assert asyncio.run(three()) == [b"report\n"] * 3
    assert most == 1


def test_a_client_that_stops_mid_message_is_cut_off_and_others_are_served(served):
    server = served("--timeout", "1")
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(server.socket))
        s.sendall(b"CHECK SPAMC/1.5\r\nContent-length: 1000\r\n\r\nhalf a mess")
        assert spamd(server.socket, "PING")[0] == "SPAMD/1.5 0 PONG"  # served meanwhile
        start = time.monotonic()
        assert s.recv(100) == b""  # cut off
        assert time.monotonic() - start < 5
    assert any("cut off" in line for line in server.lines())


def test_1000_idle_connections_are_bounded_and_the_server_still_answers(served):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    server = served("--max-connections", "100", "--timeout", "2")
    idle = []
    try:
        for _ in range(1000):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(server.socket))
            idle.append(s)
        time.sleep(0.5)
        rss = _rss_kib(server.process.pid)
        # over the limit: closed at once; within it: cut off after the time-out
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if spamd(server.socket, "PING")[0] == "SPAMD/1.5 0 PONG":
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("the server never answered again")
    finally:
        for s in idle:
            s.close()
    assert rss < 200_000
    assert any("100 connections already" in line for line in server.lines())


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_sigterm_lets_the_message_under_way_finish(served):
    server = served()
    data = MESSAGES[0].read_bytes()
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(server.socket))
        s.sendall(f"CHECK SPAMC/1.5\r\nContent-length: {len(data)}\r\n\r\n".encode() + data[:100])
        time.sleep(0.3)
        server.process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        s.sendall(data[100:])
        answer = _read_all(s)
    assert answer.startswith(b"SPAMD/1.1 0 EX_OK\r\nSpam: ")
    assert server.process.wait(timeout=10) == 0
    assert not server.socket.exists()
    assert server.lines()[-1] == "nbspam serve: stopped"


def test_sighup_reads_the_model_again(served):
    server = served()
    spamd(server.socket, "CHECK", MESSAGES[0].read_bytes())
    server.process.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert spamd(server.socket, "CHECK", MESSAGES[0].read_bytes())[0] == "SPAMD/1.1 0 EX_OK"
    assert "nbspam serve: SIGHUP: models will be read again" in server.lines()


# -- configuration and listeners --------------------------------------------------------------


def test_check_prints_the_configuration(sample_model, tmp_path):
    result = cli_run(
        "serve", "-m", sample_model, "--check", "--listen", f"spamd:unix:{tmp_path}/s.sock"
    )
    assert result.exit_code == 0
    assert result.stdout == (
        f"model {sample_model} (ham, spam)\nlisten spamd:unix:{tmp_path}/s.sock\nconfiguration OK\n"
    )


def test_check_says_the_recipient_delimiter(sample_model, tmp_path):
    template = f"{tmp_path}/%u.nbj"
    result = cli_run(
        "serve", "-m", sample_model, "--check", "--user-models", template,
        "--recipient-delimiter", "+-", "--listen", f"milter:unix:{tmp_path}/m.sock",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"model {sample_model} (ham, spam)\n"
        f"user layers {template} (over the site model, for -u or the recipient)\n"
        "recipient delimiter +- (alice+lists@ is alice's)\n"
        f"listen milter:unix:{tmp_path}/m.sock\nconfiguration OK\n"
    )


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (
            ["--listen", "smtp:unix:/x"],
            "Error: bad listener 'smtp:unix:/x': use PROTOCOL:unix:PATH",
        ),
        (["--milter-action", "spam=bounce"], "Error: bad --milter-action spam=bounce"),
        (["--user-models", "/var/%u/m.nbj"], "Error: --user-models '/var/%u/m.nbj' must hold"),
        (["--allow", "nonsense"], "Error: bad --allow"),
        (
            ["--recipient-delimiter", "@"],
            "Error: bad --recipient-delimiter '@': up to five of + - = _ .",
        ),
        # a superscript passes str.isdigit and int() refuses it: an internal error before
        (
            ["--listen", "spamd:inet:127.0.0.1:\u00b2"],
            "Error: bad listener 'spamd:inet:127.0.0.1:\u00b2': an inet address is HOST:PORT",
        ),
        (
            ["--listen", "spamd:inet:127.0.0.1:65536"],
            "Error: bad listener 'spamd:inet:127.0.0.1:65536': an inet address is HOST:PORT",
        ),
    ],
)
def test_check_refuses_a_bad_configuration_in_one_line(sample_model, tmp_path, options, error):
    result = cli_run("serve", "-m", sample_model, "--check", *options)
    assert result.exit_code != 0
    assert result.stderr.startswith(error) and result.stderr.count("\n") == 1


def test_check_refuses_a_missing_model(tmp_path):
    result = cli_run("serve", "-m", tmp_path / "none.nbm", "--check")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: cannot read model file")


def test_a_socket_path_that_is_a_link_or_a_file_is_refused_never_followed(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    link = tmp_path / "s.sock"
    link.symlink_to(target)
    with pytest.raises(ServeError, match="symbolic link, not a socket"):
        unix_socket(str(link), 0o660, -1)
    assert target.read_text() == "keep" and link.is_symlink()
    old = tmp_path / "old.sock"
    first = unix_socket(str(old), 0o640, -1)
    assert oct(old.stat().st_mode & 0o777) == "0o640"
    first.close()
    unix_socket(str(old), 0o600, -1).close()  # an old socket is replaced
    assert oct(old.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_socket_swapped_for_a_link_before_its_mode_is_set_changes_no_other_file(
    tmp_path, monkeypatch
):
    # a neighbour who may write the socket's folder swaps the new socket's name for a link
    # to a file of theirs to take (as root would chmod it) at the last moment before chmod
    victim = tmp_path / "victim"
    victim.write_text("secret")
    victim.chmod(0o600)
    chmod = os.chmod

    def swapped_then_chmod(path, mode, *args, **kwargs):
        for entry in tmp_path.iterdir():
            if entry.name.startswith(".s.sock.") and not entry.is_symlink():
                entry.unlink()
                entry.symlink_to(victim)
        return chmod(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "chmod", swapped_then_chmod)
    with pytest.raises(ServeError, match="was replaced while it was made: refused"):
        unix_socket(str(tmp_path / "s.sock"), 0o666, -1)
    monkeypatch.undo()
    assert oct(victim.stat().st_mode & 0o777) == "0o600" and victim.read_text() == "secret"
    # the link renamed into place is left for whoever looks at the refusal, not followed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sock", "victim"]
    assert (tmp_path / "s.sock").is_symlink()


@pytest.mark.parametrize("name", ["../x", "..", ".hidden", "a/b", "-x", "", "a" * 200, "x\0y"])
def test_user_names_that_could_leave_the_folder_are_refused(name):
    with pytest.raises(ServeError, match="bad user name"):
        check_user(name)


def test_good_user_names_and_templates():
    assert check_user("alice.smith+tag@example.com") == "alice.smith+tag@example.com"
    assert check_template("/tmp/%u.nbj")
    assert Listener.parse("milter:inet:[::1]:11332").host == "::1"


def test_systemd_socket_activation_and_readiness(sample_model, tmp_path):
    """A socket handed over as systemd does (LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES, fd 3)
    is served, and READY=1 then STOPPING=1 arrive on NOTIFY_SOCKET."""
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "activated.sock"))
    listening.listen()
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(20)
    env = {
        **ENV,
        "LISTEN_FDS": "1",
        "LISTEN_FDNAMES": "spamd",
        "NOTIFY_SOCKET": str(tmp_path / "notify"),
    }
    fd = listening.fileno()
    process = subprocess.Popen(
        [
            "sh",
            "-c",
            'LISTEN_PID=$$ exec "$0" -m nbspam serve -m "$1"',
            sys.executable,
            str(sample_model),
        ],
        env=env,
        pass_fds=(fd, 3),
        preexec_fn=lambda: os.dup2(fd, 3),  # systemd's first socket is fd 3
        stderr=subprocess.PIPE,
    )
    try:
        try:
            ready = notify.recv(100)
        except TimeoutError:
            process.kill()
            pytest.fail(process.stderr.read().decode())
        assert ready == b"READY=1"
        assert spamd(tmp_path / "activated.sock", "PING")[0] == "SPAMD/1.5 0 PONG"
        process.send_signal(signal.SIGTERM)
        assert notify.recv(100) == b"STOPPING=1"
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
        listening.close()
        notify.close()
        log = process.stderr.read()
    assert b"spamd:systemd" in log, log


def test_a_users_scorer_is_the_site_model_plus_the_layer_exactly_and_small(
    sample_model, sample_messages, tmp_path
):
    """In memory: with records in the site's journal and in alice's layer, alice scores
    with exactly the log-odds of `array_scoring.load_scorer(site, layer)` (what `predict --user`
    uses), bob with the site model's; alice's scorer shares the site's term index and
    holds one weight vector more, 8 bytes a term."""
    import gc
    import tracemalloc

    from nbspam.mail.message import Message
    from nbspam.serve.models import Models
    from nbspam.service import journalled
    from nbspam.service.array_scoring import load_scorer

    (tmp_path / "users").mkdir()
    template = str(tmp_path / "users" / "%u.nbj")
    journalled.learn(
        sample_model, [Message("a", b"Subject: cheap pills\n\nbuy cheap pills")], "spam"
    )
    models = Models(str(sample_model), template)
    layer = models.layer_for("alice")
    hams = [m for m in sample_messages if m.label == "ham"][:3]
    assert journalled.learn(sample_model, hams, "spam", layer=layer).relabelled == 3
    site = models.current()
    tracemalloc.start()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    alice = models.scorer_for("alice")
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert alice is not site and models.scorer_for("bob") is site
    assert alice.scorer._index is site.index
    # the vector and the layer's records; a term index of its own would be 200 kB more
    assert grown < 8 * len(site.model.terms) + 100_000
    expected, site_scorer = load_scorer(sample_model, layer), load_scorer(sample_model)
    for message in MESSAGES:
        data = message.read_bytes()
        assert alice.scorer.predict("-", data).log_odds == expected.predict("-", data).log_odds
        assert site.scorer.predict("-", data).log_odds == site_scorer.predict("-", data).log_odds


def test_reading_the_site_model_builds_no_term_index(tmp_path):
    """A site model without journal records is read a page at a time: loading (or
    reloading) it reads its header, the pages of the values it checks (the ends of the
    term offsets, the intercepts) and its term groups (two small arrays, a page or two),
    and builds no dictionary of its terms; scoring a message then reads the pages its
    terms lead to, and gives the batch scorer's log-odds."""
    from nbspam.serve.models import Models
    from nbspam.service.array_scoring import load_scorer

    model = tmp_path / "site.nbm"
    assert cli_run("train", SAMPLE / "train", "-o", model).exit_code == 0
    site = Models(str(model)).current()
    pages = site.scorer._box.pages
    assert pages is not None and pages.reads <= 5
    opened = pages.reads
    assert site.scorer._tables is None and site.scorer._index is None
    data = (SAMPLE / "new" / "001.eml").read_bytes()
    batch = load_scorer(model)
    batch.build_index()
    assert site.scorer.predict("-", data).log_odds == batch.predict("-", data).log_odds
    assert pages.reads > opened and site.scorer._tables is None


class _SentPackets:
    """A milter session's writer: what it sent, kept."""

    def __init__(self) -> None:
        self.sent = bytearray()

    def write(self, data: bytes) -> None:
        self.sent += data


def test_a_milter_connection_holds_no_more_than_its_message_whatever_it_is_sent():
    # any local user may reach a milter on 127.0.0.1: recipients and macros without end
    # (200 of each here, 64 KiB apiece) must not be kept, or 256 connections fill the memory
    import tracemalloc

    from nbspam.serve import milter, scoring

    session = milter._Session(scoring.Service(models=None), _SentPackets(), {})
    piece = b"x" * (1 << 16)

    async def flood() -> None:
        await session.step(b"M", b"<a@example.com>\0")
        for n in range(200):
            await session.step(b"R", b"<r%d" % n + piece + b"@example.com>\0")
            await session.step(b"D", b"R{m%d}\0" % n + piece + b"\0")

    tracemalloc.start()
    try:
        asyncio.run(flood())
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 2 << 20, f"{held:,} bytes held"


def test_the_milter_picks_the_user_all_recipients_share():
    from nbspam.serve.milter import Message

    def user(*recipients: str) -> str | None:
        message = Message(1 << 20)
        for recipient in recipients:
            message.recipient(recipient)
        return message.user()

    assert user("<alice@example.com>", "<alice@example.org>", "alice") == "alice"
    assert user("<alice@example.com>", "<bob@example.com>", "<alice@example.com>") is None
    assert user() is None
    assert user("<../x@example.com>") is None


@pytest.mark.parametrize(
    ("address", "delimiter", "user"),
    [
        ("<Alice@Example.com>", "", "alice"),  # Postfix and Dovecot (%Lu) fold the case
        ("<alice+lists@example.com>", "", "alice+lists"),  # no delimiter: no extension
        ("<alice+lists@example.com>", "+", "alice"),
        ("<ALICE-Lists+x@example.com>", "+-", "alice"),  # the first delimiter cuts
        ("<+alice@example.com>", "+", "+alice"),  # an extension needs a name before it
        ("<bob@example.com>", "+", "bob"),
        ("alice", "+", "alice"),  # no domain
        ('<"odd@name"@example.com>', "", '"odd@name"'),  # the last @ ends the local part
    ],
)
def test_a_milter_recipient_is_the_user_postfix_delivers_it_to(address, delimiter, user):
    from nbspam.serve.milter import mailbox

    assert mailbox(address, delimiter) == user


@pytest.mark.parametrize(
    ("mailer", "user"),
    [
        (None, "alice"),  # the MTA sends no {rcpt_mailer}: a local recipient
        ("local", "alice"),
        ("virtual", "alice"),
        ("lmtp", "alice"),  # delivered to Dovecot here
        ("smtp", None),  # sent on to alice@elsewhere: no user of this host's
        ("esmtp", None),  # Sendmail's name
        ("relay", None),
        ("error", None),
    ],
)
def test_a_recipient_the_mta_sends_elsewhere_is_no_local_user(mailer, user):
    # mail from a local sender to alice@elsewhere.example was scored with local alice's
    # layer, and its X-Nbspam-Status told whoever reads it there what alice taught her layer
    from nbspam.serve import milter, scoring

    session = milter._Session(scoring.Service(models=None), _SentPackets(), {})

    async def recipients() -> None:
        await session.step(b"M", b"<bob@example.org>\0")
        if mailer is not None:
            await session.step(b"D", b"R{rcpt_mailer}\0" + mailer.encode() + b"\0")
        await session.step(b"R", b"<alice@elsewhere.example>\0")

    asyncio.run(recipients())
    assert session.message.user() == user


def test_one_recipient_sent_elsewhere_leaves_the_message_to_the_site_model():
    from nbspam.serve import milter, scoring

    session = milter._Session(scoring.Service(models=None), _SentPackets(), {})

    async def recipients() -> None:
        await session.step(b"M", b"<bob@example.org>\0")
        await session.step(b"D", b"R{rcpt_mailer}\0local\0")
        await session.step(b"R", b"<alice@example.org>\0")
        await session.step(b"D", b"R{rcpt_mailer}\0smtp\0")
        await session.step(b"R", b"<alice@elsewhere.example>\0")
        await session.step(b"R", b"<alice@example.org>\0")  # its macro is the one before's

    asyncio.run(recipients())
    assert session.message.user() is None
    assert session.rcpt_mailer is None


def test_recipients_of_one_user_in_any_case_or_extension_pick_that_users_layer():
    # ALICE@ and alice+lists@ scored with the site model alone before: two local parts
    from nbspam.serve.milter import Message

    message = Message(1 << 20, "+")
    for recipient in ("<ALICE@example.com>", "<alice+lists@example.com>", "<Alice@example.org>"):
        message.recipient(recipient)
    assert message.user() == "alice"
    message = Message(1 << 20)
    for recipient in ("<ALICE@example.com>", "<alice+lists@example.com>"):
        message.recipient(recipient)
    assert message.user() is None  # without a delimiter, alice+lists is another user


def test_a_milter_queue_id_is_logged_as_one_line_or_not_at_all(sample_model_path):
    # the queue id comes from whoever speaks to the socket: a line break in it wrote a
    # second log line of the sender's making
    from nbspam.serve import milter, scoring
    from nbspam.serve.models import Models

    lines: list[str] = []
    service = scoring.Service(models=Models(str(sample_model_path)), log=lines.append)
    session = milter._Session(service, _SentPackets(), {})

    async def messages() -> None:
        for queue_id in (b"4Xy7Zq1", b"1\nid=2 user=root ham log_odds=-99.000 ms=0.1", b"x" * 5000):
            await session.step(b"D", b"Ei\0" + queue_id + b"\0")
            await session.step(b"M", b"<a@example.com>\0")
            await session.step(b"L", b"Subject\0hello\0")
            await session.step(b"E", b"")

    asyncio.run(messages())
    assert len(lines) == 3 and all("\n" not in line and len(line) < 200 for line in lines)
    assert lines[0].startswith("id=4Xy7Zq1 ")


@pytest.mark.parametrize(
    ("packets", "goes_on", "logged"),
    [
        # a negotiation cut short: the connection ends, said in one line
        ([(b"O", b"\0\0\0\6")], [False], ["milter: refused a negotiation cut short"]),
        # end of headers before any message: a message starts, as at R, L or B
        ([(b"O", struct.pack(">III", 6, 0x31, 0)), (b"N", b"")], [True, True], []),
    ],
)
def test_a_milter_packet_out_of_the_protocol_is_no_internal_error(packets, goes_on, logged):
    # each raised before (struct.error, AttributeError): the server's internal error
    from nbspam.serve import milter, scoring

    lines: list[str] = []
    session = milter._Session(scoring.Service(models=None, log=lines.append), _SentPackets(), {})

    async def send() -> list[bool]:
        return [await session.step(command, data) for command, data in packets]

    assert asyncio.run(send()) == goes_on
    assert lines == logged
