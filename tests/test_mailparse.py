"""Tests of nbspam.mail.mailparse: MIME decoding, charsets, HTML text and robustness on real mail."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbspam.mail.mailparse import ParsedMail, looks_like_mail, parse_mail

SPAMASSASSIN = Path(__file__).resolve().parents[1].parent / "shared" / "corpora" / "spamassassin"

PLAIN = b"""\
From sender@example.com  Mon Sep  2 12:00:00 2002
Return-Path: <sender@example.com>
Received: from mail.example.com (mail.example.com [192.0.2.1])
\tby mx.example.org with SMTP; Mon, 2 Sep 2002 12:00:00 +0100
From: Sender <sender@example.com>
To: you@example.org
Subject: Lunch
 tomorrow?
Message-ID: <1@example.com>

Shall we meet at noon?
"""

ALTERNATIVE = b"""\
From: shop@example.com
Subject: Offer
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="ALT"

This is a multi-part message in MIME format.

--ALT
Content-Type: text/plain; charset=us-ascii

Plain version of the offer.
--ALT
Content-Type: text/html; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

<html><head><title>Big Offer</title><style>p {color: red}</style></head>
<body><p>HTML <b>version</b> for caf=E9 lovers</p>
<a href=3D"http://shop.example.com/buy?a=3D1&amp;b=3D2">Buy</a></body></html>
--ALT--
"""

WITH_ATTACHMENTS = b"""\
From: a@example.com
Subject: Files
Content-Type: multipart/mixed; boundary="MIX"

--MIX
Content-Type: text/plain

See the attached files.
--MIX
Content-Type: application/pdf; name="report.PDF"
Content-Transfer-Encoding: base64
Content-Disposition: attachment; filename="report.PDF"

JVBERi0xLjQKc2VjcmV0IHBkZiB0ZXh0Cg==
--MIX
Content-Type: text/plain; charset=us-ascii
Content-Disposition: attachment; filename="notes.txt"

attached notes must not reach the body
--MIX
Content-Type: image/gif
Content-Transfer-Encoding: base64

R0lGODlhAQABAAAAACw=
--MIX
Content-Type: application/octet-stream
Content-Disposition: attachment; filename*=utf-8''r%C3%A9sum%C3%A9.DOC

AAAA
--MIX--
"""

FORWARDED = b"""\
From: forwarder@example.com
Subject: Fwd: news
Content-Type: multipart/mixed; boundary="OUTER"

--OUTER
Content-Type: text/plain

Have a look at this.
--OUTER
Content-Type: message/rfc822

From: original@example.com
Subject: Inner news
Content-Type: text/html

<p>Inner <i>HTML</i> text</p>
--OUTER--
"""

NO_CLOSING_BOUNDARY = b"""\
From: a@example.com
Subject: Cut off
Content-Type: multipart/mixed; boundary="CUT"

--CUT
Content-Type: text/plain

The first part survives.
--CUT
Content-Type: text/plain

And so does the second
"""


def mail(headers: bytes, body: bytes) -> bytes:
    """A message from a header block and a body, joined by the blank line."""
    return headers.strip(b"\n") + b"\n\n" + body


def check_types(parsed: ParsedMail) -> None:
    """Assert that every field has the promised type."""
    assert isinstance(parsed, ParsedMail)
    assert isinstance(parsed.subject, str)
    assert isinstance(parsed.body, str)
    assert isinstance(parsed.truncated, bool)
    assert isinstance(parsed.defects, int) and parsed.defects >= 0
    for name, value in parsed.headers:
        assert isinstance(name, str) and name == name.lower()
        assert isinstance(value, str)
    assert all(isinstance(link, str) for link in parsed.links)
    for ctype, ext in parsed.attachments:
        assert isinstance(ctype, str) and isinstance(ext, str)


# --- headers and plain bodies -------------------------------------------------------------------


def test_plain_message_headers_subject_and_body():
    parsed = parse_mail(PLAIN)
    names = [name for name, _ in parsed.headers]
    assert names == ["return-path", "received", "from", "to", "subject", "message-id"]
    assert dict(parsed.headers)["received"].startswith("from mail.example.com")
    assert "\n" not in dict(parsed.headers)["received"]
    assert parsed.subject == "Lunch tomorrow?"
    assert parsed.body == "Shall we meet at noon?\n"
    assert (parsed.links, parsed.attachments, parsed.truncated, parsed.defects) == (
        (),
        (),
        False,
        0,
    )


def test_mbox_from_line_is_skipped():
    parsed = parse_mail(PLAIN)
    assert parsed.headers[0] == ("return-path", "<sender@example.com>")
    assert "Mon Sep" not in parsed.body


def test_missing_content_type_counts_as_text_plain():
    parsed = parse_mail(b"From: a@example.com\nSubject: hi\n\n<b>not html</b> just text\n")
    assert parsed.body == "<b>not html</b> just text\n"
    assert parsed.attachments == ()


def test_crlf_line_ends_become_newlines():
    parsed = parse_mail(b"Subject: crlf\r\n\r\nline one\r\nline two\r\n")
    assert parsed.subject == "crlf"
    assert parsed.body == "line one\nline two\n"


def test_base64_body():
    encoded = base64.encodebytes("Grüße aus Köln\n".encode()).decode()
    raw = mail(
        b"Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64",
        encoded.encode(),
    )
    assert parse_mail(raw).body == "Grüße aus Köln\n"


def test_quoted_printable_body_with_soft_breaks():
    raw = mail(
        b"Content-Type: text/plain; charset=iso-8859-1\n"
        b"Content-Transfer-Encoding: Quoted-Printable",
        b"Caf=E9 cr=E8me br=FBl=\n=E9e and more =3D fun\n",
    )
    assert parse_mail(raw).body == "Café crème brûlée and more = fun\n"


def test_broken_base64_does_not_crash():
    raw = mail(
        b"Content-Type: text/plain\nContent-Transfer-Encoding: base64",
        b"SGVsbG8gd29y!!bGQ*\n===\n",
    )
    parsed = parse_mail(raw)
    check_types(parsed)
    assert parsed.headers  # parsed as a message, not through the fallback


# --- charsets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        (b"text/plain; charset=ISO-8859-1", b"na\xefve fa\xe7ade", "naïve façade"),
        (b"text/plain; charset=utf-8", "naïve façade ✓".encode(), "naïve façade ✓"),
        (b'text/plain; charset="us-ascii"', b"\x93quoted\x94 \x80 5", "\u201cquoted\u201d € 5"),
        (b"text/plain; charset=foo", "ünïcode".encode(), "ünïcode"),
        (b'text/plain; charset="unknown-8bit"', b"caf\xe9", "café"),
        (b"text/plain; charset=base64", b"plain", "plain"),
        (b"text/plain", b"caf\xe9 \x81", "café \x81"),  # not cp1252 either: latin-1
        (b"text/plain; charset=iso-8859-1", b"\x93smart\x94", "\u201csmart\u201d"),
    ],
)
def test_charset_fallback_chain(content_type, body, expected):
    parsed = parse_mail(mail(b"Content-Type: " + content_type, body))
    assert parsed.body == expected


def test_rfc2047_subjects():
    raw = mail(
        b"Subject: =?utf-8?B?R3LDvMOfZSDinJM=?=\n"
        b"X-Other: Re: =?iso-8859-1?Q?Caf=E9_cr=E8me?= =?iso-8859-1?Q?_br=FBl=E9e?= now",
        b"body\n",
    )
    parsed = parse_mail(raw)
    assert parsed.subject == "Grüße ✓"
    assert dict(parsed.headers)["x-other"] == "Re: Café crème brûlée now"


def test_rfc2047_bad_charset_and_8bit_header_bytes():
    raw = mail(
        b"Subject: =?x-bogus?Q?caf=C3=A9?= and =?utf-8?B?broken!?=\n"
        b"From: J\xc3\xbcrgen <j@example.com>\n"
        b"To: Andr\xe9 <a@example.com>",
        b"body\n",
    )
    parsed = parse_mail(raw)
    headers = dict(parsed.headers)
    assert parsed.subject.startswith("café and ")  # a bad word spoils only itself
    assert headers["from"] == "Jürgen <j@example.com>"
    assert headers["to"] == "André <a@example.com>"
    assert parse_mail(mail(b"Subject: =?x-bogus?Q?caf=C3=A9?=", b"")).subject == "café"


# --- MIME structure ---------------------------------------------------------------------------


def test_multipart_alternative_gives_both_texts_and_links():
    parsed = parse_mail(ALTERNATIVE)
    assert parsed.subject == "Offer"
    assert parsed.body.split("\n") == [
        "Plain version of the offer.",
        "Big Offer",
        "HTML version for café lovers",
        "Buy",
    ]
    assert "color: red" not in parsed.body
    assert parsed.links == ("http://shop.example.com/buy?a=1&b=2",)
    assert parsed.attachments == ()
    assert parsed.defects == 0


def test_attachments_are_recorded_and_kept_out_of_the_body():
    parsed = parse_mail(WITH_ATTACHMENTS)
    assert parsed.body == "See the attached files."
    assert parsed.attachments == (
        ("application/pdf", "pdf"),
        ("text/plain", "txt"),
        ("image/gif", ""),
        ("application/octet-stream", "doc"),
    )


def test_inline_text_with_a_file_name_is_body_and_attachment():
    raw = mail(
        b"Content-Type: text/plain; charset=utf-8\n"
        b'Content-Disposition: inline; filename="=?utf-8?q?r=C3=A9sum=C3=A9.TXT?="',
        b"inline text\n",
    )
    parsed = parse_mail(raw)
    assert parsed.body == "inline text\n"
    assert parsed.attachments == (("text/plain", "txt"),)


def test_nested_message_text_counts_as_body():
    parsed = parse_mail(FORWARDED)
    assert parsed.body == "Have a look at this.\nInner HTML text"
    assert parsed.subject == "Fwd: news"
    assert [name for name, _ in parsed.headers] == ["from", "subject", "content-type"]


def test_missing_closing_boundary():
    parsed = parse_mail(NO_CLOSING_BOUNDARY)
    assert "The first part survives." in parsed.body
    assert "And so does the second" in parsed.body
    assert parsed.defects >= 1


def test_multipart_without_boundary_is_read_as_text():
    raw = mail(b"Content-Type: multipart/mixed", b"--x\nContent-Type: text/plain\n\nhello\n")
    parsed = parse_mail(raw)
    assert "hello" in parsed.body
    assert parsed.defects >= 1


def test_empty_input():
    assert parse_mail(b"") == ParsedMail((), "", "", (), (), False, 0)


@pytest.mark.parametrize(
    "data",
    [
        bytes(range(256)) * 4,
        b"\xff\xfe\x00\x00garbage\x00\x00",
        b"From \n",
        b"Subject: =?utf-8?",
        b"Content-Type: text/plain; charset=\x00\n\n\x80",
        b'Content-Type: text/plain; charset="utf-16"\n\nodd',
        b"Content-Type: multipart/mixed; boundary=\n\n--\n--\n",
        b"Content-Type: message/rfc822\n\n",
        b"Content-Type: text/plain; name*0*=bogus''%FF; name*1=x\n\nbody",
    ],
)
def test_junk_never_raises(data):
    check_types(parse_mail(data))


# --- max_body_chars ---------------------------------------------------------------------------


def test_max_body_chars_cuts_and_flags():
    raw = mail(b"Subject: long", b"abcdefghij" * 10)
    parsed = parse_mail(raw, max_body_chars=25)
    assert parsed.body == "abcdefghij" * 2 + "abcde"
    assert parsed.truncated
    assert not parse_mail(raw, max_body_chars=1000).truncated
    assert not parse_mail(raw).truncated


def test_max_body_chars_skips_later_parts():
    parsed = parse_mail(ALTERNATIVE, max_body_chars=10)
    assert parsed.body == "Plain vers"
    assert parsed.truncated
    assert parsed.links == ()  # the HTML part after the cap is not converted


def test_max_body_chars_on_a_huge_message_keeps_headers_and_charset():
    body = ("Grüße " * 1_000_000).encode()
    raw = mail(
        b"From: big@example.com\nSubject: huge\nContent-Type: text/plain; charset=utf-8", body
    )
    parsed = parse_mail(raw, max_body_chars=1000)
    assert parsed.subject == "huge"
    assert parsed.body == ("Grüße " * 200)[:1000]
    assert parsed.truncated


def test_html_past_the_characters_parsed_is_still_read():
    from nbspam.mail.htmltext import MAX_HTML_CHARS

    html = b"<p>word</p>" * (MAX_HTML_CHARS // 11 + 1) + b"<p>late &amp; last</p>"
    parsed = parse_mail(mail(b"Subject: long html\nContent-Type: text/html", html))
    assert not parsed.truncated and parsed.body.split("\n")[-2:] == ["word", "late & last"]


def test_the_html_parts_of_a_message_share_the_characters_parsed():
    """Past the characters Lexbor parses, a later HTML part is still read (its markup
    stripped), without its links."""
    from nbspam.mail.htmltext import MAX_HTML_CHARS

    first = b"<p>word</p>" * (MAX_HTML_CHARS // 11 - 4) + b'<a href="http://one.example/">x</a>'
    second = b'<p>late &amp; last</p><a href="http://two.example/">y</a>'
    parts = b"".join(b"--b\nContent-Type: text/html\n\n" + html + b"\n" for html in (first, second))
    parsed = parse_mail(
        mail(b"Content-Type: multipart/mixed; boundary=b", parts + b"--b--\n"),
        max_body_chars=200_000,
    )
    assert parsed.links == ("http://one.example/",)
    assert "late & last" in parsed.body.split("\n") and not parsed.truncated


# --- looks_like_mail --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (PLAIN, True),
        (ALTERNATIVE, True),
        (b"Received: from x\n\tby y\nSubject: hi\n\nbody", True),
        (b"X-Mailer: thing\n\nbody", True),
        (b"Foo: 1\nBar: 2\n\nbody", True),
        (b"Free entry in 2 a wkly comp to win FA Cup final tkts 21st May 2005.", False),
        (b"Note: the meeting moved to Friday.\nPlease tell the others.\n", False),
        (b"Hello: how are you\nI am fine, thanks.", False),
        (b"http://example.com/win\nhttp://example.com/now\n", False),
        (b"URGENT! You have won a 1 week FREE membership", False),
        (b"", False),
        (b"\xff\xfe\x00garbage", False),
    ],
)
def test_looks_like_mail(data, expected):
    assert looks_like_mail(data) is expected


# --- properties -------------------------------------------------------------------------------

SAMPLES = [PLAIN, ALTERNATIVE, WITH_ATTACHMENTS, FORWARDED, NO_CLOSING_BOUNDARY]
MUTATION = st.tuples(
    st.sampled_from(["delete", "insert", "flip"]),
    st.integers(min_value=0, max_value=10_000),
    st.binary(min_size=1, max_size=12)
    | st.sampled_from([b"\n", b"\r", b"--", b"=?", b"?=", b"<!--", b'"', b"\x80", b"--MIX\n"]),
)


def mutate(data: bytes, mutations: list[tuple[str, int, bytes]]) -> bytes:
    """Delete, insert or overwrite bytes at the given positions (taken modulo the length)."""
    buffer = bytearray(data)
    for kind, position, chunk in mutations:
        at = position % (len(buffer) + 1)
        if kind == "delete":
            del buffer[at : at + len(chunk)]
        elif kind == "insert":
            buffer[at:at] = chunk
        else:
            buffer[at : at + len(chunk)] = chunk
    return bytes(buffer)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.none() | st.integers(min_value=0, max_value=500))
def test_arbitrary_bytes_never_raise(data, limit):
    parsed = parse_mail(data, max_body_chars=limit)
    check_types(parsed)
    if limit is not None:
        assert len(parsed.body) <= limit
    assert isinstance(looks_like_mail(data), bool)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(SAMPLES),
    st.lists(MUTATION, min_size=1, max_size=12),
    st.none() | st.integers(min_value=0, max_value=200),
)
def test_mutated_messages_never_raise(sample, mutations, limit):
    parsed = parse_mail(mutate(sample, mutations), max_body_chars=limit)
    check_types(parsed)
    if limit is not None:
        assert len(parsed.body) <= limit


# --- the SpamAssassin corpus ------------------------------------------------------------------


@pytest.mark.corpus
def test_spamassassin_corpus_parses():
    if not SPAMASSASSIN.is_dir():
        pytest.skip(f"SpamAssassin corpus not found at {SPAMASSASSIN}")
    paths = sorted(p for label in ("ham", "spam") for p in (SPAMASSASSIN / label).iterdir())
    assert len(paths) > 6000
    with_body = 0
    for path in paths:
        data = path.read_bytes()
        parsed = parse_mail(data)
        assert parsed.headers, path.name  # every corpus file is a real message
        assert looks_like_mail(data), path.name
        with_body += bool(parsed.body.strip())
    assert with_body > 0.95 * len(paths)
