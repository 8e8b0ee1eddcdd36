"""`nbspam filter`: the verdict header, one message through a pipe, and Maildirs sorted by verdict.

The header adds one line and changes no other byte (nor the message's digest). One message
comes through whatever fails. A run over folders moves each message once, never overwrites
and never loses one: not across file systems, not when killed at any moment, not when run
again, and not while another process learns corrections.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from nbspam import __version__
from nbspam.errors import FilterError, LockError
from nbspam.mail.headers import add_status_header, message_digest
from nbspam.mail.message import Message, Problems
from nbspam.mail.messages import read_messages
from nbspam.models.decision import Prediction
from nbspam.models.model import score
from nbspam.service.array_scoring import ArrayScorer, ModelScorer, load_scorer
from nbspam.service.filtering import filter_folders, filter_single, status_value
from nbspam.service.filtering import message_files as filter_files
from nbspam.service.update import learn
from nbspam.store.lock import model_lock
from nbspam.store.modelfile import load_model
from tests.helpers import ENV, SAMPLE, called_path, cli_run, nbspam_process
from tests.processes import KILL_AT_FSYNC

NBSPAM = [sys.executable, "-m", "nbspam"]
WAIT = 60.0  # seconds: the longest a single process may take before the test fails
MESSAGE = (SAMPLE / "new" / "001.eml").read_bytes()
SPAM_IN_CUR = "1790000001.M1P1.mailhost:2,FS"

# Relabels the message argv[2] in the model argv[1] back and forth (spam, ham, spam, ...)
# under the model's lock, as `nbspam learn` does, until the file argv[3] exists.
LEARNER = """
import os, sys, time
from pathlib import Path
from nbspam.mail.message import Message
from nbspam.service.update import learn, update_model_file
path, file, stop = sys.argv[1:4]
message = Message(file, Path(file).read_bytes())
n = 0
while not os.path.exists(stop):
    label = ("spam", "ham")[n % 2]
    update_model_file(path, lambda model: learn(model, [message], label))
    n += 1
    time.sleep(0.02)
print(n)
"""


@pytest.fixture(scope="module")
def model_path(sample_models) -> str:
    """A spam/ham model of the sample data with an unsure band from -50 to 16."""
    return str(sample_models("--cutoffs=-50,16"))


@pytest.fixture(scope="module")
def model(model_path):
    return load_model(model_path)


@pytest.fixture
def own_model(model_path, tmp_path) -> str:
    """A copy of the model that a test may change (its state file goes beside it)."""
    path = tmp_path / "own.nbm"
    shutil.copyfile(model_path, path)
    return str(path)


def verdicts_of(model, paths) -> dict[str, str]:
    """The verdict of each message file, as `predict` gives it."""
    messages = list(read_messages([str(p) for p in paths], Problems()))
    return {p.id: p.verdict for p in score(model, messages)}


# -- the header -------------------------------------------------------------------------------


def test_the_header_is_the_first_line_and_nothing_else_changes():
    out = add_status_header(MESSAGE, "spam; log_odds=+1.000; version=x")
    assert out == b"X-Nbspam-Status: spam; log_odds=+1.000; version=x\n" + MESSAGE


def test_a_crlf_message_gets_a_crlf_header():
    data = MESSAGE.replace(b"\n", b"\r\n")
    out = add_status_header(data, "ham; log_odds=-3.000; version=x")
    assert out == b"X-Nbspam-Status: ham; log_odds=-3.000; version=x\r\n" + data


def test_the_header_goes_after_an_mbox_from_line():
    from_line = b"From someone@example.com Mon Jan  5 10:00:00 2026\n"
    out = add_status_header(from_line + MESSAGE, "unsure; log_odds=+0.500; version=x")
    assert out == from_line + b"X-Nbspam-Status: unsure; log_odds=+0.500; version=x\n" + MESSAGE


def test_an_existing_header_is_replaced_and_the_body_untouched():
    head, sep, body = MESSAGE.partition(b"\n\n")
    forged = b"X-Nbspam-Status: ham; log_odds=-99.000;\n\tversion=0.0.1\n"
    lower = b"\nx-nbspam-status : unsure"
    data = forged + head + lower + sep + body
    data += b"X-Nbspam-Status: a line of the body, kept\n"
    out = add_status_header(data, "spam; version=x")
    assert out == b"X-Nbspam-Status: spam; version=x\n" + MESSAGE + (
        b"X-Nbspam-Status: a line of the body, kept\n"
    )


def test_filtering_twice_gives_one_header():
    once = add_status_header(MESSAGE, "ham; version=1")
    assert add_status_header(once, "spam; version=2") == add_status_header(
        MESSAGE, "spam; version=2"
    )


@pytest.mark.parametrize(
    "data",
    [
        MESSAGE,
        MESSAGE.replace(b"\n", b"\r\n"),
        b"From a@example.com Mon Jan  5 10:00:00 2026\n" + MESSAGE,
        b"X-Nbspam-Status: spam; version=0\n\tmore\n" + MESSAGE,
        b"",
        b"no header at all",
        b"\n\nbody only\n",
    ],
    ids=["lf", "crlf", "mbox-from", "old-header", "empty", "no-newline", "empty-header"],
)
def test_the_header_leaves_the_digest_alone(data):
    out = add_status_header(data, "spam; log_odds=+1.000; version=x")
    assert message_digest(out) == message_digest(data)


def test_the_status_value():
    prediction = Prediction("-", "spam", (0.1, 0.9), log_odds=12.3456, verdict="spam")
    assert status_value(prediction) == f"spam; log_odds=+12.346; version={__version__}"
    calibrated = Prediction(
        "-", "ham", (0.9, 0.1), log_odds=-2.0, verdict="unsure", calibrated=0.25
    )
    assert status_value(calibrated) == (
        f"unsure; log_odds=-2.000; calibrated=0.2500; version={__version__}"
    )


def test_learn_and_forget_recognise_a_filtered_message(model_path, model):
    data = (SAMPLE / "train" / "spam" / "001.eml").read_bytes()
    out, kind = filter_single(model_path, data)
    assert kind == "spam" and out != data
    _, change = learn(model, [Message("filtered", out)], "spam")
    assert change.unchanged == 1 and change.learned == 0


# -- one message, through a real process --------------------------------------------------------


def run_filter(*args: str, data: bytes) -> subprocess.CompletedProcess:
    return nbspam_process("filter", *args, stdin=data, timeout=WAIT)


def test_exit_status_tells_spam_ham_and_unsure_apart(model_path, model):
    verdicts = verdicts_of(model, sorted((SAMPLE / "new").iterdir()))
    codes = {"spam": 0, "ham": 1, "unsure": 2}
    for verdict, code in codes.items():
        path = next(p for p, v in verdicts.items() if v == verdict)
        data = Path(path).read_bytes()
        result = run_filter("-m", model_path, "--exit-status", data=data)
        assert result.returncode == code, (verdict, result.stderr)
        first, rest = result.stdout.split(b"\n", 1)
        assert first.startswith(b"X-Nbspam-Status: " + verdict.encode() + b"; log_odds=")
        assert first.endswith(b"; version=" + __version__.encode())
        assert rest == data and result.stderr == b""


# `nbspam ARGS...` (argv[1:]) as the command runs; then says on stderr whether numpy was loaded.
WHICH_MODULES = """
import sys
from nbspam.cli.commands import main
sys.argv = ["nbspam", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("numpy" in sys.modules, "scipy" in sys.modules, file=sys.stderr)
"""


def test_one_message_is_filtered_without_numpy_or_scipy(model_path):
    result = subprocess.run(
        [sys.executable, "-c", WHICH_MODULES, "filter", "-m", model_path, "--exit-status"],
        input=MESSAGE,
        capture_output=True,
        env=ENV,
        timeout=WAIT,
    )
    assert result.stdout.startswith(b"X-Nbspam-Status: ")
    assert result.stderr == b"False False\n"


def test_without_exit_status_success_is_0(model_path):
    result = run_filter("-m", model_path, data=MESSAGE)
    assert result.returncode == 0, result.stderr
    assert result.stdout == result.stdout.split(b"\n", 1)[0] + b"\n" + MESSAGE
    assert result.stdout.startswith(b"X-Nbspam-Status: ")


def test_empty_input_is_no_message_passed_on_as_it_came_with_status_3(model_path):
    for data in (b"", b"\n \n"):
        for args in ((), ("--exit-status",)):
            result = run_filter("-m", model_path, *args, data=data)
            assert (result.returncode, result.stdout) == (3, data)
            assert result.stderr == b"-: empty, not a message\n"


def test_a_corrupt_or_missing_model_lets_the_message_through_unchanged(model_path, tmp_path):
    raw = bytearray(Path(model_path).read_bytes())
    raw[40] ^= 0x01  # in the header, which every reader checks
    corrupt = tmp_path / "corrupt.nbm"
    corrupt.write_bytes(bytes(raw))
    data = MESSAGE.replace(b"\n", b"\r\n") + b"\xff\xfe broken bytes \x00"
    for model_file, flags, code in [
        (corrupt, ["--exit-status"], 3),
        (corrupt, [], 1),
        (tmp_path / "missing.nbm", ["--exit-status"], 3),
    ]:
        result = run_filter("-m", str(model_file), *flags, data=data)
        assert result.returncode == code
        assert result.stdout == data
        lines = result.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ")


def test_a_multi_class_model_is_refused_and_the_message_passes(tmp_path):
    three = tmp_path / "three.nbm"
    specs = [f"{label}={SAMPLE / 'train' / label}" for label in ("ham", "spam")]
    args = ["train", *specs, f"other={SAMPLE / 'new'}", "-o", str(three), "--no-calibrate"]
    assert cli_run(*args).exit_code == 0
    result = cli_run("filter", "-m", str(three), "--exit-status", input=MESSAGE)
    assert result.exit_code == 3
    assert result.stdout_bytes == MESSAGE
    assert "two-class model" in result.stderr
    result = cli_run("filter", "-m", str(three), str(SAMPLE / "new"))
    assert result.exit_code == 1 and "two-class model" in result.stderr


def test_usage_errors(model_path):
    result = cli_run("filter", "-m", model_path, "--exit-status", "--bogus", input=MESSAGE)
    assert result.exit_code == 3  # never 2, which would read as unsure
    assert result.stdout_bytes == MESSAGE  # a mistyped option loses no mail
    result = cli_run("filter", "-m", model_path, "--move-spam", "x", input=MESSAGE)
    assert result.exit_code == 1 and result.stdout_bytes == MESSAGE
    assert "Error: --move-spam: for folders only" in result.stderr
    result = cli_run("filter", "-m", model_path, "--exit-status", str(SAMPLE / "new"))
    assert result.exit_code == 2


# -- folders ------------------------------------------------------------------------------------


@pytest.fixture
def maildir(tmp_path) -> Path:
    """A Maildir of the sample messages: new/ and cur/ (with flags), one spam in cur/."""
    root = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True)
    for path in (SAMPLE / "new").iterdir():
        shutil.copy2(path, root / "new" / path.name)
    for sub in ("cur", "new"):
        for path in (SAMPLE / "maildir" / "ham" / sub).iterdir():
            shutil.copy2(path, root / sub / path.name)
    shutil.copy2(SAMPLE / "train" / "spam" / "001.eml", root / "cur" / SPAM_IN_CUR)
    return root


def message_files(*roots: Path) -> list[Path]:
    """Every message file below the roots (hidden names and tmp/ left out)."""
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d != "tmp" and not d.startswith(".")]
            found += [Path(dirpath, f) for f in filenames if not f.startswith(".")]
    return found


def test_the_files_to_filter_are_told_apart_as_isdir_and_isfile_tell_them(tmp_path):
    """Folders are walked, files are filtered (a link inside the folder as the file it
    leads to; a link out of the folder is not followed); hidden names are left out, FIFOs,
    dangling links and links out reported, in a folder as in a Maildir, whose tmp/ is left
    out."""
    plain, maildir, elsewhere = tmp_path / "plain", tmp_path / "Maildir", tmp_path / "elsewhere"
    for folder in (plain / "sub", maildir / "cur", maildir / "new", maildir / "tmp", elsewhere):
        folder.mkdir(parents=True)
    for path in (plain / "b", plain / "sub" / "c", plain / ".hidden", elsewhere / "d"):
        path.write_bytes(b"Subject: x\n\nbody\n")
    for folder in (plain, maildir / "cur"):
        (folder / "a-link").symlink_to(plain / "b")
        (folder / "broken").symlink_to(folder / "nowhere")
        os.mkfifo(folder / "fifo")
    (plain / "linked").symlink_to(elsewhere)
    (maildir / "cur" / "folder").mkdir()
    (maildir / "new" / "m").write_bytes(b"Subject: y\n\nbody\n")
    (maildir / "tmp" / "t").write_bytes(b"Subject: being delivered\n\nbody\n")
    reported: list[str] = []
    problems = Problems(reported.append)
    found = [
        (Path(f.path).relative_to(tmp_path), f.sub)
        for f in filter_files([str(plain), str(maildir)], problems)
    ]
    assert found == [
        (Path("plain/b"), None),  # plain/a-link
        (Path("plain/b"), None),
        (Path("plain/sub/c"), None),
        (Path("Maildir/new/m"), "new"),
    ]
    out = "a symbolic link out of the folder, not followed (--follow-links follows it)"
    assert reported == [
        f"{tmp_path / 'plain/broken'}: no such file or directory",
        f"{tmp_path / 'plain/fifo'}: not a regular file (a FIFO or a device)",
        f"{tmp_path / 'plain/linked'}: {out}",
        f"{tmp_path / 'Maildir/cur/a-link'}: {out}",
        f"{tmp_path / 'Maildir/cur/broken'}: no such file or directory",
        f"{tmp_path / 'Maildir/cur/fifo'}: not a regular file (a FIFO or a device)",
    ]


def digests(*roots: Path) -> Counter:
    return Counter(message_digest(p.read_bytes()) for p in message_files(*roots))


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file below root (hidden ones too) with its bytes and modification time, but
    lock files, which every run that writes takes."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and p.suffix != ".lock"
    }


def run_folders(model, paths, moves, state, **options):
    records: list[dict] = []
    problems = Problems()
    summary = filter_folders(
        model if isinstance(model, ArrayScorer) else ModelScorer(model),
        [str(p) for p in paths],
        {k: str(v) for k, v in moves.items()},
        state_path=str(state),
        report=records.append,
        problems=problems,
        **options,
    )
    return summary, records, problems


def test_messages_are_moved_by_verdict_keeping_new_cur_and_flags(model, maildir, tmp_path):
    verdicts = verdicts_of(model, message_files(maildir))
    assert set(verdicts.values()) == {"spam", "ham", "unsure"}
    before = digests(maildir)
    junk, unsure = tmp_path / "Junk", tmp_path / "Unsure"
    unsure.mkdir()  # an existing plain folder; Junk becomes a Maildir
    state = tmp_path / "filter.state"
    summary, records, problems = run_folders(
        model, [maildir], {"spam": junk, "unsure": unsure}, state
    )
    assert problems.skipped == 0 and summary.errors == 0
    assert sorted(os.listdir(junk)) == ["cur", "new", "tmp"]
    for path, verdict in verdicts.items():
        sub, name = Path(path).parent.name, Path(path).name
        where = {"spam": junk / sub / name, "unsure": unsure / name, "ham": Path(path)}[verdict]
        assert where.is_file(), (path, verdict)
        if verdict != "ham":
            assert not Path(path).exists()
    assert (junk / "cur" / SPAM_IN_CUR).is_file()  # from cur/ to cur/, with its flags
    assert digests(maildir, junk, unsure) == before
    assert summary.new == len(verdicts) and summary.skipped == 0
    moved = sum(v != "ham" for v in verdicts.values())
    assert (summary.moved, summary.kept) == (moved, len(verdicts) - moved)
    assert len(records) == len(verdicts)
    for record in records:
        assert set(record) == {
            "path",
            "verdict",
            "log_odds",
            "calibrated",
            "action",
            "destination",
        }
        assert record["verdict"] == verdicts[record["path"]]
        if record["action"] == "moved":
            assert Path(record["destination"]).is_file()
        else:
            assert record["action"] == "kept" and record["destination"] is None
    lines = state.read_text().splitlines()
    assert len(lines) == len(verdicts)
    for line in lines:
        digest, verdict, stamp = line.split("\t")
        assert len(bytes.fromhex(digest)) == 16 and verdict in {"spam", "ham", "unsure"}
        assert stamp.endswith("Z")


def test_the_scoring_table_with_two_jobs_filters_as_the_model_does(
    model, model_path, maildir, tmp_path
):
    copy = tmp_path / "copy"
    shutil.copytree(maildir, copy)
    scorer = load_scorer(model_path)
    assert isinstance(scorer, ArrayScorer)
    moves = {"spam": tmp_path / "Junk", "unsure": tmp_path / "Unsure"}
    _, by_model, _ = run_folders(model, [maildir], moves, tmp_path / "a.state")
    moves = {"spam": tmp_path / "Junk2", "unsure": tmp_path / "Unsure2"}
    _, by_table, _ = run_folders(scorer, [copy], moves, tmp_path / "b.state", jobs=2)

    def essentials(records, root):
        return sorted(
            (Path(r["path"]).relative_to(root).as_posix(), r["verdict"], r["log_odds"])
            for r in records
        )

    assert {r["verdict"] for r in by_model} == {"spam", "ham", "unsure"}
    assert essentials(by_model, maildir) == essentials(by_table, copy)


def test_the_second_run_touches_nothing(model, maildir, tmp_path):
    junk, state = tmp_path / "Junk", tmp_path / "filter.state"
    first, _, _ = run_folders(model, [maildir], {"spam": junk, "unsure": junk}, state)
    assert first.moved > 0
    before = snapshot(tmp_path)
    second, records, problems = run_folders(model, [maildir], {"spam": junk, "unsure": junk}, state)
    left = len(message_files(maildir))
    assert (second.new, second.skipped, second.moved) == (0, left, 0)
    assert left == first.kept
    assert records == [] and problems.skipped == 0
    assert snapshot(tmp_path) == before


def test_a_message_moved_back_by_hand_stays(model, maildir, tmp_path):
    junk, state = tmp_path / "Junk", tmp_path / "filter.state"
    run_folders(model, [maildir], {"spam": junk}, state)
    moved = junk / "cur" / SPAM_IN_CUR
    os.rename(moved, maildir / "cur" / SPAM_IN_CUR)
    summary, _, _ = run_folders(model, [maildir], {"spam": junk}, state)
    assert summary.new == 0 and (maildir / "cur" / SPAM_IN_CUR).is_file()


def test_only_cur_and_new_of_a_maildir_are_read(model, maildir, tmp_path):
    messages = len(message_files(maildir))
    index = maildir / "dovecot-uidlist"
    index.write_bytes(b"3 V1700000000 N42\n")
    sent = maildir / "Sent" / "cur"  # a subfolder of another layout: another mailbox
    sent.mkdir(parents=True)
    (maildir / "Sent" / "new").mkdir()
    shutil.copy2(SAMPLE / "new" / "002.eml", sent / "1790000002.M2P1.mailhost:2,S")
    summary, records, _ = run_folders(model, [maildir], {"spam": tmp_path / "J"}, tmp_path / "s")
    assert summary.new == messages
    assert index.is_file() and (sent / "1790000002.M2P1.mailhost:2,S").is_file()
    assert not any("dovecot" in r["path"] or "Sent" in r["path"] for r in records)


def test_a_message_another_program_moves_meanwhile_is_left_to_the_next_run(
    model, maildir, tmp_path, monkeypatch
):
    """A mail server moving new/X to cur/X:2,S between the link and the unlink: the link is
    taken back, so the message stays in one place, and the next run handles it."""
    source = maildir / "new" / "002.eml"
    moved_by_server = maildir / "cur" / "002.eml:2,S"
    real_link = os.link

    def link_then_server_moves(src, dst, *args, **kwargs):
        real_link(src, dst, *args, **kwargs)
        if called_path(src, kwargs.get("src_dir_fd")) == called_path(source):
            os.rename(source, moved_by_server)

    monkeypatch.setattr(os, "link", link_then_server_moves)
    before = digests(maildir)
    junk, state = tmp_path / "Junk", tmp_path / "filter.state"
    summary, records, problems = run_folders(model, [maildir], {"spam": junk}, state)
    assert problems.skipped == 1 and summary.errors == 1
    assert {"path": str(source), "action": "error"}.items() <= next(
        r for r in records if r["path"] == str(source)
    ).items()
    assert digests(maildir, junk) == before
    monkeypatch.undo()
    summary, _, _ = run_folders(model, [maildir], {"spam": junk}, state)
    assert summary.new == 1 and (junk / "cur" / "002.eml:2,S").is_file()
    assert digests(maildir, junk) == before


def test_a_dry_run_touches_nothing(model, maildir, tmp_path):
    before = snapshot(tmp_path)
    junk, state = tmp_path / "Junk", tmp_path / "filter.state"
    summary, records, _ = run_folders(
        model, [maildir], {"spam": junk, "unsure": junk}, state, dry_run=True
    )
    assert snapshot(tmp_path) == before
    assert not junk.exists() and not state.exists()
    assert not Path(str(state) + ".lock").exists()
    assert summary.moved > 0
    assert {r["action"] for r in records} == {"would move", "kept"}


def test_a_name_already_taken_is_never_overwritten(model, maildir, tmp_path):
    junk = tmp_path / "Junk"
    for sub in ("cur", "new", "tmp"):
        (junk / sub).mkdir(parents=True)
    spam = [p for p, v in verdicts_of(model, message_files(maildir)).items() if v == "spam"]
    taken = [junk / Path(p).parent.name / Path(p).name for p in spam]
    for i, path in enumerate(taken):
        path.write_bytes(b"Subject: another message %d\n\nwith the same file name\n" % i)
    before = digests(maildir, junk)
    run_folders(model, [maildir], {"spam": junk}, tmp_path / "filter.state")
    for i, path in enumerate(taken):
        assert path.read_bytes() == b"Subject: another message %d\n\nwith the same file name\n" % i
    assert digests(maildir, junk) == before
    assert len(message_files(junk)) == 2 * len(spam)
    tagged = [p.name for p in message_files(junk / "cur")]
    assert any(n.startswith("1790000001.M1P1.mailhost.") and n.endswith(":2,FS") for n in tagged)


def test_a_plain_folder_of_files_moves_into_new_of_a_maildir(model, tmp_path):
    folder = tmp_path / "inbox"
    shutil.copytree(SAMPLE / "new", folder)
    verdicts = verdicts_of(model, sorted(folder.iterdir()))
    junk = tmp_path / "Junk"
    run_folders(model, [folder], {"spam": junk}, tmp_path / "filter.state")
    spam = {Path(p).name for p, v in verdicts.items() if v == "spam"}
    assert {p.name for p in (junk / "new").iterdir()} == spam
    assert {p.name for p in folder.iterdir()} == set(os.listdir(SAMPLE / "new")) - spam


def test_a_folder_named_by_its_link_is_filtered_as_the_folder_it_leads_to(model, tmp_path):
    """A message is moved only out of the folder it was found in, never through a link at
    that folder's name; a folder the user names by a link (the files directly in it) is
    that folder all the same."""
    folder = tmp_path / "inbox"
    shutil.copytree(SAMPLE / "new", folder)
    (tmp_path / "named").symlink_to(folder)
    verdicts = verdicts_of(model, sorted(folder.iterdir()))
    junk = tmp_path / "Junk"
    summary, _, problems = run_folders(
        model, [tmp_path / "named"], {"spam": junk}, tmp_path / "filter.state"
    )
    spam = {Path(p).name for p, v in verdicts.items() if v == "spam"}
    assert problems.skipped == 0 and summary.errors == 0 and summary.moved == len(spam) > 0
    assert {p.name for p in (junk / "new").iterdir()} == spam
    assert {p.name for p in folder.iterdir()} == set(os.listdir(SAMPLE / "new")) - spam


def test_a_move_across_file_systems_copies_flushes_and_loses_nothing(
    model, maildir, tmp_path, monkeypatch
):
    junk, unsure = tmp_path / "other-disk" / "Junk", tmp_path / "other-disk" / "Unsure"
    (tmp_path / "other-disk").mkdir()
    unsure.mkdir()
    os.utime(maildir / "cur" / SPAM_IN_CUR, ns=(1_700_000_000 * 10**9, 1_700_000_000 * 10**9))
    before = digests(maildir)
    crossings = []

    inbox = str(maildir.resolve())

    def across(real):
        def call(src, dst, *args, **kwargs):
            src_path = called_path(src, kwargs.get("src_dir_fd"))
            dst_path = called_path(dst, kwargs.get("dst_dir_fd"))
            if src_path.startswith(inbox) and not dst_path.startswith(inbox):
                crossings.append((src_path, dst_path))
                raise OSError(errno.EXDEV, "Invalid cross-device link", src, None, dst)
            return real(src, dst, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "link", across(os.link))
    monkeypatch.setattr(os, "rename", across(os.rename))
    summary, records, problems = run_folders(
        model, [maildir], {"spam": junk, "unsure": unsure}, tmp_path / "filter.state"
    )
    assert crossings and problems.skipped == 0 and summary.moved > 0
    assert digests(maildir, junk, unsure) == before
    assert os.listdir(junk / "tmp") == []
    assert not [n for n in os.listdir(unsure) if n.startswith(".")]
    moved = junk / "cur" / SPAM_IN_CUR
    assert moved.stat().st_mtime_ns == 1_700_000_000 * 10**9  # the arrival time is kept
    assert not (maildir / "cur" / SPAM_IN_CUR).exists()


def test_a_move_an_earlier_run_left_half_done_is_finished(model, maildir, tmp_path):
    """A killed run can leave a message at its destination and in its folder, or a partial
    copy in tmp/: the next run unlinks the source and the partial copy, and copies nothing."""
    junk, unsure = tmp_path / "Junk", tmp_path / "Unsure"
    for sub in ("cur", "new", "tmp"):
        (junk / sub).mkdir(parents=True)
    unsure.mkdir()
    verdicts = verdicts_of(model, message_files(maildir))
    spam = sorted(Path(p) for p, v in verdicts.items() if v == "spam" and "/new/" in p)
    assert len(spam) >= 2
    before = digests(maildir)
    os.link(spam[0], junk / "new" / spam[0].name)  # killed between link and unlink
    shutil.copy2(spam[1], unsure / spam[1].name)  # killed after a copy; now another verdict
    leftover = junk / "tmp" / ".nbspam-tmp.99999999.partial"
    leftover.write_bytes(spam[0].read_bytes()[:100])
    summary, records, _ = run_folders(
        model, [maildir], {"spam": junk, "unsure": unsure}, tmp_path / "filter.state"
    )
    assert digests(maildir, junk, unsure) == before
    assert not leftover.exists()
    assert (unsure / spam[1].name).is_file() and not (junk / "new" / spam[1].name).exists()
    assert {r["destination"] for r in records if r["path"] == str(spam[1])} == {
        str(unsure / spam[1].name)
    }


def test_an_unreadable_message_is_reported_left_alone_and_exits_3(
    own_model, maildir, tmp_path, monkeypatch
):
    import nbspam.mail.messages

    bad = maildir / "new" / "002.eml"
    real_read = nbspam.mail.messages.read_bytes

    def fake_read(path):  # as root, a file's mode cannot stop it being read
        if str(path) == str(bad):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_read(path)

    monkeypatch.setattr(nbspam.mail.messages, "read_bytes", fake_read)
    junk = tmp_path / "Junk"
    args = ["filter", "-m", own_model, str(maildir), "--move-spam", str(junk), "--report", "-"]
    result = cli_run(*args)
    assert result.exit_code == 3, result.output
    assert f"{bad}: permission denied" in result.stderr
    assert bad.is_file()
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert {"path": str(bad), "action": "error"}.items() <= next(
        r for r in records if r["path"] == str(bad)
    ).items()
    assert (junk / "cur" / SPAM_IN_CUR).is_file()
    assert "1 error(s)" in result.stderr.splitlines()[-1]
    state = Path(own_model + ".state").read_text()
    assert message_digest(bad.read_bytes()).hex() not in state  # tried again next time


def test_an_mbox_is_refused(model, tmp_path):
    with pytest.raises(FilterError, match="holds several messages"):
        run_folders(model, [SAMPLE / "mbox" / "spam.mbox"], {}, tmp_path / "s")
    folder = tmp_path / "folder"
    folder.mkdir()
    shutil.copy2(SAMPLE / "mbox" / "spam.mbox", folder / "spam.mbox")
    shutil.copy2(SAMPLE / "new" / "002.eml", folder / "002.eml")
    summary, _, problems = run_folders(model, [folder], {"spam": tmp_path / "J"}, tmp_path / "s")
    assert problems.skipped == 1 and summary.moved == 1
    assert (folder / "spam.mbox").is_file()


def test_two_runs_on_one_state_do_not_overlap(model, maildir, tmp_path):
    state = tmp_path / "filter.state"
    with model_lock(state), pytest.raises(LockError, match="another process"):
        run_folders(model, [maildir], {}, state, lock_timeout=0.1)


def test_the_command_keeps_its_state_beside_the_model(own_model, maildir, tmp_path):
    junk = tmp_path / "Junk"
    args = ["filter", "-m", own_model, str(maildir), "--move-spam", str(junk), "--report", "-"]
    first = cli_run(*args)
    assert first.exit_code == 0, first.output
    assert Path(own_model + ".state").is_file()
    records = [json.loads(line) for line in first.stdout.splitlines()]
    total = len(records)
    assert first.stderr.startswith(f"filter: {total} new, 0 skipped")
    kept = sum(r["action"] == "kept" for r in records)
    second = cli_run(*args)
    assert second.exit_code == 0 and second.stdout == ""
    assert second.stderr.startswith(f"filter: 0 new, {kept} skipped (filtered before), 0 moved")


def test_a_report_file_is_appended_to(model_path, maildir, tmp_path):
    log = tmp_path / "filter.log"
    args = ["filter", "-m", model_path, str(maildir), "--dry-run", "--report", str(log)]
    for _ in range(2):
        result = cli_run(*args, "--state", tmp_path / "s")
        assert result.exit_code == 0 and result.stdout == ""
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 2 * len(message_files(maildir))
    assert {r["action"] for r in records} == {"kept"}


# -- killed runs --------------------------------------------------------------------------------


def unique_messages(root: Path, count: int) -> Counter:
    """A Maildir of ``count`` distinct messages (sample messages, each with an extra header
    line), half in new/, half in cur/ with flags; returns their digests."""
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True)
    samples = sorted((SAMPLE / "train").glob("*/*.eml")) + sorted((SAMPLE / "new").iterdir())
    for i in range(count):
        data = b"X-Copy: %d\n" % i + samples[i % len(samples)].read_bytes()
        if i % 2:
            (root / "cur" / f"17900{i:05d}.M{i}P1.mailhost:2,S").write_bytes(data)
        else:
            (root / "new" / f"17900{i:05d}.M{i}P1.mailhost").write_bytes(data)
    return digests(root)


@pytest.mark.slow
def test_killed_runs_lose_nothing_and_duplicate_nothing(own_model, tmp_path):
    """Runs over 300 messages, killed with SIGKILL from outside and at fsync calls that fall
    between the steps of a move, while another process relabels a message in the model;
    then a run to the end. Every message is in exactly one place."""
    inbox = tmp_path / "Maildir"
    before = unique_messages(inbox, 300)
    boxes = {kind: tmp_path / kind.title() for kind in ("spam", "unsure", "ham")}
    moves = [arg for kind, box in boxes.items() for arg in (f"--move-{kind}", str(box))]
    command = ["filter", "-m", own_model, str(inbox), *moves]
    state = Path(own_model + ".state")
    stop = tmp_path / "stop"
    learner = subprocess.Popen(
        [sys.executable, "-c", LEARNER, own_model, str(SAMPLE / "new" / "006.eml"), str(stop)],
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
    )
    killed = 0
    try:
        # from outside, as soon as the run has handled a few messages
        run = subprocess.Popen([*NBSPAM, *command], env=ENV, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + WAIT
        while run.poll() is None and time.monotonic() < deadline:
            if state.exists() and state.read_bytes().count(b"\n") >= 20:
                run.send_signal(signal.SIGKILL)
                break
            time.sleep(0.001)
        killed += run.wait(timeout=WAIT) == -signal.SIGKILL
        # from inside, at fsync calls 31 to 34: after a link, after an unlink, after a
        # state line, and after a link again
        for kill_at in (31, 32, 33, 34):
            script = [sys.executable, "-c", KILL_AT_FSYNC, str(kill_at), *command]
            result = subprocess.run(script, env=ENV, capture_output=True, timeout=WAIT)
            assert result.returncode == -signal.SIGKILL, result.stderr
            killed += 1
        final = subprocess.run([*NBSPAM, *command], env=ENV, capture_output=True, timeout=WAIT)
        assert final.returncode == 0, final.stderr
    finally:
        stop.touch()
        learner.wait(timeout=WAIT)
    assert killed >= 4
    assert int(learner.stdout.read()) > 0
    assert message_files(inbox) == []  # every verdict has a destination
    assert digests(inbox, *boxes.values()) == before  # each message exactly once
    again = subprocess.run([*NBSPAM, *command], env=ENV, capture_output=True, timeout=WAIT)
    assert again.returncode == 0
    assert b"filter: 0 new" in again.stderr
