"""Which files nbspam reads: no symbolic link out of the folder given, no URL or glob made of
a listed file name, no unknown URL scheme, no FIFO waited on, no empty input learned.

Each case is what a hostile neighbour on a shared mail host could set up for a command run
as root or as another user, checked on the command's real output, exit status and model.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from nbspam.cli.commands import cli
from nbspam.store.modelfile import load_model
from tests.helpers import (
    ENV,
    NEIGHBOUR,
    ROOT,
    SAMPLE,
    called_path,
    cli_run,
    nbspam_process,
    neighbours,
)

LINK_OUT = "a symbolic link out of the folder, not followed (--follow-links follows it)"
SECRET = b"Subject: root only\n\nzqxsecretword zqxsecretword password\n"
WAIT = 60  # seconds: generous, it only proves that nothing hangs


def vocabulary(model_path: Path) -> set[str]:
    return set(load_model(model_path).terms)


def junk_with_a_link_out(tmp_path: Path) -> tuple[Path, Path]:
    """A Maildir ``Junk`` with one message and, in cur/, a link to a secret file outside."""
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    junk = tmp_path / "Maildir" / ".Junk"
    for part in ("cur", "new", "tmp"):
        (junk / part).mkdir(parents=True)
    (junk / "cur" / "1700000000.M1P1.host:2,S").write_bytes(
        (SAMPLE / "train" / "spam" / "001.eml").read_bytes()
    )
    (junk / "cur" / "x").symlink_to(secret)
    return junk, secret


# -- symbolic links -------------------------------------------------------------------------


def test_sync_does_not_learn_a_secret_behind_a_link_out_of_the_folder(sample_model, tmp_path):
    junk, _ = junk_with_a_link_out(tmp_path)
    result = cli_run("sync", "-m", sample_model, f"spam={junk}")
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines()[0] == f"{junk}/cur/x: {LINK_OUT}"
    assert "zqxsecretword" not in vocabulary(sample_model)
    state = Path(f"{sample_model}.sync").read_text()
    assert "secret" not in state and "/x\t" not in state


def test_follow_links_restores_following_a_link_out(sample_model, tmp_path):
    junk, _ = junk_with_a_link_out(tmp_path)
    result = cli_run("learn", "-m", sample_model, "--label", "spam", "--follow-links", junk)
    assert result.exit_code == 0, result.output
    assert "zqxsecretword" in vocabulary(sample_model)


def test_a_link_to_a_folder_out_of_the_folder_is_skipped_and_reported(sample_model, tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "shadow").write_bytes(SECRET)
    mail = tmp_path / "mail"
    mail.mkdir()
    (mail / "a.eml").write_bytes((SAMPLE / "new" / "001.eml").read_bytes())
    (mail / "etcdir").symlink_to(etc)
    for command in (
        ["learn", "-m", sample_model, "--label", "spam"],
        ["train", "-o", tmp_path / "new.nbm"],
    ):
        data = [mail] if command[0] == "learn" else [f"spam={mail}", f"ham={SAMPLE / 'new'}"]
        result = cli_run(*command, *data)
        assert result.exit_code == 3, result.output
        assert f"{mail}/etcdir: {LINK_OUT}" in result.stderr.splitlines()
    assert "zqxsecretword" not in vocabulary(sample_model)
    assert "zqxsecretword" not in vocabulary(tmp_path / "new.nbm")


def test_a_link_inside_the_folder_is_still_followed(sample_model_path, tmp_path):
    mail = tmp_path / "mail"
    (mail / "sub").mkdir(parents=True)
    (mail / "sub" / "a.eml").write_bytes((SAMPLE / "new" / "001.eml").read_bytes())
    (mail / "alias.eml").symlink_to(mail / "sub" / "a.eml")
    result = cli_run("predict", "-m", sample_model_path, "-f", "tsv", mail)
    assert result.exit_code == 0, result.output
    assert [line.split("\t")[0] for line in result.stdout.splitlines()[1:]] == [
        f"{mail}/sub/a.eml",  # alias.eml, named by the file it leads to
        f"{mail}/sub/a.eml",
    ]


def test_a_link_to_proc_self_is_never_walked_and_the_command_ends(sample_model_path, tmp_path):
    mail = tmp_path / "mail"
    mail.mkdir()
    (mail / "a.eml").write_bytes((SAMPLE / "new" / "001.eml").read_bytes())
    (mail / "p").symlink_to("/proc/self")
    for options in ((), ("--follow-links",)):
        result = nbspam_process("predict", "-m", sample_model_path, *options, mail, timeout=WAIT)
        assert result.returncode == 3, result.stderr
        assert result.stderr.decode() == f"{mail}/p: a symbolic link into /proc, never followed\n"
        assert len(result.stdout.splitlines()) == 1


# -- URLs and globs -------------------------------------------------------------------------


class Listener:
    """A local TCP port that counts the connections made to it (and closes each at once)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> int:
        self._stop.set()
        self._thread.join()
        self.sock.close()
        return self.connections


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def test_a_url_line_of_files_from_is_a_file_name_and_connects_nowhere(
    sample_model_path, tmp_path, listener
):
    url = f"ftp://anonymous@127.0.0.1:{listener.port}/inbox/msg.eml"
    listed = f"{url}\n{SAMPLE / 'new' / '001.eml'}\n"
    for command in ("predict", "explain"):
        result = cli_run(command, "-m", sample_model_path, "--files-from", "-", input=listed)
        assert result.exit_code == 3, result.output
        assert result.stderr == f"{url}: no such file or directory\n"
    assert listener.close() == 0


@pytest.mark.parametrize("scheme", ["ftp", "sftp", "reference", "data", "dir", "file"])
def test_a_url_of_a_scheme_not_allowed_is_refused_in_one_line(sample_model_path, listener, scheme):
    url = f"{scheme}://127.0.0.1:{listener.port}/msg.eml"
    result = cli_run("predict", "-m", sample_model_path, url)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"Error: {url}: no such file, and not a URL nbspam reads "
        "(it reads s3://, gs://, az://, http:// and https://)\n"
    )
    assert listener.close() == 0


def test_a_chain_of_urls_is_refused(sample_model, listener):
    # learn on a copy: a learn that reads nothing still leaves the model's lock beside it
    url = f"s3://bucket/x::ftp://127.0.0.1:{listener.port}/msg.eml"
    result = cli_run("learn", "-m", sample_model, "--label", "spam", url)
    assert result.exit_code == 1 and result.stderr.startswith(f"Error: {url}: no such file")
    assert listener.close() == 0


def learned_pair(model: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "g" / "d"
    folder.mkdir(parents=True)
    for name, sample in (("a.eml", "001.eml"), ("b.eml", "002.eml")):
        (folder / name).write_bytes((SAMPLE / "new" / sample).read_bytes())
    result = cli_run("learn", "-m", model, "--label", "spam", folder)
    assert result.exit_code == 0, result.output
    return folder


def test_a_glob_line_of_files_from_is_a_file_name_not_a_pattern(sample_model, tmp_path):
    folder = learned_pair(sample_model, tmp_path)
    before = sample_model.read_bytes()
    pattern = f"{folder}/*.eml"
    for null, listed in (((), f"{pattern}\n"), (("-0",), f"{pattern}\0")):
        result = cli_run("forget", "-m", sample_model, "--files-from", "-", *null, input=listed)
        assert result.exit_code == 3, result.output
        assert result.stderr == f"{pattern}: no such file or directory\nforgot 0 message(s)\n"
    assert sample_model.read_bytes() == before


def test_literal_paths_and_its_variable_read_a_pattern_as_a_file_name(sample_model, tmp_path):
    folder = learned_pair(sample_model, tmp_path)
    pattern = f"{folder}/*.eml"
    runner = CliRunner()
    for args, env in (
        (["--literal-paths"], {}),
        ([], {"NBSPAM_LITERAL_PATHS": "1"}),
    ):
        result = runner.invoke(cli, ["predict", "-m", str(sample_model), *args, pattern], env=env)
        assert (result.exit_code, result.stdout) == (3, ""), result.output
        assert result.stderr == f"{pattern}: no such file or directory\n"
    result = cli_run("predict", "-m", sample_model, "-f", "tsv", pattern)  # the pattern is read
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 3


def test_help_teaches_the_new_options():
    for command in ("train", "evaluate", "predict", "explain", "learn", "forget"):
        text = cli_run(command, "--help").stdout
        assert "--follow-links" in text and "--literal-paths" in text, command
        assert "NBSPAM_LITERAL_PATHS" in text, command
    assert "--follow-links" in cli_run("sync", "--help").stdout


# -- FIFOs ----------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_fifo_is_refused_without_waiting_wherever_it_is_named(sample_model, tmp_path):
    fifo = tmp_path / "msg.eml"
    os.mkfifo(fifo)
    line = f"{fifo}: not a regular file (a FIFO or a device)"
    for args, stdin in (
        (["predict", "-m", sample_model, fifo], b""),
        (["predict", "-m", sample_model, "--files-from", "-"], f"{fifo}\n".encode()),
        (["learn", "-m", sample_model, "--label", "spam", fifo], b""),
        (
            ["train", f"spam={fifo}", f"spam={SAMPLE / 'train' / 'spam'}", f"ham={SAMPLE / 'new'}"]
            + ["-o", tmp_path / "m.nbm"],
            b"",
        ),
    ):
        result = nbspam_process(*args, stdin=stdin, timeout=WAIT)
        assert result.returncode == 3, result.stderr
        assert line in result.stderr.decode().splitlines(), result.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_filter_neither_waits_on_nor_follows_a_name_planted_in_its_destination(
    sample_model, tmp_path
):
    """Whoever may write the Junk folder can take the names of the messages filter will
    move there: a FIFO (which hung the run), or a link out of the folder to a copy of the
    message (taken for the message, which was then unlinked). Each is left alone and the
    message moved beside it, as a file of its own."""
    inbox, junk = tmp_path / "Maildir", tmp_path / "Maildir" / ".Junk"
    for folder in (inbox, junk):
        for part in ("cur", "new", "tmp"):
            (folder / part).mkdir(parents=True, exist_ok=True)
    spam = sorted((SAMPLE / "train" / "spam").iterdir())[:2]
    for path in spam:
        (inbox / "new" / path.name).write_bytes(path.read_bytes())
    os.mkfifo(junk / "new" / spam[0].name)
    copy = tmp_path / "copy.eml"
    copy.write_bytes(spam[1].read_bytes())
    (junk / "new" / spam[1].name).symlink_to(copy)

    result = nbspam_process("filter", "-m", sample_model, inbox, "--move-spam", junk, timeout=WAIT)
    assert result.returncode == 0, result.stderr
    assert list((inbox / "new").iterdir()) == []
    moved = [p for p in (junk / "new").iterdir() if p.name not in {s.name for s in spam}]
    assert sorted(p.read_bytes() for p in moved) == sorted(p.read_bytes() for p in spam)
    assert not any(p.is_symlink() for p in moved)
    assert (junk / "new" / spam[1].name).is_symlink() and copy.exists()


def _one_spam_in_an_inbox(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(inbox, junk, spam): a Maildir with a Junk folder, a sample spam in the inbox's new/."""
    inbox, junk = tmp_path / "Maildir", tmp_path / "Maildir" / ".Junk"
    for folder in (inbox, junk):
        for part in ("cur", "new", "tmp"):
            (folder / part).mkdir(parents=True, exist_ok=True)
    spam = sorted((SAMPLE / "train" / "spam").iterdir())[0]
    (inbox / "new" / spam.name).write_bytes(spam.read_bytes())
    return inbox, junk, spam


def test_filter_moves_a_message_whose_name_in_the_destination_is_a_link_to_it(
    sample_model, tmp_path
):
    """A link planted at the message's name in Junk, leading back to the message in the
    inbox, was taken for the message itself: filter said it was moved, left it in the
    inbox and recorded it as filtered, so it stayed there for good."""
    inbox, junk, spam = _one_spam_in_an_inbox(tmp_path)
    (junk / "new" / spam.name).symlink_to(inbox / "new" / spam.name)

    result = nbspam_process("filter", "-m", sample_model, inbox, "--move-spam", junk)
    assert result.returncode == 0, result.stderr
    assert list((inbox / "new").iterdir()) == []
    [moved] = [p for p in (junk / "new").iterdir() if p.name != spam.name]
    assert not moved.is_symlink() and moved.read_bytes() == spam.read_bytes()
    assert (junk / "new" / spam.name).is_symlink()


@pytest.mark.parametrize("tag", ["\xb2", "99999999999999999999"])
def test_filter_goes_on_past_a_leftover_name_that_holds_no_process_id(sample_model, tmp_path, tag):
    """filter removes the copies a killed run left in a destination's tmp/, named by the
    process that wrote them, unless it still runs. A name planted there with a number that
    is no process id (a superscript, which isdigit() passes and int() refuses, or too
    large for os.kill) stopped every run with an internal error."""
    inbox, junk, spam = _one_spam_in_an_inbox(tmp_path)
    (junk / "tmp" / f".nbspam-tmp.{tag}.x").write_bytes(b"")

    result = nbspam_process("filter", "-m", sample_model, inbox, "--move-spam", junk)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (junk / "new").iterdir()] == [spam.name]


def test_a_destination_whose_new_is_a_dangling_link_is_refused(sample_model, tmp_path):
    """A Junk Maildir whose new/ was a link to nothing was no Maildir (it has no new/
    folder), so it was taken for a plain folder and the spam went into Junk itself."""
    inbox, junk, spam = _one_spam_in_an_inbox(tmp_path)
    (junk / "new").rmdir()
    (junk / "new").symlink_to(tmp_path / "nothing")
    result = nbspam_process("filter", "-m", sample_model, inbox, "--move-spam", junk)
    assert (result.returncode, result.stderr.decode()) == (
        1,
        f"Error: cannot move messages to {junk}/new: a symbolic link or a file, not a folder\n",
    )
    assert sorted(p.name for p in junk.iterdir()) == ["cur", "new", "tmp"]
    assert [p.name for p in (inbox / "new").iterdir()] == [spam.name]


def test_filter_moves_nothing_into_a_destination_behind_a_neighbours_link(sample_model, tmp_path):
    """A user replaced her Junk with a link to a folder of root's (/etc/profile.d): a job of
    root's moved her spam there under names of her choosing (evil.sh), where every login
    shell runs it. A destination whose way passes another user's link is refused."""
    inbox, junk, spam = _one_spam_in_an_inbox(tmp_path)
    profile = tmp_path / "profile.d"
    profile.mkdir()
    for part in ("cur", "new", "tmp"):
        (junk / part).rmdir()
    junk.rmdir()
    junk.symlink_to(profile)
    neighbours(junk)
    result = nbspam_process("filter", "-m", sample_model, inbox, "--move-spam", junk)
    assert (result.returncode, result.stderr.decode()) == (
        1,
        f"Error: destination {junk}: {junk} is a symbolic link of another user "
        f"(uid {NEIGHBOUR}): refusing to follow it; remove it\n",
    )
    assert list(profile.iterdir()) == []
    assert [p.name for p in (inbox / "new").iterdir()] == [spam.name]


def test_filter_skips_a_folder_behind_a_neighbours_link(sample_model, tmp_path):
    """A user replaced the Maildir a job of root's filters with a link to a folder of
    root's: its files were scored as her mail and the spam-looking ones moved out of it into
    her Junk. A path whose way passes another user's link is skipped, said in one line."""
    inbox, junk, spam = _one_spam_in_an_inbox(tmp_path)
    roots = tmp_path / "etc"
    roots.mkdir()
    (roots / "shadow").write_bytes(spam.read_bytes())  # a file of root's that scores as spam
    named = tmp_path / "Mail"
    named.symlink_to(roots)
    neighbours(named)
    result = nbspam_process("filter", "-m", sample_model, named, "--move-spam", junk)
    assert result.returncode == 3, result.stderr
    assert result.stderr.decode().splitlines()[0] == (
        f"{named}: {named} is a symbolic link of another user (uid {NEIGHBOUR}): "
        "refusing to follow it; remove it"
    )
    assert [p.name for p in roots.iterdir()] == ["shadow"]
    assert list((junk / "new").iterdir()) == []


# -- empty input ----------------------------------------------------------------------------


def test_empty_stdin_is_not_learned_and_ends_with_status_3(sample_model):
    before = sample_model.read_bytes()
    for data in (b"", b"\n\n"):
        result = nbspam_process("learn", "-m", sample_model, "--label", "spam", "-", stdin=data)
        assert result.returncode == 3, result.stderr
        assert result.stderr.decode().splitlines()[0] == "-: empty, not a message"
    assert sample_model.read_bytes() == before


def test_empty_stdin_to_predict_is_skipped_on_the_quick_path_and_the_full_one(sample_model_path):
    for args in ((), ("-f", "jsonl", "-j", "1")):  # the second goes through click
        result = nbspam_process("predict", "-m", sample_model_path, *args, stdin=b"")
        assert (result.returncode, result.stdout) == (3, b""), result.stderr
        assert result.stderr == b"-: empty, not a message\n"


def test_the_dovecot_wrapper_learns_nothing_from_empty_input(sample_model, tmp_path):
    program = tmp_path / "nbspam"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m nbspam "$@"\n')
    program.chmod(0o755)
    before = sample_model.read_bytes()
    result = subprocess.run(
        [ROOT / "contrib" / "dovecot" / "nbspam-learn", "spam"],
        input=b"",
        capture_output=True,
        env={**ENV, "NBSPAM": str(program), "NBSPAM_MODEL": str(sample_model)},
        timeout=WAIT,
    )
    assert result.returncode == 3
    assert result.stderr.decode().startswith("nbspam-learn spam: -: empty, not a message\n")
    assert sample_model.read_bytes() == before


class _Hung(Exception):
    """The move waited on a FIFO."""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("swap", ["link", "fifo"])
def test_a_move_across_file_systems_reads_no_link_or_fifo_put_in_the_messages_place(
    tmp_path, monkeypatch, swap
):
    """Between a message's reading and its move, whoever owns its folder may put in its
    place a link (to a file of root's, or to /dev/zero, which filled the other disk) or a
    FIFO (which hung the run). A move across file systems copies the file: it must copy
    neither, and leave the name where it is."""
    import errno
    import signal

    from nbspam.service.mailstore import move_message, open_destination

    inbox = tmp_path / "Maildir"
    for part in ("cur", "new", "tmp"):
        (inbox / part).mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    source = inbox / "new" / "1700000000.M1P1.host"
    if swap == "link":
        source.symlink_to(secret)
    else:
        os.mkfifo(source)

    def across(real):
        def call(src, dst, *args, **kwargs):
            # the inbox is on another file system
            if called_path(src, kwargs.get("src_dir_fd")).startswith(str(inbox.resolve())):
                raise OSError(errno.EXDEV, "Invalid cross-device link", src, None, dst)
            return real(src, dst, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "link", across(os.link))
    monkeypatch.setattr(os, "rename", across(os.rename))
    junk = open_destination(str(tmp_path / "Junk"), create=True)

    def hung(signum, frame):
        raise _Hung

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with pytest.raises(OSError):
            move_message(str(source), "new", junk, b"\0" * 16)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert [p for part in ("cur", "new", "tmp") for p in (tmp_path / "Junk" / part).iterdir()] == []
    assert os.path.lexists(source) and secret.read_bytes() == SECRET


def _across_file_systems(monkeypatch, inbox: Path) -> None:
    """Make every link out of ``inbox`` fail as one to another file system does (EXDEV),
    so that a move copies."""
    import errno

    real_link = os.link

    def across(src, dst, *args, **kwargs):
        if called_path(src, kwargs.get("src_dir_fd")).startswith(str(inbox.resolve())):
            raise OSError(errno.EXDEV, "Invalid cross-device link", src, None, dst)
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", across)


def test_a_copy_across_file_systems_is_never_set_user_id(tmp_path, monkeypatch):
    """A move across file systems copies the message, as the user running filter (root's
    job), with the message's mode: a message its owner made set-user-ID (and, once it was
    read, a program) became a set-user-ID program of root's in their Junk."""
    from nbspam.service.mailstore import move_message, open_destination

    inbox = tmp_path / "Maildir"
    for part in ("cur", "new", "tmp"):
        (inbox / part).mkdir(parents=True)
    source = inbox / "new" / "1700000000.M1P1.host"
    source.write_bytes(SECRET)
    source.chmod(0o6755)
    _across_file_systems(monkeypatch, inbox)
    junk = open_destination(str(tmp_path / "Junk"), create=True)
    moved = Path(move_message(str(source), "new", junk, b"\0" * 16))
    assert moved == tmp_path / "Junk" / "new" / source.name
    assert oct(moved.stat().st_mode & 0o7777) == oct(0o755)
    assert moved.read_bytes() == SECRET and not source.exists()


def test_a_copy_across_file_systems_belongs_to_the_messages_owner(tmp_path, monkeypatch):
    """Root's filter sorts alice's mail (0600, hers, as every Maildir file is): within a
    file system the moved message is the same file, hers; across file systems the copy was
    root's, 0600, and alice could no longer read her own Junk. The copy is the owner's and
    group's, as ``mv`` makes it, and still never set-user-ID."""
    from nbspam.service.mailstore import move_message, open_destination

    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    inbox = tmp_path / "Maildir"
    for part in ("cur", "new", "tmp"):
        (inbox / part).mkdir(parents=True)
    junk = open_destination(str(tmp_path / "Junk"), create=True)
    _across_file_systems(monkeypatch, inbox)
    for name, mode, copied in (("1.host", 0o600, 0o600), ("2.host", 0o6755, 0o755)):
        source = inbox / "new" / name
        source.write_bytes(SECRET)
        os.chown(source, 4701, 4700)
        source.chmod(mode)
        moved = os.stat(move_message(str(source), "new", junk, bytes(16)))
        assert (moved.st_uid, moved.st_gid, oct(moved.st_mode & 0o7777)) == (
            4701,
            4700,
            oct(copied),
        )


def test_filter_moves_nothing_through_a_link_in_place_of_a_destinations_folder(
    sample_model, tmp_path
):
    """Whoever owns the Junk Maildir (a user whose mail root's cron job sorts) can make its
    new/ a link to another folder (/etc/profile.d): the messages, under names of that user's
    choosing, went there. Such a destination is refused before anything moves, and one
    whose folder is swapped for a link after that moves nothing there."""
    from nbspam.service.mailstore import move_message, open_destination

    inbox, junk, outside = tmp_path / "Maildir", tmp_path / "Junk", tmp_path / "outside"
    for folder in (inbox, junk):
        for part in ("cur", "new", "tmp"):
            (folder / part).mkdir(parents=True)
    outside.mkdir()
    spam = sorted((SAMPLE / "train" / "spam").iterdir())[:2]
    for path in spam:
        (inbox / "new" / f"{path.stem}.sh").write_bytes(path.read_bytes())
    opened = open_destination(str(junk), create=True)
    (junk / "new").rmdir()
    (junk / "new").symlink_to(outside)

    result = nbspam_process("filter", "-m", sample_model, inbox, "--move-spam", junk)
    assert result.returncode == 1 and f"{junk / 'new'}" in result.stderr.decode()
    assert len(result.stderr.decode().splitlines()) == 1, result.stderr
    with pytest.raises(OSError):  # swapped after the destination was opened
        move_message(str(inbox / "new" / f"{spam[0].stem}.sh"), "new", opened, b"\0" * 16)
    assert list(outside.iterdir()) == [] and len(list((inbox / "new").iterdir())) == 2


def test_a_link_swapped_in_for_new_just_before_the_move_is_not_moved_through(
    sample_model, tmp_path, monkeypatch
):
    """Junk/new/ was checked to be a folder before each move, but the move named it again:
    its owner, swapping it for a link to another folder (/etc/profile.d) between the check
    and the link call, got the message there under a name of their choosing. The move now
    goes into the folder that was checked, wherever it has been moved to."""
    import nbspam.service.mailstore as mailstore

    inbox, junk, spam = _one_spam_in_an_inbox(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    place = mailstore._place  # runs after the checks, just before the link

    def swap_then_place(*args, **kwargs):
        if not (junk / "new").is_symlink():
            (junk / "new").rename(junk / "new.checked")
            (junk / "new").symlink_to(outside)
        return place(*args, **kwargs)

    monkeypatch.setattr(mailstore, "_place", swap_then_place)
    result = cli_run("filter", "-m", sample_model, inbox, "--move-spam", junk)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == (
        "filter: 1 new, 0 skipped (filtered before), 1 moved, 0 kept, 0 error(s)"
    )
    assert list(outside.iterdir()) == []
    assert [p.name for p in (junk / "new.checked").iterdir()] == [spam.name]
    assert list((inbox / "new").iterdir()) == []


def test_a_folder_above_the_message_swapped_for_a_link_takes_no_file_out_of_its_target(
    sample_model, tmp_path, monkeypatch
):
    """Whoever owns a folder being filtered could, once a message was read, make the folder
    above it a link to another tree (/), where the message's folder and name (etc/x) are a
    file of root's: the move linked that file into Junk and unlinked it from /etc. A message
    is moved only out of the folder it was found in."""
    import nbspam.service.mailstore as mailstore

    inbox, junk, system = tmp_path / "inbox", tmp_path / "Junk", tmp_path / "system"
    spam = sorted((SAMPLE / "train" / "spam").iterdir())[0]
    for root in (inbox, system):
        (root / "etc").mkdir(parents=True)
    (inbox / "etc" / spam.name).write_bytes(spam.read_bytes())
    (system / "etc" / spam.name).write_bytes(SECRET)
    move = mailstore.move_message

    def swap_then_move(*args, **kwargs):
        if not inbox.is_symlink():
            inbox.rename(tmp_path / "inbox.found")
            inbox.symlink_to(system)
        return move(*args, **kwargs)

    monkeypatch.setattr(mailstore, "move_message", swap_then_move)
    result = cli_run("filter", "-m", sample_model, inbox, "--move-spam", junk)
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines()[0] == (
        f"{inbox / 'etc' / spam.name}: not moved to {junk}: not the folder found before: "
        "another was put in its place"
    )
    assert (system / "etc" / spam.name).read_bytes() == SECRET
    assert list((junk / "new").iterdir()) == []
    assert (tmp_path / "inbox.found" / "etc" / spam.name).read_bytes() == spam.read_bytes()


SWAPPED = "its folder is not the one it was listed in: another was put in its place"


def _a_secret_of_roots_named_as_hers(
    tmp_path: Path, name: str, part: str, label: str
) -> tuple[Path, Path]:
    """(her Maildir ``name``, root's Maildir): in the ``part`` folder of each a file named
    "secret", hers a sample message of ``label``, root's the `SECRET` words."""
    hers, roots = tmp_path / name, tmp_path / "system"
    for folder in ("cur", "new", "tmp"):
        (hers / folder).mkdir(parents=True)
        (roots / folder).mkdir(parents=True)
    (hers / part / "secret").write_bytes((SAMPLE / "train" / label / "001.eml").read_bytes())
    (roots / part / "secret").write_bytes(SECRET)
    return hers, roots


def test_sync_learns_no_file_of_a_folder_swapped_in_after_the_listing(
    sample_model, tmp_path, monkeypatch
):
    """sync lists every folder, then reads the files it found: whoever owns a folder root's
    sync learns from could, in between, make it a link to a folder of root's whose files
    have the names she chose, and root's files were learned (their words in a model she
    may read). A file is read only from the very folder it was listed in."""
    import nbspam.service.sync as sync

    junk, system = _a_secret_of_roots_named_as_hers(tmp_path, "Junk", "cur", "spam")
    listed = sync.folder_files

    def listed_then_swapped(*args, **kwargs):
        yield from listed(*args, **kwargs)
        (junk / "cur").rename(junk / "cur.found")
        (junk / "cur").symlink_to(system / "cur")

    monkeypatch.setattr(sync, "folder_files", listed_then_swapped)
    result = cli_run("sync", "-m", sample_model, f"spam={junk}")
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines()[0] == f"{junk / 'cur' / 'secret'}: {SWAPPED}"
    assert "zqxsecretword" not in vocabulary(sample_model)


def test_filter_reads_no_file_of_a_folder_swapped_in_after_the_listing(
    sample_model, tmp_path, monkeypatch
):
    """As sync: the file filter scores (and autolearn learns) is the one it listed."""
    import nbspam.mail.messages as messages

    inbox, system = _a_secret_of_roots_named_as_hers(tmp_path, "inbox", "new", "ham")
    listed = messages.listed_files

    def swapped_once_listed(*args, **kwargs):
        for found in listed(*args, **kwargs):
            (inbox / "new").rename(inbox / "new.found")
            (inbox / "new").symlink_to(system / "new")
            yield found

    monkeypatch.setattr(messages, "listed_files", swapped_once_listed)
    report = tmp_path / "report.jsonl"
    result = cli_run("filter", "-m", sample_model, inbox, "--report", report)
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines()[0] == f"{inbox / 'new' / 'secret'}: {SWAPPED}"
    assert '"action": "error"' in report.read_text()


def test_a_file_name_prints_no_control_character_on_a_text_line(sample_model_path, tmp_path):
    """A user's file name is printed in root's text lines and on stderr: one holding ESC
    retitled the terminal or rewrote what was printed before it, one holding a line feed
    printed a line of its own. They are written as \\xNN; JSON Lines escape them as JSON."""
    folder = tmp_path / "mail"
    folder.mkdir()
    name = "a\x1b]0;owned\x07\nham: forged"
    (folder / name).write_bytes((SAMPLE / "new" / "002.eml").read_bytes())
    (folder / "b\x1b[2J").write_bytes(b"")  # empty: skipped, said on stderr
    shown = f"{folder}/a\\x1b]0;owned\\x07\\x0aham: forged"
    result = nbspam_process("predict", "-m", sample_model_path, folder)
    assert result.returncode == 3
    [line] = result.stdout.decode().splitlines()
    assert line.startswith(f"{shown}: spam (log-odds +")
    skipped = f"{folder}/b\\x1b[2J: empty, not a message"
    assert result.stderr.decode().splitlines()[0] == skipped
    jsonl = nbspam_process("predict", "-m", sample_model_path, folder, "-f", "jsonl")
    assert json.loads(jsonl.stdout.decode())["path"] == str(folder / name)
    missing = nbspam_process("explain", "-m", sample_model_path, folder / "c\x1b[1m")
    assert missing.stderr.decode().splitlines()[0].startswith(f"{folder}/c\\x1b[1m: ")
    error = nbspam_process("train", folder, "-o", tmp_path / "x\x1b[1m" / "m.nbm")
    assert error.returncode == 1 and "\x1b" not in error.stderr.decode()
    assert "x\\x1b[1m" in error.stderr.decode()
