"""Tests of nbspam.mail.messages: folders, Maildirs, mboxes, tables, stdin, labels and problems.

Every fixture is built in a temporary folder, and each test runs from inside it so that the
identifiers are the short relative paths a user would type.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbspam.errors import InputError
from nbspam.mail.message import Message, Problems
from nbspam.mail.messages import LINK_OUT, read_labelled, read_messages

LOOP = "folder already read (a symbolic link loop or a second link to it), not entered again"

MBOX = (
    b"From alice@example.com Mon Jan  1 00:00:00 2024\n"
    b"Subject: one\n"
    b"\n"
    b"first body\n"
    b">From the quoted line, which does not start a message\n"
    b"\n"
    b"From bob@example.com Tue Jan  2 00:00:00 2024\n"
    b"Subject: two\n"
    b"\n"
    b"second body\n"
    b"\n"
    b"From carol@example.com Wed Jan  3 00:00:00 2024\n"
    b"Subject: three\n"
    b"\n"
    b"third body\n"
)
MBOX_MESSAGES = [
    b"Subject: one\n\nfirst body\n>From the quoted line, which does not start a message\n",
    b"Subject: two\n\nsecond body\n",
    b"Subject: three\n\nthird body\n",
]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def set_cap(monkeypatch, size):
    """MAX_MESSAGE_BYTES as ``size`` for every reader: a message, a file, an mbox."""
    import nbspam.mail.mbox
    import nbspam.mail.message
    import nbspam.mail.messages
    import nbspam.mail.table_rows

    modules = (nbspam.mail.message, nbspam.mail.messages, nbspam.mail.mbox, nbspam.mail.table_rows)
    for module in modules:
        monkeypatch.setattr(module, "MAX_MESSAGE_BYTES", size)


def write(path: str, data: bytes | str = b"", encoding: str = "utf-8") -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        p.write_bytes(data.encode(encoding))
    else:
        p.write_bytes(data)


def collector() -> tuple[Problems, list[str]]:
    lines: list[str] = []
    return Problems(lines.append), lines


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def triples(messages: list[Message]) -> list[tuple[str, bytes | str, str | None]]:
    return [(m.id, m.data, m.label) for m in messages]


# --------------------------------------------------------------------------------------------
# Problems
# --------------------------------------------------------------------------------------------


def test_problems_counts_skips_but_not_notes():
    problems, lines = collector()
    problems.skip("a.eml", "permission denied")
    problems.note("something to know")
    problems.skip("b.tsv#3", "no label in this row")
    assert problems.skipped == 2
    assert lines == [
        "a.eml: permission denied",
        "note: something to know",
        "b.tsv#3: no label in this row",
    ]


def test_problems_without_a_report_callback_still_counts():
    problems = Problems()
    problems.skip("x", "why")
    problems.note("ignored")
    assert problems.skipped == 1


# --------------------------------------------------------------------------------------------
# Files and folders
# --------------------------------------------------------------------------------------------


def test_nested_folder_identifiers_and_sorted_order():
    write("mail/b.txt", b"B")
    write("mail/a/2.eml", b"A2")
    write("mail/a/10.eml", b"A10")
    write("mail/c/d/deep", b"CD")
    write("mail/Z", b"Z")
    problems, lines = collector()
    got = list(read_messages(["mail"], problems))
    # Sorted by name at each level (so "10.eml" before "2.eml", "Z" before "a").
    assert triples(got) == [
        ("mail/Z", b"Z", None),
        ("mail/a/10.eml", b"A10", None),
        ("mail/a/2.eml", b"A2", None),
        ("mail/b.txt", b"B", None),
        ("mail/c/d/deep", b"CD", None),
    ]
    assert lines == []
    assert problems.skipped == 0


def test_folder_path_is_joined_as_given():
    write("mail/x", b"X")
    problems, _ = collector()
    assert ids(list(read_messages(["./mail/"], problems))) == ["./mail/x"]


def test_paths_are_read_in_the_order_given():
    write("one", b"1")
    write("dir/two", b"2")
    write("three", b"3")
    problems, _ = collector()
    got = list(read_messages(["three", "dir", "one"], problems))
    assert triples(got) == [("three", b"3", None), ("dir/two", b"2", None), ("one", b"1", None)]


def test_a_table_inside_a_folder_is_one_raw_message():
    write("mail/rows.tsv", b"spam\tbuy\nham\thi\n")
    problems, _ = collector()
    assert triples(list(read_messages(["mail"], problems))) == [
        ("mail/rows.tsv", b"spam\tbuy\nham\thi\n", None)
    ]


def test_hidden_files_and_folders_are_skipped():
    write("mail/visible", b"v")
    write("mail/.hidden", b"h")
    write("mail/.git/config", b"g")
    write("mail/sub/.DS_Store", b"d")
    write("mail/sub/ok", b"o")
    problems, lines = collector()
    got = list(read_messages(["mail"], problems))
    assert ids(got) == ["mail/sub/ok", "mail/visible"]
    assert lines == []
    assert problems.skipped == 0


def test_a_hidden_folder_given_by_name_is_read():
    write(".inbox/m", b"m")
    write(".inbox/.skip", b"s")
    problems, _ = collector()
    assert ids(list(read_messages([".inbox"], problems))) == [".inbox/m"]


def test_an_empty_file_is_no_message_and_is_reported():
    write("empty.eml", b"")
    write("mail/blank", b" \n\r\n\t")
    write("mail/full", b"x")
    problems, lines = collector()
    got = list(read_messages(["empty.eml", "mail"], problems))
    assert triples(got) == [("mail/full", b"x", None)]
    assert lines == ["empty.eml: empty, not a message", "mail/blank: empty, not a message"]
    assert problems.skipped == 2


def test_missing_path_is_reported_and_the_rest_goes_on():
    write("a.txt", b"A")
    write("b.txt", b"B")
    problems, lines = collector()
    got = list(read_messages(["a.txt", "missing.txt", "nodir/", "gone.csv", "b.txt"], problems))
    assert triples(got) == [("a.txt", b"A", None), ("b.txt", b"B", None)]
    assert lines == [
        "missing.txt: no such file or directory",
        "nodir/: no such file or directory",
        "gone.csv: no such file or directory",
    ]
    assert problems.skipped == 3


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="permissions do not stop root from reading a file",
)
def test_unreadable_file_and_folder_are_reported_and_skipped():
    write("mail/a.eml", b"A")
    write("mail/locked/inner", b"I")
    write("mail/secret.eml", b"S")
    write("mail/z.eml", b"Z")
    write("rows.tsv", "spam\tx\n")
    os.chmod("mail/secret.eml", 0)
    os.chmod("mail/locked", 0)
    os.chmod("rows.tsv", 0)
    try:
        problems, lines = collector()
        got = list(read_messages(["mail", "rows.tsv"], problems))
    finally:
        os.chmod("mail/secret.eml", 0o644)
        os.chmod("mail/locked", 0o755)
        os.chmod("rows.tsv", 0o644)
    assert triples(got) == [("mail/a.eml", b"A", None), ("mail/z.eml", b"Z", None)]
    assert lines == [
        "mail/locked: permission denied",
        "mail/secret.eml: permission denied",
        "rows.tsv: permission denied",
    ]
    assert problems.skipped == 3


def test_a_dangling_link_is_reported_and_a_large_file_read_whole():
    big = b"Subject: big\n\n" + b"x" * (3 << 16)
    write("mail/a.eml", big)
    write("mail/c.eml", b"C")
    os.symlink("nowhere.eml", "mail/b.eml")
    problems, lines = collector()
    got = list(read_messages(["mail"], problems))
    assert triples(got) == [("mail/a.eml", big, None), ("mail/c.eml", b"C", None)]
    assert lines == ["mail/b.eml: no such file or directory"]


def test_a_file_is_read_to_its_end_when_one_read_returns_less(monkeypatch):
    # Linux returns at most about 2 GiB from one read: a larger file takes several
    data = b"Subject: long\n\n" + b"z" * 100
    write("mail/a.eml", data)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, min(n, 64)))
    got = list(read_messages(["mail"], Problems()))
    assert triples(got) == [("mail/a.eml", data, None)]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path):
    # with no writer, opening it to read used to wait for ever; only stdin ('-') is a pipe
    pipe = tmp_path / "piped.eml"
    os.mkfifo(pipe)
    problems, lines = collector()
    got = list(read_messages([str(pipe)], problems))
    assert got == []
    assert lines == [f"{pipe}: not a regular file (a FIFO or a device)"]


# --------------------------------------------------------------------------------------------
# Symbolic links
# --------------------------------------------------------------------------------------------


def make_loop_tree() -> None:
    write("tree/a/x", b"AX")
    write("tree/b/y", b"BY")
    write("tree/top", b"TOP")
    os.symlink("..", "tree/a/loop")


def test_symlink_loop_is_reported_once_and_every_file_read_once():
    make_loop_tree()
    problems, lines = collector()
    got = list(read_messages(["tree"], problems))
    assert triples(got) == [
        ("tree/a/x", b"AX", None),
        ("tree/b/y", b"BY", None),
        ("tree/top", b"TOP", None),
    ]
    assert lines == [f"tree/a/loop: {LOOP}"]
    assert problems.skipped == 1


def test_a_link_up_out_of_the_folder_is_not_followed():
    # Starting at tree/a, the link leads up to tree: out of the folder given
    make_loop_tree()
    problems, lines = collector()
    got = list(read_messages(["tree/a"], problems))
    assert triples(got) == [("tree/a/x", b"AX", None)]
    assert lines == [f"tree/a/loop: {LINK_OUT}"]
    assert problems.skipped == 1


def test_follow_links_enters_a_link_up_and_tree_a_is_then_met_again(tmp_path):
    make_loop_tree()
    problems, lines = collector()
    got = list(read_messages(["tree/a"], problems, follow_links=True))
    tree = os.path.realpath(tmp_path / "tree")  # what the link leads to, named as it is
    assert triples(got) == [
        (f"{tree}/b/y", b"BY", None),
        (f"{tree}/top", b"TOP", None),
        ("tree/a/x", b"AX", None),
    ]
    assert lines == [f"{tree}/a: {LOOP}"]


def test_links_inside_the_folder_are_followed_and_named_by_where_they_lead():
    write("mail/own", b"O")
    write("mail/sub/deep", b"D")
    os.symlink("sub", "mail/linked")
    os.symlink("own", "mail/alias")
    os.symlink("../mail/sub/deep", "mail/roundabout")  # out and back in: inside
    problems, lines = collector()
    got = list(read_messages(["mail"], problems))
    assert triples(got) == [
        ("mail/own", b"O", None),  # mail/alias
        ("mail/sub/deep", b"D", None),  # mail/linked: the folder read once
        ("mail/own", b"O", None),
        ("mail/sub/deep", b"D", None),  # mail/roundabout
    ]
    assert lines == [f"mail/sub: {LOOP}"]


def test_links_out_of_the_folder_are_reported_and_follow_links_follows_them(tmp_path):
    write("elsewhere/z", b"Z")
    write("mail/own", b"O")
    os.symlink("../elsewhere", "mail/linked")
    os.symlink("../elsewhere/z", "mail/alias")
    problems, lines = collector()
    got = list(read_messages(["mail"], problems))
    assert triples(got) == [("mail/own", b"O", None)]
    assert lines == [f"mail/alias: {LINK_OUT}", f"mail/linked: {LINK_OUT}"]
    problems, lines = collector()
    got = list(read_messages(["mail"], problems, follow_links=True))
    elsewhere = os.path.realpath(tmp_path / "elsewhere")
    assert triples(got) == [
        (f"{elsewhere}/z", b"Z", None),
        (f"{elsewhere}/z", b"Z", None),
        ("mail/own", b"O", None),
    ]
    assert lines == []


def test_a_link_given_as_the_path_is_followed():
    write("elsewhere/z", b"Z")
    write("elsewhere/box/m", b"M")
    os.symlink("elsewhere/z", "named.eml")
    os.symlink("elsewhere/box", "named")
    problems, lines = collector()
    got = list(read_messages(["named.eml", "named"], problems))
    assert triples(got) == [("named.eml", b"Z", None), ("named/m", b"M", None)]
    assert lines == []


def test_a_link_into_proc_or_dev_is_never_followed():
    write("mail/own", b"O")
    os.symlink("/proc/self", "mail/p")
    os.symlink("/dev/zero", "mail/zero")
    problems, lines = collector()
    got = list(read_messages(["mail"], problems, follow_links=True))
    assert triples(got) == [("mail/own", b"O", None)]
    assert lines == [
        "mail/p: a symbolic link into /proc, never followed",
        "mail/zero: a symbolic link into /dev, never followed",
    ]


def test_a_link_put_in_place_of_a_listed_file_is_not_followed(monkeypatch):
    # the walker lists mail/x as a file; by the time it is opened it is a link out
    import nbspam.mail.messages

    write("secret", b"Subject: secret\n\nsecret words")
    write("mail/x", b"Subject: x\n\nmail")
    real = nbspam.mail.messages.folder_files

    def swapping(*args, **kwargs):
        for path, part in real(*args, **kwargs):
            os.remove(path)
            os.symlink(os.path.abspath("secret"), path)
            yield path, part

    monkeypatch.setattr(nbspam.mail.messages, "folder_files", swapping)
    problems, lines = collector()
    assert list(read_messages(["mail"], problems)) == []
    assert lines == ["mail/x: a symbolic link where a file was, not followed"]


def test_dangling_symlink_is_reported():
    write("mail/ok", b"K")
    os.symlink("nowhere", "mail/broken")
    problems, lines = collector()
    assert ids(list(read_messages(["mail"], problems))) == ["mail/ok"]
    assert lines == ["mail/broken: no such file or directory"]
    assert problems.skipped == 1


# --------------------------------------------------------------------------------------------
# Maildirs
# --------------------------------------------------------------------------------------------


def make_maildir(root: str) -> None:
    write(f"{root}/cur/1700000000.M1P1.host:2,S", b"seen")
    write(f"{root}/cur/1700000002.M3P1.host:2,RS", b"replied")
    write(f"{root}/new/1700000001.M2P1.host", b"new")
    write(f"{root}/tmp/1700000003.M4P1.host", b"half written")


def test_maildir_reads_cur_and_new_and_skips_tmp():
    make_maildir("md")
    problems, lines = collector()
    got = list(read_messages(["md"], problems))
    assert triples(got) == [
        ("md/cur/1700000000.M1P1.host:2,S", b"seen", None),
        ("md/cur/1700000002.M3P1.host:2,RS", b"replied", None),
        ("md/new/1700000001.M2P1.host", b"new", None),
    ]
    assert lines == []
    assert problems.skipped == 0


def test_maildir_below_a_plain_folder_still_skips_tmp():
    make_maildir("mail/inbox")
    write("mail/inbox/.Sent/cur/1:2,S", b"hidden Maildir++ folder")
    problems, _ = collector()
    assert ids(list(read_messages(["mail"], problems))) == [
        "mail/inbox/cur/1700000000.M1P1.host:2,S",
        "mail/inbox/cur/1700000002.M3P1.host:2,RS",
        "mail/inbox/new/1700000001.M2P1.host",
    ]


def test_tmp_is_read_in_a_folder_that_is_not_a_maildir():
    write("plain/cur/a", b"a")
    write("plain/tmp/b", b"b")
    problems, _ = collector()
    assert ids(list(read_messages(["plain"], problems))) == ["plain/cur/a", "plain/tmp/b"]


def test_maildir_without_a_label_is_an_input_error():
    make_maildir("md")
    problems, _ = collector()
    with pytest.raises(InputError, match=r"^md is a Maildir, which has no labels: give LABEL=md$"):
        list(read_labelled(["md"], problems))


def test_maildir_with_a_label():
    make_maildir("md")
    problems, _ = collector()
    got = list(read_labelled(["spam=md"], problems))
    assert [(m.id, m.label) for m in got] == [
        ("md/cur/1700000000.M1P1.host:2,S", "spam"),
        ("md/cur/1700000002.M3P1.host:2,RS", "spam"),
        ("md/new/1700000001.M2P1.host", "spam"),
    ]


def test_maildir_nested_inside_a_label_folder():
    make_maildir("data/spam")
    write("data/ham/a.eml", b"hello")
    problems, lines = collector()
    got = list(read_labelled(["data"], problems))
    assert triples(got) == [
        ("data/ham/a.eml", b"hello", "ham"),
        ("data/spam/cur/1700000000.M1P1.host:2,S", b"seen", "spam"),
        ("data/spam/cur/1700000002.M3P1.host:2,RS", b"replied", "spam"),
        ("data/spam/new/1700000001.M2P1.host", b"new", "spam"),
    ]
    assert lines == []


# --------------------------------------------------------------------------------------------
# mbox
# --------------------------------------------------------------------------------------------


def test_mbox_by_suffix_gives_each_message_its_own_bytes():
    write("box.mbox", MBOX)
    problems, lines = collector()
    got = list(read_messages(["box.mbox"], problems))
    assert ids(got) == ["box.mbox#1", "box.mbox#2", "box.mbox#3"]
    assert [m.data for m in got] == MBOX_MESSAGES
    assert all(m.label is None for m in got)
    assert lines == []


def test_mbox_by_suffix_is_read_a_message_at_a_time_and_reported_as_any_file(monkeypatch):
    import nbspam.mail.messages

    write("box.mbox", MBOX)

    def whole(path):  # an mbox of tens of thousands of messages must not be held at once
        raise AssertionError(f"{path} read whole")

    monkeypatch.setattr(nbspam.mail.messages, "read_bytes", whole)
    problems, lines = collector()
    got = list(read_messages(["box.mbox", "gone.mbox"], problems))
    assert [m.data for m in got] == MBOX_MESSAGES
    assert lines == ["gone.mbox: no such file or directory"]


def test_mbox_without_suffix_is_found_by_a_second_separator():
    write("inbox", MBOX)
    write("mail/saved", MBOX)
    problems, _ = collector()
    got = list(read_messages(["inbox", "mail"], problems))
    assert ids(got) == [
        "inbox#1",
        "inbox#2",
        "inbox#3",
        "mail/saved#1",
        "mail/saved#2",
        "mail/saved#3",
    ]
    assert [m.data for m in got] == MBOX_MESSAGES * 2


def test_single_message_starting_with_a_from_line_is_one_message():
    data = (
        b"From alice@example.com Mon Jan  1 00:00:00 2024\n"
        b"Subject: hi\n"
        b"\n"
        b"Dear friend,\n"
        b"\n"
        b"From the desk of the director: you have won.\n"
    )
    write("msg.eml", data)
    problems, lines = collector()
    assert triples(list(read_messages(["msg.eml"], problems))) == [("msg.eml", data, None)]
    assert lines == []


def test_a_body_from_line_without_a_blank_line_before_it_does_not_split():
    # mboxo writers leave such lines unquoted; the mailbox module split there
    box = (
        b"From alice@example.com Mon Jan  1 00:00:00 2024\n"
        b"Subject: one\n\nfirst line\n"
        b"From bob@example.com Tue Jan  2 00:00:00 2024 is what the log said\n"
        b"\n"
        b"From carol@example.com Wed Jan  3 00:00:00 2024\n"
        b"Subject: two\n\nsecond body\n"
    )
    write("box.mbox", box)
    problems, lines = collector()
    got = list(read_messages(["box.mbox"], problems))
    assert triples(got) == [
        (
            "box.mbox#1",
            b"Subject: one\n\nfirst line\n"
            b"From bob@example.com Tue Jan  2 00:00:00 2024 is what the log said\n",
            None,
        ),
        ("box.mbox#2", b"Subject: two\n\nsecond body\n", None),
    ]
    assert lines == []


def test_a_body_from_line_after_a_blank_line_splits_only_if_it_looks_like_a_separator():
    # without Content-Length this is ambiguous: a sender and a time of day decide
    box = (
        b"From alice@example.com Mon Jan  1 00:00:00 2024\n"
        b"Subject: one\n\nDear friend,\n\nFrom the desk of the director: you won.\n"
        b"\n"
        b"From bob@example.com Tue Jan  2 10:00:00 2024\n"
        b"Subject: two\n\nsecond body\n"
    )
    write("box.mbox", box)
    got = list(read_messages(["box.mbox"], Problems()))
    assert [m.data for m in got] == [
        b"Subject: one\n\nDear friend,\n\nFrom the desk of the director: you won.\n",
        b"Subject: two\n\nsecond body\n",
    ]


MBOXCL2_BODY = b"quoted mail follows\n\nFrom bob@example.com Tue Jan  2 10:00:00 2024\nhi\n"


@pytest.mark.parametrize("last", [False, True])
def test_a_content_length_that_lands_on_a_separator_keeps_the_body_whole(last):
    first = (
        b"Subject: one\nContent-Length: " + str(len(MBOXCL2_BODY)).encode() + b"\n\n" + MBOXCL2_BODY
    )
    second = b"Subject: two\n\nsecond body\n"
    separator = b"From alice@example.com Mon Jan  1 00:00:00 2024\n"
    box = separator + first + b"\n" + separator + second
    if last:  # the Content-Length body ends the file
        box = separator + second + b"\n" + separator + first
    write("box.mbox", box)
    problems, lines = collector()
    got = [m.data for m in read_messages(["box.mbox"], problems)]
    assert got == ([second, first] if last else [first, second])
    assert lines == []


def test_a_content_length_that_lands_elsewhere_is_not_trusted():
    first = b"Subject: one\nContent-Length: 5\n\n" + MBOXCL2_BODY
    separator = b"From alice@example.com Mon Jan  1 00:00:00 2024\n"
    write("box.mbox", separator + first)
    got = [m.data for m in read_messages(["box.mbox"], Problems())]
    assert got == [
        b"Subject: one\nContent-Length: 5\n\nquoted mail follows\n",
        b"hi\n",
    ]


def test_text_before_the_first_separator_of_an_mbox_is_kept():
    write("box.mbox", b"Subject: stray\n\nno separator\n\n" + MBOX)
    got = [m.data for m in read_messages(["box.mbox"], Problems())]
    assert got == [b"Subject: stray\n\nno separator\n", *MBOX_MESSAGES]


def test_an_mbox_message_longer_than_the_cap_is_cut_and_noted(monkeypatch):

    set_cap(monkeypatch, 1 << 20)
    long = b"Subject: long\n\n" + b"x" * (2 << 20) + b"\n"
    write("box.mbox", b"From a Mon Jan  1 00:00:00 2024\n" + long + b"\n" + MBOX)
    problems, lines = collector()
    got = [m.data for m in read_messages(["box.mbox"], problems)]
    assert got == [long[: 1 << 20], *MBOX_MESSAGES]
    assert lines == ["note: box.mbox#1: read the first 1 MiB of 2.0 MiB, the rest left out"]


def test_a_message_file_is_read_up_to_the_cap(monkeypatch):

    set_cap(monkeypatch, 3 << 20)
    data = b"Subject: big\n\n" + b"y" * (5 << 20)
    write("big.eml", data)
    reads: list[int] = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    problems, lines = collector()
    assert triples(list(read_messages(["big.eml"], problems))) == [
        ("big.eml", data[: 3 << 20], None)
    ]
    assert sum(reads) <= (3 << 20) + 1
    assert lines == ["note: big.eml: read the first 3 MiB of 5.0 MiB, the rest left out"]
    assert problems.skipped == 0


def test_binary_files_are_reported_and_mail_with_nul_bytes_is_not():
    write("mail/a.eml", b"Subject: a\n\nbody")
    write("mail/image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write("mail/nul.eml", b"From: a@b.example\nSubject: x\n\n\x00\x00 junk")
    write("mail/late-nul.txt", b"words " * 2000 + b"\x00")  # past the first 8 KiB: text
    problems, lines = collector()
    got = ids(list(read_messages(["mail"], problems)))
    assert got == ["mail/a.eml", "mail/late-nul.txt", "mail/nul.eml"]
    assert lines == ["mail/image.png: binary data, not a message"]
    assert problems.skipped == 1


def test_a_binary_labelled_file_is_reported_for_training():
    write("data/spam/a.eml", b"Subject: a\n\nbody")
    write("data/spam/b.bin", bytes(range(256)))
    problems, lines = collector()
    assert ids(list(read_labelled(["data"], problems))) == ["data/spam/a.eml"]
    assert lines == ["data/spam/b.bin: binary data, not a message"]


def test_mbox_with_a_label():
    write("box.mbox", MBOX)
    problems, _ = collector()
    got = list(read_labelled(["spam=box.mbox"], problems))
    assert triples(got) == [
        (f"box.mbox#{n}", data, "spam") for n, data in enumerate(MBOX_MESSAGES, start=1)
    ]


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

TSV = "spam\tbuy now\nno tab on this line\n\n ham \tsee you\ttomorrow\n"


def test_tsv_unlabelled_line_without_tab_is_text():
    write("rows.tsv", TSV)
    problems, lines = collector()
    got = list(read_messages(["rows.tsv"], problems))
    assert triples(got) == [
        ("rows.tsv#1", "buy now", "spam"),
        ("rows.tsv#2", "no tab on this line", None),
        ("rows.tsv#4", "see you\ttomorrow", "ham"),
    ]
    assert lines == []
    assert problems.skipped == 0


def test_tsv_labelled_line_without_label_is_skipped():
    write("rows.tsv", TSV + "\tno label before the tab\n")
    problems, lines = collector()
    got = list(read_labelled(["rows.tsv"], problems))
    assert triples(got) == [
        ("rows.tsv#1", "buy now", "spam"),
        ("rows.tsv#4", "see you\ttomorrow", "ham"),
    ]
    assert lines == [
        "rows.tsv#2: no label in this row",
        "rows.tsv#5: no label in this row",
    ]
    assert problems.skipped == 2


def test_tsv_with_crlf_line_ends():
    write("rows.tsv", b"spam\tbuy\r\nham\thi\r\n")
    problems, _ = collector()
    assert triples(list(read_labelled(["rows.tsv"], problems))) == [
        ("rows.tsv#1", "buy", "spam"),
        ("rows.tsv#2", "hi", "ham"),
    ]


def test_tsv_splits_rows_only_at_newlines():
    # Form feed, NEL and LINE SEPARATOR are text, not row ends.
    write("rows.tsv", "spam\tpage\x0cbreak \x85 and \u2028 more\nham\tnext\n")
    problems, lines = collector()
    assert triples(list(read_labelled(["rows.tsv"], problems))) == [
        ("rows.tsv#1", "page\x0cbreak \x85 and \u2028 more", "spam"),
        ("rows.tsv#2", "next", "ham"),
    ]
    assert lines == []


def test_table_that_is_not_utf8_is_reported():
    write("bad.tsv", b"spam\t\xff\n")
    problems, lines = collector()
    assert list(read_messages(["bad.tsv"], problems)) == []
    assert lines == [
        "bad.tsv: 'utf-8' codec can't decode byte 0xff in position 5: invalid start byte"
    ]
    assert problems.skipped == 1


def test_a_table_is_read_a_line_at_a_time_and_bad_bytes_end_it():
    good = "".join(f'{{"label": "ham", "text": "row {n}"}}\n' for n in range(1, 5001))
    write("rows.jsonl", good.encode() + b'{"label": "spam", "text": "\xff"}\n')
    problems, lines = collector()
    got = list(read_labelled(["rows.jsonl"], problems))
    assert len(got) == 5000 and got[-1].data == "row 5000"  # the rows before the bad bytes
    assert len(lines) == 1 and lines[0].startswith("rows.jsonl: 'utf-8' codec can't decode")


def test_a_table_row_longer_than_the_cap_is_skipped_unread(monkeypatch):

    set_cap(monkeypatch, 1 << 20)
    write("rows.tsv", "spam\tbuy\n" + "ham\t" + "x" * (3 << 20) + "\nham\tsee you\n")
    problems, lines = collector()
    got = list(read_messages(["rows.tsv"], problems))
    assert triples(got) == [("rows.tsv#1", "buy", "spam"), ("rows.tsv#3", "see you", "ham")]
    assert lines == ["rows.tsv#2: a row of 3.0 MiB, longer than 1 MiB: not read"]
    assert problems.skipped == 1


def test_a_csv_field_longer_than_128_kib_is_read():
    text = "x" * 300_000
    write("rows.csv", f'label,text\nspam,"{text}"\nham,hello\n')
    problems, lines = collector()
    got = list(read_messages(["rows.csv"], problems))
    assert triples(got) == [("rows.csv#2", text, "spam"), ("rows.csv#3", "hello", "ham")]
    assert lines == []


def test_table_line_ends_cr_lf_and_crlf_all_end_a_row():
    write("rows.tsv", b"spam\tone\rham\ttwo\r\nham\tthree\n")
    write("rows.csv", b'label,text\r\nspam,"multi\r\nline"\r\nham,plain\r\n')
    problems, lines = collector()
    assert triples(list(read_labelled(["rows.tsv", "rows.csv"], problems))) == [
        ("rows.tsv#1", "one", "spam"),
        ("rows.tsv#2", "two", "ham"),
        ("rows.tsv#3", "three", "ham"),
        ("rows.csv#2", "multi\nline", "spam"),
        ("rows.csv#4", "plain", "ham"),
    ]
    assert lines == []


CSV = (
    'label,text,id\nspam,"line one\nline two, with a comma",\nham,hello,\n\nham,"say ""hi""",h-7\n'
)


def test_csv_with_header_and_quoted_multiline_text():
    write("rows.csv", CSV, encoding="utf-8-sig")
    problems, lines = collector()
    got = list(read_labelled(["rows.csv"], problems))
    # A row is named by the line it starts on.
    assert triples(got) == [
        ("rows.csv#2", "line one\nline two, with a comma", "spam"),
        ("rows.csv#4", "hello", "ham"),
        ("h-7", 'say "hi"', "ham"),
    ]
    assert lines == []


def test_csv_columns_in_any_order_and_case():
    write("rows.csv", "ID,Text,Label\n,first,spam\nx9,second,\n")
    problems, lines = collector()
    assert triples(list(read_messages(["rows.csv"], problems))) == [
        ("rows.csv#2", "first", "spam"),
        ("x9", "second", None),
    ]
    problems, lines = collector()
    assert triples(list(read_labelled(["rows.csv"], problems))) == [("rows.csv#2", "first", "spam")]
    assert lines == ["x9: no label in this row"]


def test_csv_without_a_text_column_is_an_input_error():
    write("rows.csv", "label,body\nspam,buy now\n")
    message = r"^rows\.csv: a CSV table needs a header row with a 'text' column$"
    problems, _ = collector()
    with pytest.raises(InputError, match=message):
        list(read_labelled(["rows.csv"], problems))
    with pytest.raises(InputError, match=message):
        list(read_messages(["rows.csv"], problems))


def test_empty_csv_gives_nothing():
    write("rows.csv", "")
    problems, lines = collector()
    assert list(read_labelled(["rows.csv"], problems)) == []
    assert lines == []


JSONL_ROWS = [
    '{"text": "hello", "label": "ham"}',
    "{bad json",
    '{"label": "spam"}',
    "",
    '{"text": "win", "label": "spam", "id": "msg-42"}',
    '["text", "not an object"]',
    '{"text": "no label", "id": 7}',
    '{"text": 5, "label": "spam"}',
]
NEEDS_TEXT = "a JSON line needs an object with a 'text' string"


@pytest.mark.parametrize("suffix", ["jsonl", "ndjson"])
def test_jsonl_unlabelled(suffix):
    write(f"rows.{suffix}", "\n".join(JSONL_ROWS) + "\n")
    problems, lines = collector()
    got = list(read_messages([f"rows.{suffix}"], problems))
    assert triples(got) == [
        (f"rows.{suffix}#1", "hello", "ham"),
        ("msg-42", "win", "spam"),
        ("7", "no label", None),
    ]
    assert lines == [
        f"rows.{suffix}#2: not valid JSON: Expecting property name enclosed in double quotes",
        f"rows.{suffix}#3: {NEEDS_TEXT}",
        f"rows.{suffix}#6: {NEEDS_TEXT}",
        f"rows.{suffix}#8: {NEEDS_TEXT}",
    ]
    assert problems.skipped == 4


def test_jsonl_labelled_skips_a_row_without_label_by_its_id():
    write("rows.jsonl", "\n".join(JSONL_ROWS))
    problems, lines = collector()
    got = list(read_labelled(["rows.jsonl"], problems))
    assert triples(got) == [("rows.jsonl#1", "hello", "ham"), ("msg-42", "win", "spam")]
    assert lines == [
        "rows.jsonl#2: not valid JSON: Expecting property name enclosed in double quotes",
        f"rows.jsonl#3: {NEEDS_TEXT}",
        f"rows.jsonl#6: {NEEDS_TEXT}",
        "7: no label in this row",
        f"rows.jsonl#8: {NEEDS_TEXT}",
    ]
    assert problems.skipped == 5


def test_jsonl_text_with_unicode_line_separators_is_one_row():
    # json.dumps(ensure_ascii=False) leaves U+0085, U+2028 and U+2029 unescaped.
    rows = [{"text": "a\x85b\u2028c\u2029d", "label": "spam"}, {"text": "e", "label": "ham"}]
    write("rows.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    problems, lines = collector()
    assert triples(list(read_labelled(["rows.jsonl"], problems))) == [
        ("rows.jsonl#1", "a\x85b\u2028c\u2029d", "spam"),
        ("rows.jsonl#2", "e", "ham"),
    ]
    assert lines == []


def test_label_for_a_table_overrides_its_labels():
    write("rows.tsv", "ham\tone\ntwo\n")
    problems, lines = collector()
    assert triples(list(read_labelled(["spam=rows.tsv"], problems))) == [
        ("rows.tsv#1", "one", "spam"),
        ("rows.tsv#2", "two", "spam"),
    ]
    assert lines == []


# --------------------------------------------------------------------------------------------
# Labelled specs
# --------------------------------------------------------------------------------------------


def test_label_folder_with_stray_files_notes_them_and_does_not_read_them():
    write("data/README", b"about")
    write("data/notes.txt", b"notes")
    write("data/.hidden", b"h")
    write("data/spam/1", b"S1")
    write("data/spam/sub/2", b"S2")
    write("data/ham/1", b"H1")
    write("data/.trash/1", b"T")
    problems, lines = collector()
    got = list(read_labelled(["data"], problems))
    assert triples(got) == [
        ("data/ham/1", b"H1", "ham"),
        ("data/spam/1", b"S1", "spam"),
        ("data/spam/sub/2", b"S2", "spam"),
    ]
    assert lines == [
        "note: 2 file(s) directly in data ignored (only files in label folders count): "
        "README, notes.txt"
    ]
    assert problems.skipped == 0


def test_many_stray_files_are_named_up_to_three():
    for name in "abcd":
        write(f"data/{name}", b"x")
    write("data/spam/1", b"S")
    problems, lines = collector()
    assert ids(list(read_labelled(["data"], problems))) == ["data/spam/1"]
    assert lines == [
        "note: 4 file(s) directly in data ignored (only files in label folders count): a, b, c ..."
    ]


def test_label_for_a_folder():
    write("hamdir/x", b"X")
    write("hamdir/deeper/y", b"Y")
    problems, _ = collector()
    assert triples(list(read_labelled(["ham=hamdir"], problems))) == [
        ("hamdir/deeper/y", b"Y", "ham"),
        ("hamdir/x", b"X", "ham"),
    ]


def test_several_specs_in_order():
    write("box.mbox", MBOX)
    write("hamdir/x", b"X")
    problems, _ = collector()
    got = list(read_labelled(["ham=hamdir", "spam=box.mbox"], problems))
    assert [(m.id, m.label) for m in got] == [
        ("hamdir/x", "ham"),
        ("box.mbox#1", "spam"),
        ("box.mbox#2", "spam"),
        ("box.mbox#3", "spam"),
    ]


def test_a_spec_that_exists_with_an_equals_sign_is_a_path():
    write("a=b.tsv", "spam\ttext\n")
    problems, _ = collector()
    assert triples(list(read_labelled(["a=b.tsv"], problems))) == [("a=b.tsv#1", "text", "spam")]


def test_plain_file_without_labels_is_an_input_error():
    write("one.eml", b"Subject: x\n\nbody\n")
    write("box.mbox", MBOX)
    problems, _ = collector()
    for path in ("one.eml", "box.mbox"):
        with pytest.raises(InputError) as raised:
            list(read_labelled([path], problems))
        assert str(raised.value) == (
            f"{path} has no labels: give a folder with one subfolder per label, a table, "
            f"or LABEL={path}"
        )


def test_labelled_missing_paths_are_reported_and_skipped():
    write("box.mbox", MBOX)
    problems, lines = collector()
    got = list(read_labelled(["gone", "spam=box.mbox", "ham=gone.eml", "lost.tsv"], problems))
    assert ids(got) == ["box.mbox#1", "box.mbox#2", "box.mbox#3"]
    assert lines == [
        "gone: no such file or directory",
        "gone.eml: no such file or directory",
        "lost.tsv: no such file or directory",
    ]
    assert problems.skipped == 3


# --------------------------------------------------------------------------------------------
# Standard input
# --------------------------------------------------------------------------------------------


def test_stdin_is_one_message():
    data = b"Subject: x\n\n\xff raw bytes\nFrom the start\n"
    problems, lines = collector()
    got = list(read_messages(["-"], problems, stdin=io.BytesIO(data)))
    assert got == [Message("-", data, None)]
    assert lines == []


def test_stdin_is_read_up_to_the_cap_and_no_further(monkeypatch):

    set_cap(monkeypatch, 1 << 20)
    data = b"Subject: x\n\n" + b"z" * (2 << 20)
    stream = io.BytesIO(data)
    problems, lines = collector()
    got = list(read_messages(["-"], problems, stdin=stream))
    assert triples(got) == [("-", data[: 1 << 20], None)]
    assert stream.tell() == (1 << 20) + 1  # the rest is never read
    assert lines == ["note: -: read the first 1 MiB of a longer message, the rest left out"]


def test_binary_stdin_is_reported():
    problems, lines = collector()
    got = list(read_messages(["-"], problems, stdin=io.BytesIO(b"\x00\x01\x02" * 10)))
    assert got == []
    assert lines == ["-: binary data, not a message"]
    assert problems.skipped == 1


def test_stdin_among_files_keeps_its_place():
    write("a", b"A")
    write("b", b"B")
    problems, _ = collector()
    got = list(read_messages(["a", "-", "b"], problems, stdin=io.BytesIO(b"IN")))
    assert triples(got) == [("a", b"A", None), ("-", b"IN", None), ("b", b"B", None)]


def test_labelled_stdin_reads_the_process_standard_input(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"from the pipe")))
    problems, _ = collector()
    assert triples(list(read_labelled(["spam=-"], problems))) == [("-", b"from the pipe", "spam")]


def test_a_maildir_gives_only_cur_and_new(tmp_path):
    box = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp", "Sent"):
        (box / sub).mkdir(parents=True)
    (box / "new" / "1.host").write_bytes(b"Subject: a\n\nx")
    (box / "tmp" / "2.host").write_bytes(b"Subject: half-delivered\n\nx")
    (box / "Sent" / "3.host").write_bytes(b"Subject: sent\n\nx")
    (box / "dovecot-uidlist").write_bytes(b"3 V1 N42\n")
    problems = Problems()
    ids = [m.id for m in read_messages([str(box)], problems)]
    assert ids == [str(box / "new" / "1.host")] and problems.skipped == 0


def test_digest_ignores_own_headers_with_crlf_too():
    from nbspam.mail.headers import message_digest

    plain = b"Subject: a\r\n\r\nX-Nbspam-Status: spam\r\nbody\r\n"
    filtered = b"X-Nbspam-Status: ham; log_odds=-3\r\n" + plain
    assert message_digest(filtered) == message_digest(plain)
    assert message_digest(plain) != message_digest(plain.replace(b"X-Nbspam-Status: spam\r\n", b""))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"\n", b"\r", b"\r\n", b"a", b": ", b"\n\n", b"\r\n\r\n"])))
def test_header_end_is_the_first_blank_line_of_either_kind(parts):
    from nbspam.mail.headers import header_end as _header_end

    data = b"".join(parts)
    found = [i for i in (data.find(b"\n\n"), data.find(b"\r\n\r\n")) if i >= 0]
    assert _header_end(data) == min(found, default=-1)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "\t", "\n", "\r", "\r\n", '"', ",", "\x85", "\u2028", "é"])),
    st.booleans(),
)
def test_table_lines_are_those_of_the_whole_text_in_universal_newlines(parts, bom):
    import io

    from nbspam.mail.table_rows import text_lines as _text_lines

    text = "".join(parts)
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    # what reading the whole file in text mode gives: CRLF and CR become LF, the BOM goes
    whole = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig").read()
    *rows, last = whole.split("\n")
    assert list(_text_lines(io.BytesIO(data), "t.tsv", Problems())) == [r + "\n" for r in rows] + (
        [last] if last else []
    )


def test_links_resolve_to_what_realpath_says_whatever_their_shape(tmp_path):
    # _Links.realpath remembers the real path of the folders links lead into; every shape
    # of link gives os.path.realpath's answer: relative and absolute, through a linked
    # folder, with .. after a link, a chain, a dangling one, one to a folder, a loop
    from nbspam.mail.messages import _Links

    write("real/deep/f", b"F")
    write("real/g", b"G")
    os.symlink("real/deep", "via")  # a linked folder
    os.makedirs("links/sub")
    shapes = {
        "rel": "../real/deep/f",
        "abs": str(tmp_path / "real/g"),
        "through": "../via/f",
        "dotdot": "../via/../g",  # .. after a link: real/g, not ./g
        "dotdot_end": "../via/..",
        "slash": "../real/deep/",
        "chain": "rel",
        "dangling": "../real/nothing",
        "folder": "../real",
        "loop": "loop",
        "sub/up": "../../real/g",
    }
    for name, to in shapes.items():
        os.symlink(to, f"links/{name}")
    os.symlink("sub", "links/subdir")
    shapes["subdir/up"] = ""
    links = _Links("links", follow=True)
    for name in shapes:
        for _ in range(2):  # the second time from what was remembered
            assert links.realpath(f"links/{name}") == os.path.realpath(f"links/{name}"), name
    assert links.realpath("links") == os.path.realpath("links")  # not a link at all


def test_a_folder_of_links_into_another_folder_costs_one_lstat_a_link(monkeypatch):
    # A corpus linked file by file (as the benchmark and bogofilter's users link it): each
    # link is resolved by a readlink, an lstat and a stat, where os.path.realpath took an lstat of
    # every part of both paths (9 a link here, more on a deeper tree)
    for k in range(20):
        write(f"a/b/c/d/corpus/{k:02d}", b"M%d" % k)
    os.makedirs("linked")
    for k in range(20):
        os.symlink(os.path.abspath(f"a/b/c/d/corpus/{k:02d}"), f"linked/{k:02d}")
    calls = []
    lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda *a, **k: calls.append(a) or lstat(*a, **k))
    problems, lines = collector()
    got = list(read_messages(["linked"], problems, follow_links=True))
    assert [m.data for m in got] == [b"M%d" % k for k in range(20)]
    assert lines == []
    assert len(calls) <= 20 + 10  # one a link, and the real path of the corpus folder once


@pytest.mark.parametrize("follow", [False, True])
def test_a_sub_folder_swapped_for_a_link_after_listing_is_judged_as_a_link(
    tmp_path, monkeypatch, follow
):
    # A neighbour swaps box/sub for a link out of the folder between the listing of box
    # (which saw a folder) and the walk entering box/sub: the walk entered it through the
    # link and read the file outside. It is now judged as the link it is: reported as any
    # link out of the folder, followed only with follow_links.
    write("box/a", b"A")
    write("box/sub/b", b"B")
    write("elsewhere/secret", b"SECRET")
    scandir = os.scandir

    class Listed(list):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def listing_then_swap(folder):
        with scandir(folder) as entries:
            found = Listed(entries)
        for entry in found:  # what the listing saw, kept by each entry
            entry.is_dir(), entry.is_file(), entry.is_symlink()
        if not os.path.islink("box/sub"):
            os.rename("box/sub", "box/sub.old")
            os.symlink(str(tmp_path / "elsewhere"), "box/sub")
        return found

    monkeypatch.setattr(os, "scandir", listing_then_swap)
    problems, lines = collector()
    got = [(m.id, m.data) for m in read_messages(["box"], problems, follow_links=follow)]
    if follow:
        secret = os.path.join(os.path.realpath(tmp_path / "elsewhere"), "secret")
        assert (got, lines) == ([("box/a", b"A"), (secret, b"SECRET")], [])
    else:
        assert (got, lines) == ([("box/a", b"A")], [f"box/sub: {LINK_OUT}"])


def test_a_folder_swapped_for_a_link_out_while_reading_is_not_followed(tmp_path):
    # The real path of the folder links lead into is remembered; a neighbour who swaps that
    # folder for a link out of the folder given, after its first link was followed, must
    # not have the next link followed out through it (os.path.realpath refused it)
    write("box/data/a", b"A")
    write("box/data/b", b"B")
    write("elsewhere/b", b"SECRET")
    os.makedirs("box/links")
    os.symlink("../data/a", "box/links/a")
    os.symlink("../data/b", "box/links/b")
    problems, lines = collector()
    read = read_messages(["box"], problems)
    got = [next(read) for _ in range(3)]  # box/data/a and b, then box/links/a
    os.rename("box/data", "box/data.old")
    os.symlink(str(tmp_path / "elsewhere"), "box/data")
    got += list(read)
    assert [(m.id, m.data) for m in got] == [
        ("box/data/a", b"A"),
        ("box/data/b", b"B"),
        ("box/data/a", b"A"),
    ]
    assert lines == [f"box/links/b: {LINK_OUT}"]


def test_a_json_text_holding_a_lone_surrogate_reads_it_as_a_replacement_character():
    from tests.helpers import cli_run

    # JSON escapes what no UTF-8 holds: its digest failed, and training stopped on an
    # internal error (a term holding it could not be written either)
    rows = ['{"label": "spam", "text": "buy \\ud800 now"}', '{"label": "ham", "text": "hi \\udc80"}']
    write("rows.jsonl", "\n".join(rows) + "\n")
    problems, lines = collector()
    got = list(read_labelled(["rows.jsonl"], problems))
    assert triples(got) == [("rows.jsonl#1", "buy \ufffd now", "spam"), ("rows.jsonl#2", "hi \ufffd", "ham")]
    assert lines == []
    result = cli_run("train", "rows.jsonl", "-o", "m.nbm", "--no-calibrate", "-q")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


def test_a_message_read_from_a_folder_is_named_by_a_plain_str(tmp_path):
    # the path a folder's listing gives knows its folder (a str subclass with a dict, some
    # 300 bytes): kept as each message's id, scoring the SMS texts in one process took
    # 2.4 MB more, past make bench's bound on scoring memory
    for name in ("a.eml", "b.eml"):
        (tmp_path / name).write_bytes(b"Subject: hi\n\nhello there\n")
    messages = list(read_messages([str(tmp_path)], Problems()))
    assert len(messages) == 2 and {type(m.id) for m in messages} == {str}
