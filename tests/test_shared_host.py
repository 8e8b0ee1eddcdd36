"""A model shared on a mail host: what a member of its group can plant beside it is never
written through, every member can lock and replace it, and no output may be an input."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from nbspam.store.modelfile import load_model
from tests.helpers import SAMPLE, cli_run, nbspam_process

MESSAGE = SAMPLE / "new" / "001.eml"
VICTIM = "a file of root's\n"


def maildir(path: Path) -> Path:
    for sub in ("cur", "new", "tmp"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def mail(tmp_path) -> Path:
    """A Maildir with one message in new/."""
    folder = maildir(tmp_path / "mail")
    shutil.copyfile(MESSAGE, folder / "new" / "1.eml")
    return folder


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file a neighbour would like root to overwrite (/etc/some-root-file)."""
    path = tmp_path / "etc" / "some-root-file"
    path.parent.mkdir()
    path.write_text(VICTIM)
    return path


# -- files beside the model are never written through links -------------------------------------

COMMANDS = {
    "prune": ["prune", "--keep-digests", "100000"],
    "learn": ["learn", "-l", "ham", MESSAGE],
    "forget": ["forget", MESSAGE],
    "sync": ["sync", "ham={mail}"],
    "filter": ["filter", "-j", "1", "{mail}"],
}


@pytest.mark.parametrize(
    "command, suffix, what",
    [
        ("prune", ".lock", "lock file"),
        ("learn", ".lock", "lock file"),
        ("forget", ".lock", "lock file"),
        ("sync", ".lock", "lock file"),
        ("sync", ".sync", "sync state"),
        ("filter", ".state", "state file"),
        ("filter", ".state.lock", "lock file"),
    ],
)
def test_a_planted_link_beside_the_model_is_refused(
    sample_model, mail, victim, command, suffix, what
):
    side = Path(f"{sample_model}{suffix}")
    side.symlink_to(victim)
    before = sample_model.read_bytes()
    args = [str(a).format(mail=mail) for a in COMMANDS[command]]
    result = cli_run(args[0], "-m", sample_model, *args[1:])
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {what} {side} is a symbolic link: refusing to write through it; remove it\n",
    )
    assert victim.read_text() == VICTIM
    assert side.is_symlink() and sample_model.read_bytes() == before
    assert (mail / "new" / "1.eml").is_file()


def test_a_dangling_link_is_not_followed_to_make_a_file(sample_model, mail, tmp_path):
    target = tmp_path / "etc" / "new-root-file"
    target.parent.mkdir()
    state = Path(f"{sample_model}.sync")
    state.symlink_to(target)
    result = cli_run("sync", "-m", sample_model, f"ham={mail}")
    assert result.exit_code == 1
    assert "is a symbolic link: refusing to write through it" in result.stderr
    assert not target.exists()


@pytest.mark.parametrize("command, suffix", [("learn", ".lock"), ("filter", ".state")])
def test_a_planted_hard_link_beside_the_model_is_refused(
    sample_model, mail, victim, command, suffix
):
    side = Path(f"{sample_model}{suffix}")
    os.link(victim, side)
    args = [str(a).format(mail=mail) for a in COMMANDS[command]]
    result = cli_run(args[0], "-m", sample_model, *args[1:])
    assert result.exit_code == 1
    assert result.stderr.endswith(
        f" {side} has 2 hard links: refusing to write through them; remove it\n"
    )
    assert victim.read_text() == VICTIM


def test_a_fifo_as_state_is_refused_without_waiting(sample_model, mail):
    state = Path(f"{sample_model}.state")
    os.mkfifo(state)
    result = cli_run("filter", "-j", "1", "-m", sample_model, mail)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: cannot write state file {state}: it is a FIFO, not a regular file\n",
    )


def test_the_model_itself_may_stay_a_link(sample_model, tmp_path):
    link = tmp_path / "link.nbm"
    link.symlink_to(sample_model)
    assert cli_run("learn", "-m", link, "-l", "ham", MESSAGE).exit_code == 0
    assert link.is_symlink() and Path(f"{sample_model}.lock").is_file()


# -- a command's other outputs are never written through what a neighbour planted ----------------

#: Each output that is not a model: the command that writes it (the output's name last;
#: {model}: a copy of the sample model, {mail}: a Maildir with one message), what its errors
#: call it, and how the file it writes begins.
OUTPUTS = {
    "evaluate --scores": (
        ["evaluate", SAMPLE / "train", "--folds", "2", "--scores"],
        "scores file",
        b'{"path": ',
    ),
    "evaluate --plot": (
        ["evaluate", SAMPLE / "train", "--folds", "2", "--plot"],
        "plot",
        b"<?xml",
    ),
    "dump -o": (["dump", "-m", "{model}", "-o"], "dump", b"# nbspam dump 1\n"),
    "filter --report": (
        ["filter", "-j", "1", "-m", "{model}", "{mail}", "--report"],
        "report",
        b"{",
    ),
}
#: Those appended to in place, not replaced: a planted hard link is refused.
APPENDED = ["filter --report"]
REPLACED = [output for output in OUTPUTS if output not in APPENDED]


def output_args(output: str, out: Path, sample_model: Path, mail: Path) -> list[str]:
    args = OUTPUTS[output][0]
    if "--plot" in args:
        pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    return [str(a).format(model=sample_model, mail=mail) for a in args] + [str(out)]


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("dangling", [False, True], ids=["link", "dangling link"])
def test_an_output_that_is_a_planted_link_is_refused(
    output, dangling, sample_model, mail, victim, tmp_path
):
    out = tmp_path / "shared" / "out.svg"  # a name --plot takes too
    out.parent.mkdir()
    target = victim.with_name("new-root-file") if dangling else victim
    out.symlink_to(target)
    result = cli_run(*output_args(output, out, sample_model, mail))
    what = OUTPUTS[output][1]
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {what} {out} is a symbolic link: refusing to write through it; remove it\n",
    )
    assert victim.read_text() == VICTIM and not victim.with_name("new-root-file").exists()
    assert out.is_symlink() and os.listdir(out.parent) == ["out.svg"]
    assert (mail / "new" / "1.eml").is_file()


#: Files kept beside a model given elsewhere with --state: written as the outputs are.
STATES = {
    "sync --state": (["sync", "-m", "{model}", "ham={mail}", "--state"], "sync state"),
    "filter --state": (["filter", "-j", "1", "-m", "{model}", "{mail}", "--state"], "state file"),
}


@pytest.mark.parametrize("output", [*OUTPUTS, *STATES])
def test_an_output_is_not_written_through_a_folder_link_of_another_user(
    output, sample_model, mail, tmp_path
):
    """A user's folder that root writes a report, a dump or a state into: she made a
    folder on its way a link to /etc, for root to make a file of its name there."""
    if os.geteuid() != 0:
        pytest.skip("a link of another user needs root to make")
    etc = tmp_path / "etc"
    etc.mkdir()
    link = tmp_path / "alice" / "reports"
    link.parent.mkdir()
    link.symlink_to(etc)
    os.lchown(link, 4242, 4242)
    out = link / "out.svg"
    if output in STATES:
        args, what = STATES[output]
        args = [str(a).format(model=sample_model, mail=mail) for a in args] + [str(out)]
    else:
        args, what = output_args(output, out, sample_model, mail), OUTPUTS[output][1]
    result = cli_run(*args)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {what} {out}: {link} is a symbolic link of another user (uid 4242): "
        "refusing to follow it; remove it\n",
    )
    assert os.listdir(etc) == [] and (mail / "new" / "1.eml").is_file()


def _planted_in_a_public_folder(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """(folder, file): a folder anyone may write (1777, as /tmp), and in it an empty file
    ``name`` of the user 4242, mode 0666, made first, as a neighbour would."""
    if os.geteuid() != 0:
        pytest.skip("a file of another user needs root to make")
    public = tmp_path / "tmp"
    public.mkdir()
    public.chmod(0o1777)
    out = public / name
    out.write_bytes(b"")
    out.chmod(0o666)
    os.chown(out, 4242, 4242)
    return public, out


@pytest.mark.parametrize("output", OUTPUTS)
def test_an_output_another_user_made_first_in_a_folder_anyone_may_write_is_refused(
    output, sample_model, mail, tmp_path
):
    """Root's ``dump -o /tmp/dump.txt``: a neighbour made the name first (hers, 0666), and
    the dump, the words of everybody's mail, replaced it keeping her as its owner, or the
    report's lines were appended to her file."""
    public, out = _planted_in_a_public_folder(tmp_path, "out.svg")
    result = cli_run(*output_args(output, out, sample_model, mail))
    what = OUTPUTS[output][1]
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {what} {out}: {out} belongs to 4242, in {public}, which anyone may write: "
        "anyone could have put it there; remove it\n",
    )
    assert out.read_bytes() == b"" and out.stat().st_uid == 4242
    out.unlink()  # a name of its own there: written, and root's
    assert cli_run(*output_args(output, out, sample_model, mail)).exit_code == 0
    assert out.stat().st_uid == 0 and stat.S_IMODE(out.stat().st_mode) & 0o007 == 0


def test_a_model_is_not_written_over_a_name_another_user_made_first(sample_model, tmp_path):
    """Root's ``train -o /tmp/spam.nbm`` over a neighbour's empty 0666 file: the model kept
    her as its owner, 0666, and so did its lock."""
    public, out = _planted_in_a_public_folder(tmp_path, "spam.nbm")
    error = (
        f"Error: model file {out}: {out} belongs to 4242, in {public}, which anyone may write: "
        "anyone could have put it there; remove it\n"
    )
    result = cli_run("train", SAMPLE / "train", "-o", out)
    assert (result.exit_code, result.stderr) == (1, error)
    shutil.copyfile(sample_model, out)  # a model of hers there: learn does not replace it
    result = cli_run("learn", "-m", out, "-l", "ham", MESSAGE)
    assert result.exit_code == 1 and "belongs to 4242" in result.stderr
    assert os.listdir(public) == ["spam.nbm"] and out.stat().st_uid == 4242


@pytest.mark.parametrize("output", OUTPUTS)
def test_an_output_that_is_a_planted_fifo_is_refused_without_waiting(
    output, sample_model, mail, tmp_path
):
    out = tmp_path / "out.svg"
    os.mkfifo(out)
    result = nbspam_process(*output_args(output, out, sample_model, mail), timeout=30)
    what = OUTPUTS[output][1]
    assert (result.returncode, result.stderr.decode()) == (
        1,
        f"Error: cannot write {what} {out}: it is a FIFO, not a regular file\n",
    )


@pytest.mark.parametrize("output", REPLACED)
def test_an_output_that_is_a_planted_hard_link_is_replaced_not_written_through(
    output, sample_model, mail, victim, tmp_path
):
    out = tmp_path / "out.svg"
    os.link(victim, out)
    result = cli_run(*output_args(output, out, sample_model, mail))
    assert result.exit_code == 0, result.stderr
    assert victim.read_text() == VICTIM
    assert out.stat().st_nlink == 1 and out.read_bytes().startswith(OUTPUTS[output][2])


@pytest.mark.parametrize("output", APPENDED)
def test_an_output_appended_to_that_is_a_planted_hard_link_is_refused(
    output, sample_model, mail, victim, tmp_path
):
    out = tmp_path / "out.svg"
    os.link(victim, out)
    result = cli_run(*output_args(output, out, sample_model, mail))
    what = OUTPUTS[output][1]
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {what} {out} has 2 hard links: refusing to write through them; remove it\n",
    )
    assert victim.read_text() == VICTIM
    assert (mail / "new" / "1.eml").is_file()


@pytest.mark.parametrize("output", OUTPUTS)
def test_an_output_gets_the_permissions_a_model_gets(output, sample_model, mail, tmp_path):
    out = tmp_path / "out.svg"
    old = os.umask(0o022)
    try:
        assert cli_run(*output_args(output, out, sample_model, mail)).exit_code == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o640  # a new file: not for others
        out.chmod(0o604)
        assert cli_run(*output_args(output, out, sample_model, mail)).exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o604  # an existing one keeps its mode


# -- permissions of a shared model ----------------------------------------------------------------


def test_a_replaced_model_keeps_its_mode_owner_and_group(sample_model):
    os.chown(sample_model, 4321, 4322)
    os.chmod(sample_model, 0o660)
    if (sample_model.stat().st_uid, sample_model.stat().st_gid) != (4321, 4322):
        pytest.skip("giving a file away needs root")
    assert cli_run("learn", "-m", sample_model, "-l", "spam", MESSAGE).exit_code == 0
    stats = sample_model.stat()
    assert (stats.st_mode & 0o7777, stats.st_uid, stats.st_gid) == (0o660, 4321, 4322)
    lock = Path(f"{sample_model}.lock").stat()
    assert (lock.st_mode & 0o7777, lock.st_gid) == (0o660, 4322)


def test_a_new_model_is_not_for_others(tmp_path):
    old = os.umask(0o022)
    try:
        assert cli_run("train", SAMPLE / "train", "-o", tmp_path / "new.nbm").exit_code == 0
    finally:
        os.umask(old)
    assert (tmp_path / "new.nbm").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "new.nbm.lock").stat().st_mode & 0o777 == 0o640


GROUP, ALICE, BOB = 4700, 4701, 4702


def as_user(uid: int, umask: int, *args) -> tuple[int, str]:
    """`nbspam ARGS` in a forked child of this process run as user ``uid`` of group GROUP
    only, with ``umask``: (exit status, stderr). Everything the command imports must be
    imported already (this interpreter may lie in a folder the user cannot read)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(GROUP)
            os.setuid(uid)
            os.umask(umask)
            result = cli_run(*args)
            os.write(write, json.dumps([result.exit_code, result.stderr]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return tuple(json.loads(data))


@pytest.fixture
def shared():
    """A folder 2775 root:GROUP, as the README sets one up, under a folder all may enter."""
    if os.geteuid() != 0:
        pytest.skip("running commands as two users of one group needs root")
    base = Path(tempfile.mkdtemp(prefix="nbspam-shared-"))
    try:
        base.chmod(0o755)
        folder = base / "mu"
        folder.mkdir()
        os.chown(folder, 0, GROUP)
        folder.chmod(0o2775)
        yield folder
    finally:
        shutil.rmtree(base)


def test_two_users_of_one_group_share_a_model(shared, sample_model_path):
    model = shared / "spam.nbm"
    shutil.copyfile(sample_model_path, model)
    os.chown(model, 0, GROUP)
    model.chmod(0o660)  # the one step of the set-up: the group may write the model
    mail = maildir(shared / "mail")
    shutil.copyfile(MESSAGE, mail / "new" / "1.eml")
    messages = [shared / f"{n}.eml" for n in (1, 2)]
    for n, path in enumerate(messages):
        path.write_bytes(b"Subject: note %d\n\nmeeting at noon, agenda attached\n" % n)
    # the commands' lazy imports, made here: the users cannot read this interpreter's folder
    warm = shared.parent / "warm.nbm"
    shutil.copyfile(sample_model_path, warm)
    for args in (["learn", "-l", "ham", MESSAGE], ["filter", "-j", "1", str(mail)], ["compact"]):
        assert cli_run(args[0], "-m", warm, *args[1:]).exit_code == 0
    warm.with_name("warm.nbm.state").unlink()

    for user, umask, message in ((ALICE, 0o077, messages[0]), (BOB, 0o022, messages[1])):
        status, stderr = as_user(user, umask, "learn", "-m", model, "-l", "ham", message)
        assert status == 0, stderr
        assert stderr.startswith("learned 1 message(s) as ham")
        status, stderr = as_user(user, umask, "filter", "-j", "1", "-m", model, mail)
        assert status == 0, stderr
    sides = (".journal", ".lock", ".state", ".state.lock")
    for path in (model, *(Path(f"{model}{s}") for s in sides)):
        stats = path.stat()
        assert (stat.S_IMODE(stats.st_mode), stats.st_gid) == (0o660, GROUP), path
    status, stderr = as_user(BOB, 0o022, "compact", "-m", model)  # folds both users' learns
    assert (status, stderr) == (0, f"folded 2 journal record(s) into {model}\n")
    stats = model.stat()
    assert (stat.S_IMODE(stats.st_mode), stats.st_gid, stats.st_uid) == (0o660, GROUP, BOB)
    assert len(load_model(model).seen_labels) == len(load_model(sample_model_path).seen_labels) + 2


# -- an output that is an input -------------------------------------------------------------------


def test_sync_refuses_the_model_as_its_state(sample_model, mail):
    before = sample_model.read_bytes()
    result = cli_run("sync", "-m", sample_model, "--state", sample_model, f"ham={mail}")
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: --state {sample_model} is the model; give another file\n",
    )
    assert sample_model.read_bytes() == before


@pytest.mark.parametrize("option", ["--state", "--report"])
def test_filter_refuses_the_model_as_its_state_or_report(sample_model, mail, option):
    before = sample_model.read_bytes()
    result = cli_run("filter", "-j", "1", "-m", sample_model, option, sample_model, mail)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {option} {sample_model} is the model; give another file\n",
    )
    assert sample_model.read_bytes() == before


def test_filter_refuses_one_file_as_state_and_report(sample_model, mail, tmp_path):
    both = tmp_path / "record"
    result = cli_run("filter", "-m", sample_model, "--state", both, "--report", both, mail)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: --report {both} is the --state file; give another file\n",
    )
    assert not both.exists()


@pytest.fixture
def data(tmp_path) -> Path:
    """A copy of sample_data/train."""
    return Path(shutil.copytree(SAMPLE / "train", tmp_path / "data"))


def test_train_refuses_a_message_of_its_data_as_output(data, tmp_path):
    mail = data / "ham" / "001.eml"
    before = mail.read_bytes()
    result = cli_run("train", data, "-o", mail)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: -o {mail} is in the input {data}; give another file\n",
    )
    link = tmp_path / "out.nbm"  # a link to it, elsewhere: its target would be replaced
    link.symlink_to(mail)
    result = cli_run("train", data, "-o", link)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: -o {link} is in the input {data}; give another file\n",
    )
    assert mail.read_bytes() == before


def test_train_refuses_a_labelled_file_as_output(tmp_path):
    mbox = tmp_path / "spam.mbox"
    shutil.copyfile(SAMPLE / "mbox" / os.listdir(SAMPLE / "mbox")[0], mbox)
    result = cli_run("train", f"spam={mbox}", f"ham={SAMPLE / 'train' / 'ham'}", "-o", mbox)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: -o {mbox} is the input {mbox}; give another file\n",
    )


@pytest.mark.parametrize("command", ["learn", "forget"])
def test_learn_and_forget_refuse_the_model_as_a_message(sample_model, command):
    before = sample_model.read_bytes()
    args = ["-l", "ham"] if command == "learn" else []
    result = cli_run(command, "-m", sample_model, *args, MESSAGE, sample_model)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: -m {sample_model} is the input {sample_model}; give another file\n",
    )
    assert sample_model.read_bytes() == before


def test_evaluate_refuses_outputs_among_its_inputs(data, tmp_path):
    mail = data / "spam" / "001.eml"
    result = cli_run("evaluate", data, "--scores", mail)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: --scores {mail} is in the input {data}; give another file\n",
    )
    out = tmp_path / "out.svg"
    result = cli_run("evaluate", data, "--scores", out, "--plot", out)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: --plot {out} is the --scores file; give another file\n",
    )


def test_merge_refuses_one_of_its_models_as_output(sample_model, sample_model_path):
    before = sample_model.read_bytes()
    result = cli_run("merge", sample_model_path, sample_model, "-o", sample_model)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: -o {sample_model} is the model {sample_model}; give another file\n",
    )
    assert sample_model.read_bytes() == before


# -- files that decide what a run does: written by no one but their owner and root -------------

NEW_SPAM = b"From: a@example.org\nSubject: cheap pills zzqxv\n\nbuy cheap pills zzqxv now\n"


@pytest.fixture
def synced(sample_model, mail) -> Path:
    """The sync state of the sample model after one run over ``mail`` as ham."""
    assert cli_run("sync", "-m", sample_model, f"ham={mail}").exit_code == 0
    return Path(f"{sample_model}.sync")


def test_a_sync_state_others_may_write_is_refused(sample_model, mail, synced):
    # a neighbour marks a new message of the folder as learned (its digest expired): sync
    # would never learn it
    (mail / "new" / "2.eml").write_bytes(NEW_SPAM)
    synced.chmod(synced.stat().st_mode | stat.S_IWOTH)
    with synced.open("a") as f:
        f.write(f"maildir:2.eml\tham\t{'0' * 32}\texpired\n")
    before = synced.read_bytes()
    result = cli_run("sync", "-m", sample_model, f"ham={mail}")
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: sync state {synced}: writable by others; chmod o-w {synced}\n",
    )
    assert synced.read_bytes() == before
    assert "zzqxv" not in load_model(sample_model).terms


def test_a_sync_state_of_another_user_or_group_is_refused(sample_model, mail, synced):
    if os.geteuid() != 0:
        pytest.skip("giving a file away needs root")
    os.chown(synced, 4242, -1)
    result = cli_run("sync", "-m", sample_model, f"ham={mail}")
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: sync state {synced}: owned by 4242, not by root: chown it if it is one of yours, else remove it\n",
    )
    os.chown(synced, 0, 4243)
    synced.chmod(0o660)  # the model is not the group's to write: neither is its state
    result = cli_run("sync", "-m", sample_model, f"ham={mail}")
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: sync state {synced}: writable by group 4243; chmod g-w {synced}\n",
    )
    synced.chmod(0o640)
    assert cli_run("sync", "-m", sample_model, f"ham={mail}").exit_code == 0


def test_members_of_a_shared_models_group_sync_with_one_state(shared, sample_model_path):
    model = shared / "spam.nbm"
    shutil.copyfile(sample_model_path, model)
    os.chown(model, 0, GROUP)
    model.chmod(0o660)
    mail = maildir(shared / "mail")
    shutil.copyfile(MESSAGE, mail / "new" / "1.eml")
    warm = shared.parent / "warm.nbm"  # the command's lazy imports, made here (as above)
    shutil.copyfile(sample_model_path, warm)
    assert cli_run("sync", "-m", warm, f"ham={mail}").exit_code == 0
    for user, message in ((ALICE, b"alice's"), (BOB, b"bob's")):
        (mail / "new" / f"{user}.eml").write_bytes(b"Subject: %s note\n\nlunch?\n" % message)
        status, stderr = as_user(user, 0o022, "sync", "-m", model, f"ham={mail}")
        assert status == 0, stderr
    assert stderr.startswith("synced 3 message(s), opened 1:")  # bob read alice's state
    state = Path(f"{model}.sync").stat()  # bob read and replaced the state alice made
    assert (stat.S_IMODE(state.st_mode), state.st_uid, state.st_gid) == (0o660, BOB, GROUP)


def test_a_model_others_may_write_or_replace_is_refused(sample_model, tmp_path):
    message = MESSAGE.read_bytes()
    sample_model.chmod(0o646)  # anyone could write how every user's mail is scored
    error = f"Error: model file {sample_model}: writable by others; chmod o-w {sample_model}\n"
    for args, stdin in ((["predict", MESSAGE], None), (["filter"], message)):
        result = cli_run(args[0], "-m", sample_model, *args[1:], input=stdin)
        assert (result.exit_code, result.stderr) == (1, error)
    sample_model.chmod(0o644)
    tmp_path.chmod(0o777)  # anyone could rename a model of their own over it
    result = cli_run("predict", "-m", sample_model, MESSAGE)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: model file {sample_model}: its folder {tmp_path} is writable by others "
        f"without the sticky bit; chmod o-w {tmp_path}\n",
    )
    tmp_path.chmod(0o1777)  # as /tmp: no one may rename another's file
    assert cli_run("predict", "-m", sample_model, MESSAGE).exit_code == 0


def test_a_journal_planted_beside_the_model_is_refused(sample_model, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a file away needs root")
    from nbspam.errors import UnsafeFileError
    from nbspam.serve.models import Models

    # a model read by all in a folder all may write, with the sticky bit: anyone can make
    # the journal it lacks, which every reader would apply
    tmp_path.chmod(0o1777)
    sample_model.chmod(0o644)
    spam = SAMPLE / "new" / "002.eml"
    assert cli_run("learn", "-m", sample_model, "-l", "ham", spam).exit_code == 0
    journal = Path(f"{sample_model}.journal")
    os.chown(journal, 4242, 4242)  # as the neighbour who planted it
    error = f"journal {journal}: owned by 4242, not by root: chown it if it is one of yours, else remove it"
    result = cli_run("predict", "-m", sample_model, MESSAGE)
    assert (result.exit_code, result.stderr) == (1, f"Error: {error}\n")
    result = cli_run("learn", "-m", sample_model, "-l", "ham", MESSAGE)
    assert (result.exit_code, result.stderr) == (1, f"Error: {error}\n")
    with pytest.raises(UnsafeFileError) as refused:  # nbspam serve answers EX_TEMPFAIL
        Models(str(sample_model)).check()
    assert str(refused.value) == error


def test_a_filter_state_others_may_write_is_refused(sample_model, mail):
    state = Path(f"{sample_model}.state")
    assert cli_run("filter", "-j", "1", "-m", sample_model, mail).exit_code == 0
    state.chmod(state.stat().st_mode | stat.S_IWOTH)  # anyone could mark mail as filtered
    result = cli_run("filter", "-j", "1", "-m", sample_model, mail)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: state file {state}: writable by others; chmod o-w {state}\n",
    )


def _site_model_and_layers(shared: Path, sample_model_path: Path, mode: int):
    """(model, folder, template): the site model in ``shared``, read by all and written by
    root, and a folder of users' layers (mode ``mode``); the commands' lazy imports made
    here, by a learn and a predict of root's elsewhere, before any run as another user."""
    import grp  # noqa: F401 - the check's look-up of a group, made here too

    model = shared / "spam.nbm"
    shutil.copyfile(sample_model_path, model)
    model.chmod(0o644)
    folder = shared / "users"
    folder.mkdir()
    folder.chmod(mode)
    warm = shared.parent / "warm"
    warm.mkdir()
    args = ["--user-models", str(warm / "%u.nbj"), "--user", "x"]
    assert cli_run("learn", "-m", model, *args, "-l", "ham", MESSAGE).exit_code == 0
    assert cli_run("predict", "-m", model, *args, MESSAGE).exit_code == 0
    return model, folder, str(folder / "%u.nbj")


def test_no_user_steers_another_users_layer(shared, sample_model_path):
    model, folder, template = _site_model_and_layers(shared, sample_model_path, 0o2775)
    os.chown(folder, 0, GROUP)
    folder.chmod(0o2775)  # each mail user writes a layer here (the Dovecot wrapper)

    def as_(uid: int, user: str, *command) -> tuple[int, str]:
        return as_user(uid, 0o002, command[0], "-m", model, "--user-models", template,
                       "--user", user, *command[1:])  # fmt: skip

    status, stderr = as_(BOB, "bob", "learn", "-l", "ham", MESSAGE)
    assert (status, stderr) == (
        1,
        f"Error: --user-models {template!r}: its folder {folder} is writable by group "
        f"{GROUP} without the sticky bit: one user could replace another's file; "
        f"chmod +t {folder}\n",
    )
    folder.chmod(0o3775)  # with the sticky bit: no one renames another's file away
    assert as_(BOB, "bob", "learn", "-l", "ham", MESSAGE)[0] == 0
    assert stat.S_IMODE(os.stat(template.replace("%u", "bob")).st_mode) == 0o640  # umask 002
    status, stderr = as_(ALICE, "bob", "learn", "-l", "spam", MESSAGE)  # alice writes bob's
    assert (status, stderr) == (
        1,
        f"Error: cannot write journal {folder}/bob.nbj: permission denied\n",
    )
    # alice makes carol's layer before carol has one: carol's runs refuse it
    assert as_(ALICE, "carol", "learn", "-l", "spam", MESSAGE)[0] == 0
    status, stderr = as_(4703, "carol", "predict", MESSAGE)
    assert (status, stderr) == (
        1,
        f"Error: layer {folder}/carol.nbj: owned by {ALICE}, not by root or 4703: chown it if it is one of yours, else remove it\n",
    )


def test_root_learns_into_a_layer_its_user_made_in_a_folder_all_may_write(
    shared, sample_model_path, monkeypatch
):
    """docs/learning.md's layers folder, 1777: bob's own runs (the Dovecot wrapper) made
    his layer and its lock, and a TELL of root's server for bob learns into them."""
    import pwd

    model, folder, template = _site_model_and_layers(shared, sample_model_path, 0o1777)
    bob = ["--user-models", template, "--user", "bob"]
    assert as_user(BOB, 0o022, "learn", "-m", model, *bob, "-l", "ham", MESSAGE)[0] == 0
    assert {p.stat().st_uid for p in folder.iterdir()} == {BOB}  # bob.nbj and its lock
    user = pwd.struct_passwd(("bob", "x", BOB, GROUP, "", "/home/bob", "/bin/sh"))
    found = pwd.getpwnam
    monkeypatch.setattr(pwd, "getpwnam", lambda name: user if name == "bob" else found(name))
    result = cli_run("learn", "-m", model, *bob, "-l", "spam", MESSAGE)
    assert result.exit_code == 0, result.stderr
    assert "(1 moved from another label, 0 already known)" in result.stderr
