"""Files that decide what a run does are refused where others than their owner and root may
write them (`core.trust`): the ways around the mode bits a neighbour or a careless
administrator could take."""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbspam.core import trust
from nbspam.core.settings import read_settings_file
from nbspam.errors import UnsafeFileError
from nbspam.store.safefiles import foreign_link
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


# -- what another user may have made in a folder anyone may write ------------------------------


@pytest.fixture
def public(tmp_path) -> Path:
    """A folder anyone may write, with the sticky bit, as /tmp."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


def test_settings_another_user_made_in_a_folder_anyone_may_write_are_refused(public, root):
    """Root's ``-c /tmp/nbspam.yaml``: a neighbour made the file first, and its owner is
    whoever got there first, not who gave it."""
    config = public / "nbspam.yaml"
    config.write_text("stop-words: /etc/shadow\n")
    os.chown(config, MALLORY, MALLORY)
    model = public.parent / "out.nbm"
    result = cli_run("train", "-c", config, SAMPLE / "train", "-o", model)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: config file {config}: {config} belongs to {MALLORY}, in {public}, which "
        "anyone may write: anyone could have put it there; remove it\n",
    )
    assert not model.exists()
    os.chown(config, 0, 0)  # root's own: read
    assert read_settings_file(config, "config file") == "stop-words: /etc/shadow\n"
    # nor through a folder or a link another user made there
    folder = public / "conf"
    folder.mkdir()
    (folder / "nbspam.yaml").write_text("ngrams: 1\n")
    os.chown(folder, MALLORY, MALLORY)
    with pytest.raises(UnsafeFileError, match=f": {folder} belongs to {MALLORY}, in {public},"):
        read_settings_file(folder / "nbspam.yaml", "config file")
    link = public / "link.yaml"
    link.symlink_to(config)
    os.lchown(link, MALLORY, MALLORY)
    with pytest.raises(UnsafeFileError, match=f": {link} belongs to {MALLORY}, in {public},"):
        read_settings_file(link, "config file")


def test_a_model_another_user_made_in_a_folder_anyone_may_write_is_refused(
    sample_model_path, public, root
):
    model = public / "spam.nbm"
    shutil.copyfile(sample_model_path, model)
    model.chmod(0o644)
    message = SAMPLE / "new" / "001.eml"
    assert cli_run("predict", "-m", model, message).exit_code == 0  # root's own
    os.chown(model, MALLORY, MALLORY)
    result = cli_run("predict", "-m", model, message)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: model file {model}: {model} belongs to {MALLORY}, in {public}, which "
        "anyone may write: anyone could have put it there; remove it\n",
    )


# -- the way to a file, walked as the system walks it -----------------------------------------


def test_a_link_of_another_user_before_dot_dot_is_seen(tmp_path, root):
    """``..`` after a link climbs from where the link led, not from the link's name: the
    way was cut short by its words (os.path.abspath), and the link never looked at."""
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    (theirs / "sub").mkdir(parents=True)
    mine.mkdir()
    link = mine / "link"
    link.symlink_to(theirs / "sub")
    os.lchown(link, MALLORY, MALLORY)
    output = f"{link}/../out.nbm"  # the system writes theirs/out.nbm
    result = cli_run("train", SAMPLE / "train", "-o", output)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: model file {output}: {link} is a symbolic link of another user (uid {MALLORY}): "
        "refusing to follow it; remove it\n",
    )
    assert not (theirs / "out.nbm").exists() and not (mine / "out.nbm").exists()


def test_the_folders_of_a_file_reached_by_dot_dot_after_a_link_are_judged(tmp_path):
    safe, unsafe = tmp_path / "safe", tmp_path / "unsafe"
    (unsafe / "sub").mkdir(parents=True)
    safe.mkdir()
    (unsafe / "settings.yaml").write_text("stop-words: /etc/shadow\n")
    unsafe.chmod(0o777)  # anyone may put their settings here
    (safe / "link").symlink_to(unsafe / "sub")
    config = f"{safe}/link/../settings.yaml"  # the system reads unsafe/settings.yaml
    with pytest.raises(UnsafeFileError) as refused:
        read_settings_file(config, "config file")
    assert str(refused.value) == (
        f"config file {config}: its folder {unsafe} is writable by others without the "
        f"sticky bit; chmod o-w {unsafe}"
    )


FOLDERS = ("", "a", "a/b", "a/b/c", "c", "c/b")
LINKS = ("l0", "l1", "l2", "l3")
NAMES = ("..", ".", "a", "b", "c", "f", *LINKS)
PLACES = tuple(  # what a link may name in the tree: a folder, a file (most), another link
    f"{folder}/{name}".strip("/") for folder in FOLDERS for name in ("", "", "f", "f", *LINKS)
)
targets = st.one_of(  # (absolute, names): mostly a place in the tree, else any way
    st.tuples(st.just(True), st.sampled_from(PLACES).map(lambda place: place.split("/"))),
    st.tuples(st.just(False), st.sampled_from(("..", "../..", ".", "b", "f", "../f"))).map(
        lambda made: (False, made[1].split("/"))
    ),
    st.tuples(st.booleans(), st.lists(st.sampled_from(NAMES), min_size=1, max_size=4)),
)
links = st.lists(
    st.tuples(
        st.sampled_from(FOLDERS),  # where the link is
        st.sampled_from(LINKS),  # its name
        targets,  # (absolute: in the tree, or relative to the link; the names)
        st.booleans(),  # another user's
    ),
    min_size=3,
    max_size=10,
)


def _tree(made: list) -> tuple[str, list[str]]:
    """A tree of folders (`FOLDERS`), a file ``f`` in each, and the links ``made``:
    (its root, the links of another user in it)."""
    top = tempfile.mkdtemp(prefix="nbspam-walk-")
    for folder in FOLDERS:
        os.makedirs(os.path.join(top, folder), exist_ok=True)
        with open(os.path.join(top, folder, "f"), "w") as f:
            f.write(folder)
    foreign = []
    for folder, name, (absolute, names), theirs in made:
        link = os.path.join(top, folder, name)
        if os.path.lexists(link):
            continue
        target = "/".join(names)
        os.symlink(os.path.join(top, target) if absolute else target, link)
        if theirs and os.geteuid() == 0:
            os.lchown(link, MALLORY, MALLORY)
            foreign.append(link)
    return top, foreign


def _followed(path: str, link: str) -> bool:
    """Whether the system follows ``link`` on the way to ``path`` (which it reaches): the
    way fails once the link leads nowhere."""
    target, owner = os.readlink(link), os.lstat(link).st_uid
    os.unlink(link)
    os.symlink("nowhere", link)
    try:
        os.stat(path)
        followed = False
    except OSError:
        followed = True
    os.unlink(link)
    os.symlink(target, link)
    os.lchown(link, owner, owner)
    return followed


@settings(max_examples=400, deadline=None)
@given(made=links, data=st.data(), slash=st.booleans())
def test_the_walk_reaches_what_the_system_reaches_and_sees_its_links(made, data, slash):
    """`trust.walk` against the system itself: where the system reaches a file, the walk
    ends at that file (os.path.realpath's path, the same inode), and `foreign_link` names
    a link of another user exactly where the system follows one (a link is followed if
    the way fails once it leads nowhere). The path is drawn a name at a time from what
    the folder reached so far holds, and ``..``, so that most paths lead somewhere."""
    top, foreign = _tree(made)
    try:
        path = top
        for _ in range(data.draw(st.integers(2, 6))):
            here = os.path.realpath(path)
            if not os.path.isdir(here) or not here.startswith(top):
                break  # the way ends here, or leaves the tree
            held = sorted(os.listdir(here))
            links_here = [name for name in held if name in LINKS]
            names = [*held, *links_here * 4, ".." if here != top else "."]  # links most
            path = os.path.join(path, data.draw(st.sampled_from(names)))
        path += "/" if slash else ""
        steps, end = trust.walk(path)  # it ends, whatever the loops
        try:
            reached = os.stat(path)
        except OSError:
            return
        assert end == os.path.realpath(path)
        found = os.stat(end)
        assert (found.st_dev, found.st_ino) == (reached.st_dev, reached.st_ino)
        followed = [link for link in foreign if _followed(path, link)]
        assert (foreign_link(path) is not None) == bool(followed)
    finally:
        shutil.rmtree(top)


def test_a_fifo_others_may_write_is_no_way_around(tmp_path):
    """A FIFO's bytes are whatever its writer writes when it is read: one anyone may
    write (mkfifo -m 666) is as a file anyone may write. A pipe of one's own (bash's
    ``-c <(make-settings)``) is read."""
    import threading

    fifo = tmp_path / "settings.yaml"
    os.mkfifo(fifo)
    fifo.chmod(0o666)

    def write() -> None:  # the neighbour, who finds the reader gone: refused unread
        fd = os.open(fifo, os.O_WRONLY)
        try:
            os.write(fd, b"stop-words: /etc/shadow\n")
        except BrokenPipeError:
            pass
        finally:
            os.close(fd)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with pytest.raises(UnsafeFileError) as refused:
            read_settings_file(fifo, "config file")
    finally:
        writer.join()
    assert str(refused.value) == f"config file {fifo}: writable by others; chmod o-w {fifo}"
    read, write_end = os.pipe()
    os.write(write_end, b"ngrams: 1\n")
    os.close(write_end)
    try:
        assert read_settings_file(f"/dev/fd/{read}", "config file") == "ngrams: 1\n"
    finally:
        os.close(read)


# -- what the checks cost -----------------------------------------------------------------------


def test_a_server_does_not_list_every_user_of_the_host_for_each_message(
    sample_model, tmp_path, own_group, monkeypatch
):
    """Whether a group is its owner's private one lists every user of the host (LDAP's
    too, where it enumerates): it is looked up once a while, not for each message a server
    scores with layers in a folder its owner's group may write (0770 nbspam:nbspam)."""
    import pwd

    from nbspam.serve import scoring
    from nbspam.serve.models import Models

    folder = tmp_path / "users"
    folder.mkdir()
    folder.chmod(0o770)
    listed, everyone = [], pwd.getpwall
    monkeypatch.setattr(pwd, "getpwall", lambda: listed.append(1) or everyone())
    models = Models(str(sample_model), str(folder / "%u.nbj"))
    data = (SAMPLE / "new" / "001.eml").read_bytes()
    for _ in range(50):
        scoring.score(models, "alice", data)
    assert len(listed) <= 1
    before = len(listed)
    monkeypatch.setattr(trust, "PRIVATE_FOR", 0.0)  # past the time a look-up is kept
    scoring.score(models, "alice", data)
    assert len(listed) == before + 1
