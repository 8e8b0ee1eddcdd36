"""nbspam sync: folders with labels, learned; moves relabelled exactly; reruns cost the
changes; kills lose and double-count nothing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import nbspam.mail.messages
from nbspam.core.settings import Settings
from nbspam.mail.message import Message, Problems
from nbspam.models.model import fit_messages
from nbspam.service.sync import load_state, sync
from nbspam.store.modelfile import load_model
from tests.helpers import ENV, SAMPLE, cli_run

COUNTS = (
    "labels",
    "terms",
    "class_count",
    "term_count",
    "doc_count",
    "seen_digests",
    "seen_labels",
)


def maildir(path: Path) -> Path:
    for sub in ("cur", "new", "tmp"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    return path


def deliver(folder: Path, name: str, data: bytes, flags: str = "S") -> Path:
    path = folder / "cur" / f"{name}:2,{flags}"
    path.write_bytes(data)
    return path


def mailbox(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A model trained on the sample, and a Maildir++ with the sample's spam in .Junk and
    its ham in the inbox."""
    inbox = maildir(tmp_path / "Maildir")
    junk = maildir(inbox / ".Junk")
    for label, folder in (("spam", junk), ("ham", inbox)):
        for path in sorted((SAMPLE / "train" / label).iterdir()):
            deliver(folder, f"1700000000.{label}{path.stem}.host", path.read_bytes())
    model = tmp_path / "m.nbm"
    assert cli_run("train", SAMPLE / "train", "-o", model).exit_code == 0
    return model, inbox, junk


def expected_counts(model_path: Path, folders: dict[str, Path]):
    """The model trained on the messages in the folders under the folders' labels, with the
    settings of the model at ``model_path``."""
    model = load_model(model_path)
    messages = [
        Message(str(path), path.read_bytes(), label)
        for label, folder in folders.items()
        for sub in ("cur", "new")
        for path in sorted((folder / sub).iterdir())
    ]
    return fit_messages(messages, Settings(tokenizer=model.tokenizer, training=model.training))


def assert_same_counts(a, b) -> None:
    for name in COUNTS:
        left, right = getattr(a, name), getattr(b, name)
        if isinstance(left, np.ndarray):
            assert np.array_equal(left, right), name
        else:
            assert left == right, name


def run_sync(model: Path, inbox: Path, junk: Path):
    return sync(str(model), [f"spam={junk}", f"ham={inbox}"], f"{model}.sync", Problems())


def test_a_move_out_of_junk_is_relabelled_exactly(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    first = run_sync(model, inbox, junk)
    assert (first.found, first.opened, first.unchanged, first.relabelled) == (48, 48, 48, 0)
    moved = sorted((junk / "cur").iterdir())[0]
    os.rename(moved, inbox / "cur" / moved.name.replace(":2,S", ":2,RS"))  # read and replied
    new = deliver(
        junk, "1700000100.new.host", b"Subject: win a prize\n\nclaim your free prize now\n"
    )
    done = run_sync(model, inbox, junk)
    assert (done.found, done.opened, done.relabelled) == (49, 2, 1)
    assert done.learned == {"ham": 0, "spam": 1}
    assert_same_counts(load_model(model), expected_counts(model, {"spam": junk, "ham": inbox}))
    state = load_state(f"{model}.sync").entries
    assert state["maildir:" + moved.name.split(":2,")[0]][0] == "ham"
    assert state["maildir:" + new.name.split(":2,")[0]][0] == "spam"
    again = run_sync(model, inbox, junk)
    assert (again.opened, again.learned, again.relabelled) == (0, {}, 0)


def test_a_rerun_opens_only_the_changed_files_of_ten_thousand(tmp_path, monkeypatch):
    inbox = maildir(tmp_path / "Maildir")
    junk = maildir(inbox / ".Junk")
    for i in range(10_000):
        folder = junk if i % 4 == 0 else inbox
        body = f"Subject: note {i}\n\nword{i} and the usual text {i % 97}\n"
        deliver(folder, f"1700000000.M{i}P1.host", body.encode())
    model = tmp_path / "m.nbm"
    assert cli_run("train", SAMPLE / "train", "-o", model).exit_code == 0
    assert run_sync(model, inbox, junk).opened == 10_000
    moved = sorted((inbox / "cur").iterdir())[:10]
    for path in moved:
        os.rename(path, junk / "cur" / path.name)
    opened = []
    real_read = nbspam.mail.messages.read_bytes
    monkeypatch.setattr(nbspam.mail.messages, "read_bytes", lambda p: opened.append(p) or real_read(p))
    done = run_sync(model, inbox, junk)
    assert sorted(opened) == sorted(str(junk / "cur" / p.name) for p in moved)
    assert (done.found, done.opened, done.relabelled) == (10_000, 10, 10)


@pytest.mark.parametrize(
    "where", ["before the journal is committed", "between the journal and the state"]
)
def test_a_run_killed_anywhere_loses_and_double_counts_nothing(tmp_path, monkeypatch, where):
    import nbspam.service.sync
    import nbspam.store.journal

    model, inbox, junk = mailbox(tmp_path)
    run_sync(model, inbox, junk)
    for path in sorted((junk / "cur").iterdir())[:3]:
        os.rename(path, inbox / "cur" / path.name)
    deliver(inbox, "1700000200.new.host", b"Subject: lunch\n\nsee you at noon\n")

    class Killed(BaseException):
        pass

    def killed(*args, **kwargs):
        raise Killed

    target = (
        (nbspam.store.journal.Writer, "commit")
        if where.startswith("before")
        else (nbspam.service.sync, "save_state")
    )
    with monkeypatch.context() as patch:
        patch.setattr(*target, killed)
        with pytest.raises(Killed):
            run_sync(model, inbox, junk)
    done = run_sync(model, inbox, junk)
    assert done.opened == 4
    assert_same_counts(load_model(model), expected_counts(model, {"spam": junk, "ham": inbox}))


def test_sigkill_during_runs_then_a_full_run_gives_the_exact_model(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    for i in range(3000):
        deliver(
            inbox if i % 3 else junk,
            f"1700001000.K{i}.host",
            f"Subject: s{i}\n\nw{i} x{i % 7}\n".encode(),
        )
    args = [sys.executable, "-m", "nbspam", "sync", "-m", model, f"spam={junk}", f"ham={inbox}"]
    for delay in (0.4, 0.8, 1.2):
        child = subprocess.Popen(
            args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}").exit_code == 0
    assert_same_counts(load_model(model), expected_counts(model, {"spam": junk, "ham": inbox}))


def test_a_file_gone_before_it_is_read_is_left_for_the_next_run(tmp_path, monkeypatch):
    model, inbox, junk = mailbox(tmp_path)
    run_sync(model, inbox, junk)
    moved = sorted((junk / "cur").iterdir())[0]
    os.rename(moved, inbox / "cur" / moved.name)
    real_read = nbspam.mail.messages.read_bytes

    def vanished(path):
        raise FileNotFoundError(path)

    with monkeypatch.context() as patch:
        patch.setattr(nbspam.mail.messages, "read_bytes", vanished)
        assert run_sync(model, inbox, junk).opened == 0
    assert nbspam.mail.messages.read_bytes is real_read
    assert run_sync(model, inbox, junk).relabelled == 1


def test_the_command_reports_in_one_line_and_refuses_bad_folders(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    result = cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}")
    assert result.exit_code == 0
    assert result.stderr == (
        "synced 48 message(s), opened 48: learned nothing new, 0 moved from another label, "
        "48 already known\n"
    )
    assert (tmp_path / "m.nbm.sync").exists()
    result = cli_run("sync", "-m", model, f"junk={junk}")
    assert (result.exit_code, result.stderr) == (
        2,
        f"Error: junk={junk}: the model has no label 'junk' (its labels: ham, spam)\n",
    )
    result = cli_run("sync", "-m", model, str(junk))
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: give each folder as LABEL=FOLDER")
    shutil.copy(sorted((junk / "cur").iterdir())[0], inbox / "cur")  # a copy in both
    result = cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}")
    assert result.exit_code == 3
    assert "in folders of two labels at once, left as it was" in result.stderr


# -- the state follows the model ----------------------------------------------------------------


def test_a_retrained_model_is_learned_again_and_said_so(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    for i in range(5):
        deliver(junk, f"1700000300.S{i}.host", f"Subject: prize {i}\n\nfree prize {i}\n".encode())
    assert cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}").exit_code == 0
    assert cli_run("train", SAMPLE / "train", "-o", model).exit_code == 0  # in place
    result = cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}")
    assert (result.exit_code, result.stderr) == (
        0,
        "note: 5 message(s) in the sync state are not in the model as sync learned them (it "
        "was retrained or restored, or learn or forget changed them): reading them again\n"
        "synced 53 message(s), opened 5: learned 5 as spam, 0 moved from another label, "
        "0 already known\n",
    )
    assert_same_counts(load_model(model), expected_counts(model, {"spam": junk, "ham": inbox}))
    again = cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}")
    assert again.stderr.startswith("synced 53 message(s), opened 0: learned nothing new")


def test_a_restored_model_is_learned_again(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    run_sync(model, inbox, junk)
    backup = tmp_path / "m.dump"
    assert cli_run("dump", "-m", model, "-o", backup).exit_code == 0
    for path in sorted((junk / "cur").iterdir())[:2]:
        os.rename(path, inbox / "cur" / path.name)
    deliver(inbox, "1700000400.new.host", b"Subject: lunch\n\nsee you at noon\n")
    assert run_sync(model, inbox, junk).opened == 3
    model.unlink()
    assert cli_run("restore", backup, "-o", model).exit_code == 0
    done = run_sync(model, inbox, junk)
    assert (done.stale, done.opened, done.relabelled, done.learned) == (3, 3, 2, {"ham": 1})
    assert_same_counts(load_model(model), expected_counts(model, {"spam": junk, "ham": inbox}))


def test_learn_or_forget_outside_sync_is_undone_where_the_folders_say_otherwise(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    run_sync(model, inbox, junk)
    spam, ham = sorted((junk / "cur").iterdir())[0], sorted((inbox / "cur").iterdir())[0]
    assert cli_run("forget", "-m", model, spam).exit_code == 0
    assert cli_run("learn", "-m", model, "--label", "spam", ham).exit_code == 0
    done = run_sync(model, inbox, junk)
    assert (done.stale, done.opened, done.relabelled, done.learned) == (
        2,
        2,
        1,
        {"ham": 0, "spam": 1},
    )
    assert_same_counts(load_model(model), expected_counts(model, {"spam": junk, "ham": inbox}))


def test_digests_expired_by_prune_are_not_learned_twice(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    run_sync(model, inbox, junk)
    before = load_model(model)
    assert cli_run("prune", "-m", model, "--keep-digests", "10").exit_code == 0
    for _ in range(2):
        done = run_sync(model, inbox, junk)
        assert (done.stale, done.opened) == (0, 0)
    after = load_model(model)
    assert len(after.seen_digests) == 10
    assert np.array_equal(after.class_count, before.class_count)
    assert np.array_equal(after.term_count, before.term_count)
    state = load_state(f"{model}.sync")
    assert (state.expired, sum(e[2] for e in state.entries.values())) == (38, 38)
    # another model put in place: what it does not hold is learned again
    assert cli_run("train", SAMPLE / "train", "-o", model).exit_code == 0
    done = run_sync(model, inbox, junk)
    assert (done.stale, done.opened) == (0, 0)  # it holds every one of them
    assert load_state(f"{model}.sync").expired == 0


# -- what the folders mean ----------------------------------------------------------------------


def test_a_message_changed_then_moved_out_of_junk_counts_once(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    run_sync(model, inbox, junk)
    edited = sorted((junk / "cur").iterdir())[0]
    old = edited.read_bytes()
    edited.write_bytes(old.replace(b"\n\n", b"\nX-Note: checked\n\n", 1) + b"checked by hand\n")
    os.rename(edited, inbox / "cur" / edited.name)
    done = run_sync(model, inbox, junk)
    assert (done.opened, done.relabelled, done.learned) == (1, 0, {"ham": 1})
    got, want = load_model(model), expected_counts(model, {"spam": junk, "ham": inbox})
    assert list(got.class_count) == list(want.class_count) == [25, 23]
    assert sorted(map(bytes, got.seen_digests)) == sorted(map(bytes, want.seen_digests))
    assert (got.term_count >= 0).all() and (got.doc_count <= got.term_count).all()


def test_a_copy_under_a_new_name_in_both_labels_is_left_as_it_was_and_reported(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    run_sync(model, inbox, junk)
    before = load_model(model)
    known = sorted((junk / "cur").iterdir())[0]
    shutil.copy(known, inbox / "cur" / "1700000500.copy.host:2,S")
    both = b"Subject: which is it\n\nnew text in two places\n"
    deliver(inbox, "1700000501.a.host", both)
    deliver(junk, "1700000501.b.host", both)
    result = cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}")
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert sorted(lines[:4]) == sorted(
        f"{path}: in folders of two labels at once (a copy), left as it was"
        for path in (
            known,
            inbox / "cur" / "1700000500.copy.host:2,S",
            inbox / "cur" / "1700000501.a.host:2,S",
            junk / "cur" / "1700000501.b.host:2,S",
        )
    )
    assert lines[4:] == [
        "4 inputs skipped, see above",
        "synced 51 message(s), opened 3: learned nothing new, 0 moved from another label, "
        "0 already known",
    ]
    assert_same_counts(load_model(model), before)
    (inbox / "cur" / "1700000500.copy.host:2,S").unlink()
    (junk / "cur" / "1700000501.b.host:2,S").unlink()
    result = cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}")
    assert result.exit_code == 0
    assert_same_counts(load_model(model), expected_counts(model, {"spam": junk, "ham": inbox}))


def test_nested_plain_folders_the_more_specific_one_wins(tmp_path):
    mail = tmp_path / "mail"
    (mail / "Junk").mkdir(parents=True)
    for label, folder in (("spam", mail / "Junk"), ("ham", mail)):
        for path in sorted((SAMPLE / "train" / label).iterdir()):
            shutil.copy(path, folder / f"{label}-{path.name}")
    model = tmp_path / "m.nbm"
    assert cli_run("train", SAMPLE / "train", "-o", model).exit_code == 0
    assert cli_run("forget", "-m", model, *sorted((mail / "Junk").iterdir())[:3]).exit_code == 0
    result = cli_run("sync", "-m", model, f"spam={mail / 'Junk'}", f"ham={mail}")
    assert (result.exit_code, result.stderr) == (
        0,
        "synced 48 message(s), opened 48: learned 3 as spam, 0 moved from another label, "
        "45 already known\n",
    )
    model_now = load_model(model)
    files = [
        Message(str(p), p.read_bytes(), "spam" if p.parent.name == "Junk" else "ham")
        for p in sorted(mail.rglob("*"))
        if p.is_file()
    ]
    assert_same_counts(
        model_now,
        fit_messages(files, Settings(tokenizer=model_now.tokenizer, training=model_now.training)),
    )


_PEAK = """
import resource, sys
import nbspam.service.update
from nbspam.mail.message import Problems
from nbspam.store.modelfile import load_model
from nbspam.service.sync import sync

nbspam.service.update.CHUNK_BYTES = 1 << 20  # a small chunk, for a small test
model, junk, inbox = sys.argv[1:]
load_model(model)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
done = sync(model, [f"spam={junk}", f"ham={inbox}"], model + ".sync", Problems())
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(done.opened, (after - before) * 1024)
"""


def test_memory_does_not_grow_with_the_bytes_read(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    line = " ".join(f"w{i}" for i in range(40)) + "\n"
    for i in range(400):  # 26 MB
        body = f"Subject: long {i}\n\nunique{i}\n" + line * 1600
        deliver(junk if i % 2 else inbox, f"1700000600.L{i}.host", body.encode())
    child = subprocess.run(
        [sys.executable, "-c", _PEAK, model, junk, inbox], env=ENV, capture_output=True
    )
    assert child.returncode == 0, child.stderr
    opened, growth = map(int, child.stdout.split())
    assert opened == 448
    assert growth < 26_000_000 / 3  # before: 83 MB, all the messages and their counts


@pytest.mark.parametrize("seed", range(4))
def test_after_any_moves_copies_and_deletes_the_model_is_the_folders(tmp_path, seed):
    """The invariant: after each run the model equals training on every message it was
    trained on or sync saw, under the label all its copies in the folders give it now; a
    message deleted from every folder keeps its last label, one whose copies disagree keeps
    the label it had (or stays out)."""
    import random

    model, inbox, junk = mailbox(tmp_path)
    base = [
        Message(str(p), p.read_bytes(), label)
        for label in ("ham", "spam")
        for p in sorted((SAMPLE / "train" / label).iterdir())
    ]
    rng = random.Random(seed)
    folders = {"spam": junk / "cur", "ham": inbox / "cur"}
    expected = {m.data: m.label for m in base}
    for step in range(25):
        for _ in range(rng.randint(1, 3)):
            files = sorted(p for f in folders.values() for p in f.iterdir())
            action = rng.choice(["new", "new", "move", "move", "copy", "delete"])
            name = f"1700000700.R{step}x{rng.randrange(10**6)}.host:2,S"
            if action == "new" or not files:
                text = f"Subject: r{step}\n\nword{rng.randrange(30)} w{step} x{rng.randrange(9)}\n"
                deliver(folders[rng.choice(["spam", "ham"])].parent, name[:-4], text.encode())
                continue
            path = rng.choice(files)
            other = folders["ham" if path.parent == folders["spam"] else "spam"]
            if action == "move":
                os.rename(path, other / path.name)
            elif action == "copy":
                shutil.copy(path, rng.choice([other, path.parent]) / name)
            else:
                path.unlink()
        run_sync(model, inbox, junk)
        now: dict[bytes, set[str]] = {}
        for label, folder in folders.items():
            for path in folder.iterdir():
                now.setdefault(path.read_bytes(), set()).add(label)
        for data, labels in now.items():
            if len(labels) == 1:
                expected[data] = labels.pop()
        got = load_model(model)
        learned = [Message(str(i), d, label) for i, (d, label) in enumerate(expected.items())]
        want = fit_messages(learned, Settings(tokenizer=got.tokenizer, training=got.training))
        assert_same_counts(got, want)


def test_a_damaged_state_file_is_read_again_not_a_crash(tmp_path):
    model, inbox, junk = mailbox(tmp_path)
    run_sync(model, inbox, junk)
    state = tmp_path / "m.nbm.sync"
    lines = state.read_text().splitlines()
    assert lines[:2] == [
        "# nbspam sync state 2: key<TAB>label<TAB>digest[<TAB>expired]",
        "# expired digests of the model: 0",
    ]
    key, label, digest = lines[2].split("\t")
    lines[1] = "# expired digests of the model: " + "9" * 5000
    lines[2] = f"{key}\t{label}\t{'z' * 32}"
    lines[3] = lines[3] + "\tsomething"
    state.write_text("\n".join(lines) + "\n")
    result = cli_run("sync", "-m", model, f"spam={junk}", f"ham={inbox}")
    assert (result.exit_code, result.stderr) == (
        0,
        "synced 48 message(s), opened 2: learned nothing new, 0 moved from another label, "
        "2 already known\n",
    )


def test_a_file_name_with_line_breaks_cannot_write_lines_of_the_state(tmp_path):
    # whoever may name a file in a synced folder (a shared spam trap) wrote, through its
    # name, a state line of their own: here one that marks a message of the inbox as
    # learned (a digest prune expired), so that sync never learned it
    model, inbox, junk = mailbox(tmp_path)
    target = "1700000200.target.host"
    forged = f"x\tspam\t{'0' * 32}\nmaildir:{target}\tham\t{'1' * 32}\texpired\nx"
    deliver(junk, forged, b"Subject: cheap pills\n\nbuy cheap pills now\n")
    run_sync(model, inbox, junk)
    deliver(inbox, target, b"Subject: lunch\n\nshall we have lunch on friday\n")
    done = run_sync(model, inbox, junk)
    assert done.learned["ham"] == 1
    assert_same_counts(load_model(model), expected_counts(model, {"spam": junk, "ham": inbox}))


def test_a_file_name_with_a_carriage_return_cannot_make_lines_of_the_state(tmp_path):
    # the state was read with universal newlines, so a carriage return in a key ended a
    # line: the rest of the name became an entry of its own, here one that marks a message
    # delivered later to the same folder as learned (under the digest of this one)
    model, inbox, junk = mailbox(tmp_path)
    target = "1700000200.target.host"
    deliver(junk, f"x\rmaildir:{target}", b"Subject: cheap pills\n\nbuy cheap pills now\n")
    run_sync(model, inbox, junk)
    deliver(junk, target, b"Subject: a prize\n\nclaim your free prize today\n")
    done = run_sync(model, inbox, junk)
    assert done.learned["spam"] == 1
    assert f"maildir:x\rmaildir:{target}" in load_state(f"{model}.sync").entries
    assert_same_counts(load_model(model), expected_counts(model, {"spam": junk, "ham": inbox}))
