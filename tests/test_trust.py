"""Files that decide what a run does are refused where others than their owner and root may
write them (`core.trust`): the ways around the mode bits a neighbour or a careless
administrator could take."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from nbspam.core import trust
from nbspam.core.settings import read_settings_file
from nbspam.errors import UnsafeFileError
from tests.helpers import SAMPLE, cli_run

MALLORY, GROUP = 4703, 4700
USER_OBJ, USER, GROUP_OBJ, NAMED_GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
NO_ID = 0xFFFFFFFF


def set_acl(path: Path, *named: tuple[int, int, int]) -> None:
    """Give ``path`` a POSIX access ACL, as ``setfacl -m`` would: its mode's owner, group
    and other permissions, the ``named`` entries (tag, id, permissions) and a mask that
    lets them all through; skip the test where the file system keeps no ACL."""
    mode = path.stat().st_mode
    entries = [
        (USER_OBJ, mode >> 6 & 7, NO_ID),
        *((tag, perms, who) for tag, who, perms in named),
        (GROUP_OBJ, mode >> 3 & 7, NO_ID),
        (MASK, 7, NO_ID),
        (OTHER, mode & 7, NO_ID),
    ]
    data = struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", *e) for e in sorted(entries, key=lambda e: (e[0], e[2]))
    )
    try:
        os.setxattr(path, "system.posix_acl_access", data)
    except (AttributeError, OSError) as exc:
        pytest.skip(f"no POSIX ACLs here: {exc}")


@pytest.fixture
def own_group():
    """Tests that need the running user's group to be its private group (no other member),
    so that its mode bits alone would let a file through."""
    if os.geteuid() != 0 or not trust.private_group(os.getegid(), os.geteuid()):
        pytest.skip("needs root, whose group has no other member")


def test_a_settings_file_another_user_may_write_by_its_acl_is_refused(tmp_path, own_group):
    config = tmp_path / "settings.yaml"
    config.write_text("ngrams: 1\n")
    config.chmod(0o640)
    set_acl(config, (USER, MALLORY, 6))  # setfacl -m u:4703:rw: the mode shows 0660
    with pytest.raises(UnsafeFileError) as refused:
        read_settings_file(config, "config file")
    assert str(refused.value) == (
        f"config file {config}: writable by user {MALLORY} (its ACL); chmod g-w {config}"
    )
    set_acl(config, (USER, MALLORY, 4))  # mallory may read it: fine
    assert read_settings_file(config, "config file") == "ngrams: 1\n"


def test_a_settings_file_a_group_may_write_by_its_acl_is_refused(tmp_path, own_group):
    config = tmp_path / "settings.yaml"
    config.write_text("ngrams: 1\n")
    config.chmod(0o640)
    set_acl(config, (NAMED_GROUP, GROUP, 6))
    with pytest.raises(UnsafeFileError) as refused:
        read_settings_file(config, "config file")
    assert (
        str(refused.value) == f"config file {config}: writable by group {GROUP}; chmod g-w {config}"
    )
    config.chmod(0o640)  # chmod g-w: the mask no longer lets the group write
    assert read_settings_file(config, "config file") == "ngrams: 1\n"


def test_a_model_another_user_may_write_by_its_acl_is_refused(sample_model, tmp_path, own_group):
    sample_model.chmod(0o640)
    set_acl(sample_model, (NAMED_GROUP, GROUP, 6))  # a group may write a model: fine
    message = SAMPLE / "new" / "001.eml"
    assert cli_run("predict", "-m", sample_model, message).exit_code == 0
    set_acl(sample_model, (USER, MALLORY, 6), (NAMED_GROUP, GROUP, 6))
    result = cli_run("predict", "-m", sample_model, message)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: model file {sample_model}: writable by user {MALLORY} (its ACL); "
        f"chmod g-w {sample_model}\n",
    )


@pytest.fixture
def root():
    if os.geteuid() != 0:
        pytest.skip("giving a folder to a group needs root")


def test_settings_in_a_folder_a_group_may_write_are_refused(tmp_path, root):
    """A member of the group could rename root's settings away and put a file of their own
    in its place, naming /etc/shadow as the stop words: the file's own mode says nothing."""
    folder = tmp_path / "etc"
    folder.mkdir()
    config = folder / "settings.yaml"
    config.write_text("ngrams: 1\n")
    config.chmod(0o644)
    os.chown(folder, 0, GROUP)
    folder.chmod(0o775)
    model = tmp_path / "out.nbm"
    result = cli_run("train", "-c", config, SAMPLE / "train", "-o", model)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: config file {config}: its folder {folder} is writable by group {GROUP} "
        f"without the sticky bit; chmod g-w {folder}\n",
    )
    assert not model.exists()
    folder.chmod(0o1775)  # with the sticky bit no member renames root's file away
    assert read_settings_file(config, "config file") == "ngrams: 1\n"
    folder.chmod(0o755)
    set_acl(folder, (USER, MALLORY, 7))
    with pytest.raises(UnsafeFileError) as refused:
        read_settings_file(config, "config file")
    assert str(refused.value) == (
        f"config file {config}: its folder {folder} is writable by user {MALLORY} (its ACL) "
        f"without the sticky bit; chmod g-w {folder}"
    )


def test_settings_in_a_folder_of_its_owners_own_group_are_read(tmp_path, own_group):
    folder = tmp_path / "etc"
    folder.mkdir()
    folder.chmod(0o775)  # umask 002, the group its owner's alone
    config = folder / "settings.yaml"
    config.write_text("ngrams: 1\n")
    assert read_settings_file(config, "config file") == "ngrams: 1\n"


def test_a_journal_in_a_folder_its_group_may_write_is_judged_by_its_owner(tmp_path, root):
    """A file that must belong to given owners (a journal, a layer, a state) is not refused
    for a folder its group may write: a file a member put in its place would be theirs."""
    folder = tmp_path / "mu"
    folder.mkdir()
    os.chown(folder, 0, GROUP)
    folder.chmod(0o2775)
    journal = folder / "spam.nbm.journal"
    journal.write_text("")
    journal.chmod(0o644)
    fd = os.open(journal, os.O_RDONLY)
    try:
        trust.check_file(os.fstat(fd), journal, "journal", owners=frozenset(), fd=fd)
        os.chown(journal, MALLORY, GROUP)
        with pytest.raises(UnsafeFileError, match=f"owned by {MALLORY}, not by root"):
            trust.check_file(os.fstat(fd), journal, "journal", owners=frozenset(), fd=fd)
    finally:
        os.close(fd)
