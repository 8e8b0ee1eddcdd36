"""A real Postfix with ``smtpd_milters`` pointing at `nbspam serve`: a message sent with
smtplib arrives in a Maildir with nbspam's header, and a spam message is refused with 550
where the milter is told to reject spam.

Postfix runs as a private instance (``postfix -c DIR start``) with its own queue, data and
mail folders in a temporary folder, smtpd on a free port of 127.0.0.1 and virtual mailbox
delivery to a Maildir there; it is stopped afterwards and nothing of the system's mail
set-up changes. The test skips, saying why, where Postfix is not installed (.ci/run
installs it) or where it is not root (Postfix's master needs it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import smtplib
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.helpers import ENV, SAMPLE, missing
from tests.test_serve import predicted

MAIN_CF = """\
compatibility_level = 3.6
queue_directory = {root}/queue
data_directory = {root}/data
mail_owner = postfix
setgid_group = postdrop
myhostname = mx.example.test
mydomain = example.test
myorigin = mx.example.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
virtual_mailbox_domains = example.test
virtual_mailbox_base = {root}/mail
virtual_mailbox_maps = texthash:{root}/vmailbox
virtual_uid_maps = static:65534
virtual_gid_maps = static:65534
virtual_minimum_uid = 100
alias_maps =
alias_database =
smtputf8_enable = no
maillog_file = {root}/maillog
maillog_file_prefixes = {root}
smtpd_milters = inet:127.0.0.1:{milter}
milter_default_action = tempfail
"""

MASTER_CF = """\
127.0.0.1:{smtp} inet n - n - - smtpd
pickup    unix  n - n 60 1 pickup
cleanup   unix  n - n - 0 cleanup
qmgr      unix  n - n 300 1 qmgr
rewrite   unix  - - n - - trivial-rewrite
bounce    unix  - - n - 0 bounce
defer     unix  - - n - 0 bounce
trace     unix  - - n - 0 bounce
verify    unix  - - n - 1 verify
flush     unix  n - n 1000? 0 flush
proxymap  unix  - - n - - proxymap
smtp      unix  - - n - - smtp
relay     unix  - - n - - smtp
showq     unix  n - n - - showq
error     unix  - - n - - error
retry     unix  - - n - - error
discard   unix  - - n - - discard
virtual   unix  - n n - - virtual
anvil     unix  - - n - 1 anvil
scache    unix  - - n - 1 scache
postlog   unix-dgram n - n - 1 postlogd
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postfix():
    """(root folder, smtp port, milter port) of a private Postfix, stopped afterwards."""
    binary = shutil.which("postfix") or (
        "/usr/sbin/postfix" if os.path.exists("/usr/sbin/postfix") else None
    )
    if binary is None:
        missing("Postfix is not installed (Debian package postfix; .ci/run installs it)")
    if os.geteuid() != 0:
        missing("a private Postfix needs root (its master switches to the postfix user)")
    root = Path(tempfile.mkdtemp(prefix="nbspam-postfix-"))
    os.chmod(root, 0o755)  # the postfix user and the mail user walk through it
    smtp, milter = free_port(), free_port()
    config = root / "config"
    config.mkdir()
    (config / "main.cf").write_text(MAIN_CF.format(root=root, milter=milter))
    (config / "master.cf").write_text(MASTER_CF.format(smtp=smtp))
    (root / "vmailbox").write_text("alice@example.test alice/\n")
    (root / "mail").mkdir()
    (root / "queue").mkdir()
    (root / "data").mkdir()
    shutil.chown(root / "data", "postfix")
    os.chown(root / "mail", 65534, 65534)
    started = subprocess.run([binary, "-c", str(config), "start"], capture_output=True, text=True)
    if started.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"postfix did not start: {started.stderr.strip()}")
    try:
        yield root, smtp, milter
    finally:
        subprocess.run([binary, "-c", str(config), "stop"], capture_output=True)
        time.sleep(0.5)
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _maillog_on_error(root: Path):
    try:
        yield
    except smtplib.SMTPException as exc:
        raise AssertionError(f"{exc}; maillog:\n{(root / 'maillog').read_text()[-3000:]}") from exc


def _smtp_ready(port: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                if s.recv(100).startswith(b"220"):
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "Postfix's smtpd did not answer"
        time.sleep(0.2)


def _delivered(root: Path, count: int) -> list[bytes]:
    new = root / "mail" / "alice" / "new"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = sorted(new.iterdir()) if new.is_dir() else []
        if len(found) >= count:
            return [p.read_bytes() for p in found]
        time.sleep(0.2)
    log = (root / "maillog").read_text() if (root / "maillog").exists() else ""
    pytest.fail(f"no mail delivered; maillog:\n{log[-3000:]}")


def test_postfix_delivers_with_nbspams_header_and_rejects_spam_when_told(
    postfix, sample_model, tmp_path
):
    root, smtp, milter = postfix
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "nbspam", "serve", "-m", str(sample_model)),
            *("--listen", f"milter:inet:127.0.0.1:{milter}", "--milter-action", "spam=reject"),
        ],
        env=ENV,
        stderr=open(tmp_path / "serve.log", "wb"),
    )
    try:
        _smtp_ready(smtp)
        deadline = time.monotonic() + 20
        while b"ready:" not in (tmp_path / "serve.log").read_bytes():
            assert server.poll() is None and time.monotonic() < deadline, (
                "nbspam serve did not start"
            )
            time.sleep(0.1)
        messages = sorted((SAMPLE / "new").iterdir())
        verdicts = predicted(sample_model, messages)
        ham = next(p for p in messages if verdicts[str(p)]["verdict"] == "ham")
        spam = next(p for p in messages if verdicts[str(p)]["verdict"] == "spam")
        with smtplib.SMTP("127.0.0.1", smtp, timeout=30) as client, _maillog_on_error(root):
            client.sendmail("bob@sender.test", ["alice@example.test"], ham.read_bytes())
            with pytest.raises(smtplib.SMTPDataError) as refused:
                client.sendmail("bob@sender.test", ["alice@example.test"], spam.read_bytes())
        assert refused.value.smtp_code == 550
        assert b"nbspam verdict spam" in refused.value.smtp_error
        (delivered,) = _delivered(root, 1)
        status = [line for line in delivered.split(b"\n") if line.startswith(b"X-Nbspam-Status:")]
        assert len(status) == 1
        assert status[0].startswith(b"X-Nbspam-Status: ham; log_odds=")
        log = (tmp_path / "serve.log").read_text()
        maillog = (root / "maillog").read_text()
        assert "user=alice ham" in log, maillog
        assert "user=alice ham" in log and "user=alice spam" in log
        # a recipient Postfix sends on by smtp ({rcpt_mailer} smtp) is no local user: a
        # local alice's layer would tell the world what she taught it
        with smtplib.SMTP("127.0.0.1", smtp, timeout=30) as client, _maillog_on_error(root):
            client.sendmail("bob@sender.test", ["alice@elsewhere.test"], ham.read_bytes())
        deadline = time.monotonic() + 20
        while log.count(" ham log_odds=") < 2:
            assert time.monotonic() < deadline, log
            time.sleep(0.1)
            log = (tmp_path / "serve.log").read_text()
        assert log.count("user=alice ham") == 1 and "user=- ham" in log, log
    finally:
        server.terminate()
        server.wait(timeout=20)
