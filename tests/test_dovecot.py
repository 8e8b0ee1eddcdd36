"""A real Dovecot with IMAPSieve and contrib/dovecot: a message moved into Junk over IMAP is
learned as spam, one moved out of Junk as ham.

Dovecot runs on 127.0.0.1 with a test user whose mail belongs to ``nobody``; the Sieve
rules pipe each moved message to contrib/dovecot/nbspam-learn, which runs ``nbspam learn``
as that user. The test skips, saying why, where Dovecot and Pigeonhole are not installed
(`.ci/run` installs them), where it is not root (Dovecot's master needs it to switch to
the test user), or where the user ``nobody`` cannot run this checkout's nbspam.
"""

from __future__ import annotations

import imaplib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nbspam.store.modelfile import load_model
from tests.helpers import ROOT, SAMPLE, cli_run, missing

CONTRIB = ROOT / "contrib" / "dovecot"
NOBODY = 65534

INTO_JUNK = b"From: a@example.com\r\nSubject: cheap pills\r\n\r\nzqxintojunk buy now\r\n"
OUT_OF_JUNK = b"From: b@example.com\r\nSubject: the meeting\r\n\r\nzqxoutofjunk see you\r\n"

CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
default_internal_user = dovecot
default_login_user = dovenull
first_valid_uid = 1
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root}/users
}}
mail_location = maildir:~/Maildir
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Junk {{
    auto = create
    special_use = \\Junk
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
}}
!include {contrib}/90-nbspam-imapsieve.conf
plugin {{
  sieve_pipe_bin_dir = {root}/bin
  imapsieve_mailbox1_before = file:{root}/sieve/report-spam.sieve
  imapsieve_mailbox2_before = file:{root}/sieve/report-ham.sieve
}}
"""


def python_for_nobody(pythonpath: str) -> str:
    """A Python that the user nobody can run with this checkout's nbspam and its packages,
    or skip."""
    for python in (sys.executable, "/usr/bin/python3"):
        ok = subprocess.run(
            [
                "runuser",
                "-u",
                "nobody",
                "--",
                "env",
                f"PYTHONPATH={pythonpath}",
                python,
                "-c",
                "import numpy, nbspam.service.update",
            ],
            capture_output=True,
            check=False,
        )
        if ok.returncode == 0:
            return python
    missing(f"the user nobody cannot run this checkout's nbspam ({ROOT} or Python unreadable)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dovecot(request):
    """(port, model, root) of a running Dovecot whose moves run contrib's wrapper; with the
    parameter "layers", the wrapper learns into each user's layer in root/layers."""
    for tool in ("dovecot", "sievec", "runuser"):
        if shutil.which(tool) is None:
            missing(
                f"{tool} not found: Dovecot and Pigeonhole are needed "
                "(apt-get install dovecot-imapd dovecot-sieve; .ci/run installs them)"
            )
    if os.geteuid() != 0:
        missing("starting Dovecot with a test user needs root")
    root = Path(tempfile.mkdtemp(prefix="nbspam-dovecot-", dir="/tmp"))
    os.chmod(root, 0o755)
    server = None
    try:
        site = [p for p in sys.path if p.endswith("site-packages")]
        pythonpath = os.pathsep.join([str(ROOT), *site])
        python = python_for_nobody(pythonpath)
        for sub in ("run", "state", "home", "bin", "sieve"):
            (root / sub).mkdir()
        port = free_port()
        (root / "dovecot.conf").write_text(CONFIG.format(root=root, port=port, contrib=CONTRIB))
        (root / "users").write_text(f"test:{{PLAIN}}pass:{NOBODY}:{NOBODY}::{root}/home\n")
        for rule in ("report-spam.sieve", "report-ham.sieve"):
            shutil.copy(CONTRIB / rule, root / "sieve")
            subprocess.run(
                ["sievec", "-c", root / "dovecot.conf", root / "sieve" / rule], check=True
            )
        # the wrapper as an administrator installs it: its two paths set
        launcher = root / "bin" / "nbspam"
        launcher.write_text(
            f'#!/bin/sh\nPYTHONPATH="{pythonpath}" exec "{python}" -m nbspam "$@"\n'
        )
        model = root / "home" / "spam.nbm"
        assert cli_run("train", SAMPLE / "train", "-o", model).exit_code == 0
        wrapper = (CONTRIB / "nbspam-learn").read_text()
        wrapper = wrapper.replace("/usr/local/bin/nbspam", str(launcher))
        wrapper = wrapper.replace("/var/lib/nbspam/spam.nbm", str(model))
        if getattr(request, "param", None) == "layers":
            (root / "home" / "layers").mkdir()
            template = root / "home" / "layers" / "%u.nbj"
            wrapper = wrapper.replace(
                'NBSPAM_USER_MODELS="${NBSPAM_USER_MODELS:-}"',
                f'NBSPAM_USER_MODELS="${{NBSPAM_USER_MODELS:-{template}}}"',
            )
        (root / "bin" / "nbspam-learn").write_text(wrapper)
        for program in ("nbspam", "nbspam-learn"):
            os.chmod(root / "bin" / program, 0o755)
        for path in [root / "home", *(root / "home").rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        server = subprocess.Popen(["dovecot", "-F", "-c", root / "dovecot.conf"])
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    log = (
                        (root / "dovecot.log").read_text()
                        if (root / "dovecot.log").exists()
                        else ""
                    )
                    pytest.fail(f"Dovecot did not start on 127.0.0.1:{port}\n{log}")
                time.sleep(0.1)
        yield port, model, root
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)
        shutil.rmtree(root, ignore_errors=True)


def doc_counts(model_path: Path, word: str) -> dict[str, int]:
    model = load_model(model_path)
    if word not in model.terms:
        return {}
    column = model.terms.index(word)
    return dict(zip(model.labels, model.doc_count[:, column].tolist()))


def move_two_messages(port: int) -> None:
    """Into Junk one message, out of Junk another, as the user "test"."""
    imap = imaplib.IMAP4("127.0.0.1", port)
    try:
        imap.login("test", "pass")
        assert imap.append("INBOX", None, None, INTO_JUNK)[0] == "OK"
        assert imap.append("Junk", None, None, OUT_OF_JUNK)[0] == "OK"
        imap.select("INBOX")
        uid = imap.uid("SEARCH", None, "BODY", "zqxintojunk")[1][0].split()[-1]
        assert imap.uid("MOVE", uid, "Junk")[0] == "OK"
        imap.select("Junk")
        uid = imap.uid("SEARCH", None, "BODY", "zqxoutofjunk")[1][0].split()[-1]
        assert imap.uid("MOVE", uid, "INBOX")[0] == "OK"
    finally:
        imap.logout()


def test_moves_over_imap_are_learned_with_their_labels(dovecot):
    port, model, root = dovecot
    before = load_model(model).class_count.tolist()
    move_two_messages(port)
    log = (root / "dovecot.log").read_text()
    assert doc_counts(model, "zqxintojunk") == {"ham": 0, "spam": 1}, log
    assert doc_counts(model, "zqxoutofjunk") == {"ham": 1, "spam": 0}, log
    after = load_model(model).class_count.tolist()
    assert after == [before[0] + 1, before[1] + 1]
    assert "nbspam-learn" not in log  # the wrapper says nothing when all goes well


@pytest.mark.parametrize("dovecot", ["layers"], indirect=True)
def test_with_user_layers_moves_train_the_users_layer_only(dovecot):
    from nbspam.store.layers import layered

    port, model, root = dovecot
    site = model.read_bytes()
    move_two_messages(port)
    log = (root / "dovecot.log").read_text()
    assert model.read_bytes() == site and not os.path.exists(f"{model}.journal"), log
    layer = root / "home" / "layers" / "test.nbj"
    assert layer.exists(), log
    assert layer.stat().st_uid == NOBODY
    mine = layered(load_model(model), layer)
    column = {word: mine.terms.index(word) for word in ("zqxintojunk", "zqxoutofjunk")}
    assert mine.doc_count[:, column["zqxintojunk"]].tolist() == [0, 1]
    assert mine.doc_count[:, column["zqxoutofjunk"]].tolist() == [1, 0]
    assert "nbspam-learn" not in log
