"""Hostile mail: bounded parsing time whatever the bytes, and no surprise on odd encodings."""

from __future__ import annotations

import base64
import re
import time

import pytest
from click.testing import CliRunner

from nbspam.cli.commands import cli
from nbspam.core.settings import build_settings
from nbspam.mail.mailparse import parse_mail
from nbspam.text.features import Analyzer

MB = 1 << 20
SURROGATE = re.compile("[\ud800-\udfff]")
# A hang guard, not a speed test: each of these took the old parser many seconds.
LIMIT = 5.0


def repeat(unit: bytes, size: int) -> bytes:
    return unit * (size // len(unit))


WORST_CASES = {
    # semicolons inside an open quote: the parameter splitter was quadratic
    "quoted-semicolons": lambda: b'Content-Type: text/plain; a="' + b";" * (4 * MB) + b"\n\nhi",
    # many parameters where the email package reads them (a bare CR, here in a folded header, sends the mail to it)
    "many-parameters": lambda: (
        b"X: a\r b\nContent-Type: text/plain" + repeat(b";a=b", 4 * MB) + b"\n\nhi"
    ),
    "many-multipart-parameters": lambda: (
        b"X: a\r b\nContent-Type: multipart/mixed" + repeat(b";a=b", 4 * MB) + b"\n\nhi"
    ),
    # deep nesting: the email package checks every line against every open boundary
    "deep-nesting": lambda: (
        b"".join(
            b"Content-Type: multipart/mixed; boundary=%d\n\n--%d\n" % (i, i) for i in range(900)
        )
        + repeat(b"\nhi\n", 4 * MB)
    ),
    "deep-messages": lambda: repeat(b"Content-Type: message/rfc822\n\n", 4 * MB),
    # tiny parts and no closing boundary: all of it for the email package
    "many-parts": lambda: (
        b"Content-Type: multipart/mixed; boundary=b\n\n" + repeat(b"--b\n\nhi\n", 8 * MB)
    ),
    "many-closed-parts": lambda: (
        b"Content-Type: multipart/mixed; boundary=b\n\n"
        + repeat(b"--b\n\nhi\n", 8 * MB)
        + b"--b--\n"
    ),
    # a new charset label in every encoded word
    "charset-labels": lambda: (
        b"Subject: " + b"".join(b"=?x%d?q?a?= " % i for i in range(400_000)) + b"\n\nhi"
    ),
    # many HTML parts, each as deep as Lexbor reads (and all within the bytes parsed, so
    # that the closing boundary is there): the parts share its characters
    "many-html-parts": lambda: (
        b"Content-Type: multipart/mixed; boundary=b\n\n"
        + b"".join(b"--b\nContent-Type: text/html\n\n" + b"<dl>" * 8000 + b"\n" for _ in range(96))
        + b"--b--\n"
    ),
    # a header block without end
    "many-headers": lambda: b"".join(b"X-H%d: v\n" % i for i in range(600_000)) + b"\nhi",
    "long-header": lambda: b"Subject: " + repeat(b"ab ", 8 * MB) + b"\n\nhi",
}


@pytest.mark.parametrize("name", sorted(WORST_CASES))
def test_hostile_mail_is_parsed_in_bounded_time(name):
    data = WORST_CASES[name]()
    assert len(data) >= MB
    analyzer = Analyzer(build_settings({}).tokenizer)
    start = time.perf_counter()
    tokens = analyzer.tokens(data)
    assert time.perf_counter() - start < LIMIT
    assert tokens
    # read as mail, not as text after the email package failed
    assert parse_mail(data, max_body_chars=200_000).headers


def test_header_caps():
    data = b"".join(b"X-H%d: v\n" % i for i in range(10_000)) + b"Subject: late\n\nbody words"
    parsed = parse_mail(data, max_body_chars=200_000)
    assert len(parsed.headers) == 1000
    assert parsed.headers[999] == ("x-h999", "v")
    # the block was ended at 64 KB: the rest of it is read as body
    assert "X-H9999: v" in parsed.body and "body words" in parsed.body
    long = parse_mail(b"Subject: " + b"word " * 10_000 + b"\n\nhi")
    assert len(long.subject) == 16 * 1024 and long.body == "hi"


def test_encoded_words_with_unknown_charsets_stay_cheap():
    words = b"".join(b"=?x-unknown-%d?q?a?= " % i for i in range(2000))
    parsed = parse_mail(b"Subject: " + words + b"\n\nhi")
    # the first thousand are decoded (unknown charsets count as missing), the rest kept
    assert parsed.subject.startswith("a" * 1000 + " =?x-unknown-1000?q?a?= ")


UTF7_BODY = b"Subject: x\nContent-Type: text/plain; charset=utf-7\n\nhttp://x+2AA-y.com/\n"
UTF7_SUBJECT = b"Subject: =?utf-7?q?http://x+2AA-y.com/?=\n\nhello"


@pytest.mark.parametrize(
    "data",
    [
        UTF7_BODY,
        UTF7_SUBJECT,
        UTF7_BODY + b"\rbare CR: the email package reads it",
    ],
)
def test_utf7_lone_surrogates_become_replacement_characters(data):
    parsed = parse_mail(data, max_body_chars=200_000)
    texts = [parsed.subject, parsed.body, *parsed.links]
    texts += [text for pair in parsed.headers + parsed.attachments for text in pair]
    assert not any(SURROGATE.search(text) for text in texts)
    assert "\ufffd" in parsed.subject + parsed.body + "".join(map(str, parsed.attachments))
    tokens = Analyzer(build_settings({}).tokenizer).tokens(data)
    assert not any(SURROGATE.search(token) for token in tokens)


def test_utf7_message_is_predicted_from_stdin(tmp_path):
    runner = CliRunner()
    for label, text in (("ham", "meeting notes for the team"), ("spam", "free prize now")):
        (tmp_path / label).mkdir()
        (tmp_path / label / "0.txt").write_text(text)
    model = tmp_path / "m.nbm"
    trained = runner.invoke(cli, ["train", str(tmp_path), "-o", str(model), "--min-count", "1"])
    assert trained.exit_code == 0, trained.output
    for data in (UTF7_BODY, UTF7_SUBJECT):
        result = runner.invoke(cli, ["predict", "-m", str(model)], input=data)
        assert result.exit_code == 0, result.output
        assert result.exception is None


BASE64_BODY = base64.encodebytes(b"cheap pills buy now " * 20)


@pytest.mark.parametrize(
    "extra", [b"; a*=x; a*0=y", b"; a*" + b"9" * 5000 + b"=y"], ids=["mixed-sections", "digits"]
)
@pytest.mark.parametrize("ctype", [b"text/plain", b"multipart/mixed; boundary=b"])
def test_parameters_the_email_package_fails_on_count_as_none(extra, ctype):
    data = (
        b"Subject: buy now\nFrom: a@b.example\nContent-Type: "
        + ctype
        + extra
        + b"\nContent-Transfer-Encoding: base64\n\n"
        + BASE64_BODY
    )
    parsed = parse_mail(data, max_body_chars=200_000)
    assert parsed.subject == "buy now"
    assert [name for name, _ in parsed.headers][:2] == ["subject", "from"]
    if ctype == b"text/plain":
        assert parsed.body.startswith("cheap pills buy now")
