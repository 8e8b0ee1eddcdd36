"""The Analyzer: a mail message to body words and tagged tokens, each kind switchable."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbspam.core.settings import TokenizerConfig
from nbspam.text.features import Analyzer, _hostname, _without_queue_id, glob_matcher

MAIL = b"""\
Received: from relay.example.net by mx.example.org with ESMTP id 4F2A1B3C;
 Mon, 23 Sep 2002 12:34:56 +0100
Received: from client by relay.example.net (ID 77xQ9)
From: "Ann Lee" <Ann.Lee@Example.COM>
To: undisclosed-recipients:;
Cc: bob@example.org (Bob Stone), carol@example.org
Return-Path: <>
Delivered-To: ann@example.org
Message-ID: <abc.123@Mail.Example.COM>
X-Mailer: Foo Mail 2.0
Subject: Cheap offer
MIME-Version: 1.0
Content-Type: text/plain; charset=us-ascii

Buy now at http://shop.example.co.uk/x and www.deals.example.com today
"""


def counts(data: bytes, **settings) -> Counter:
    """The tokens of ``data``, word pairs left out unless asked (they have their own test)."""
    return Counter(Analyzer(TokenizerConfig(**{"word_pairs": "none", **settings})).tokens(data))


def test_every_kind_of_token_of_a_message():
    expected = Counter(
        # body words, then its addresses
        ["buy", "today", "http://shop.example.co.uk/x", "www.deals.example.com"]
        + ["subject:cheap", "subject:offer"]
        + ["url:shop.example.co.uk", "url:co.uk", "url:www.deals.example.com"]
        + ["url:example.com"]
        # addresses: display words, then address and domain; none when empty
        + ["from:ann", "from:lee", "from:addr:ann.lee@example.com", "from:domain:example.com"]
        + ["to:undisclosed-recipients"]
        + ["cc:bob", "cc:stone", "cc:addr:bob@example.org", "cc:domain:example.org"]
        + ["cc:addr:carol@example.org", "cc:domain:example.org"]
        + ["return-path:none"]
        # presence of each header not ignored (Delivered-To is)
        + ["header:received"] * 2
        + ["header:" + h for h in ("from", "to", "cc", "return-path", "message-id")]
        + ["header:" + h for h in ("x-mailer", "subject", "mime-version", "content-type")]
        # values of the value headers; both Received headers, as one text
        # (without the date after the last ";" and the queue id)
        + ["received:" + w for w in "relay.example.net mx.example.org with esmtp client".split()]
        + ["received:" + w for w in "relay.example.net".split()]
        + ["message-id:@mail.example.com"]
        + ["x-mailer:foo", "x-mailer:mail", "x-mailer:2.0"]
        + ["mime-version:1.0", "content-type:text", "content-type:plain"]
        + ["content-type:charset", "content-type:us-ascii"]
    )
    assert counts(MAIL, stop_words=("at", "and", "now", "from", "by")) == expected


def test_each_kind_can_be_switched_off():
    stop = ("at", "and", "now", "from", "by")
    full = counts(MAIL, stop_words=stop)
    off = {
        "subject_tokens": lambda t: t.startswith("subject:"),
        "url_tokens": lambda t: t.startswith("url:"),
        "address_tokens": lambda t: t.split(":")[0] in ("from", "to", "cc", "return-path"),
        "header_tokens": lambda t: (
            t.split(":")[0]
            in ("header", "received", "message-id", "x-mailer", "mime-version", "content-type")
        ),
    }
    for setting, belongs in off.items():
        without = counts(MAIL, stop_words=stop, **{setting: False})
        if setting == "subject_tokens":  # the subject's words stay, untagged
            assert without == full - Counter({"subject:cheap": 1, "subject:offer": 1}) + Counter(
                ["cheap", "offer"]
            )
        else:
            assert without == Counter({t: n for t, n in full.items() if not belongs(t)}), setting


def test_ignored_headers_give_nothing():
    config = TokenizerConfig(ignore_headers=("received", "x-*"))
    tokens = Counter(Analyzer(config).tokens(MAIL))
    assert not [t for t in tokens if t.startswith(("received:", "x-mailer:", "header:x-"))]
    assert tokens["header:received"] == 0 and tokens["header:delivered-to"] == 1


@settings(max_examples=500)
@given(
    st.lists(st.text(alphabet="ab-*?[]!", max_size=5), max_size=4),
    st.lists(st.text(alphabet="ab-*?[]!", max_size=5), max_size=6),
)
def test_a_glob_matches_what_fnmatch_matches(globs, names):
    """The default ignored headers are names and prefixes, matched without a regular
    expression; any glob still matches what ``fnmatch.fnmatchcase`` matches."""
    matches = glob_matcher(globs)
    for name in [*names, *globs]:
        assert matches(name) == any(fnmatch.fnmatchcase(name, g) for g in globs), (name, globs)


URL_PART = st.sampled_from(
    [
        "http://",
        "https://",
        "HTTP://",
        "ftp://",
        "www.",
        "//",
        "user:pw@",
        "@",
        ":",
        ":80",
        "Example.COM",
        "a.b.c",
        ".",
        "/",
        "/p",
        "?q=1",
        "#f",
        "[",
        "]",
        "%",
        "\t",
        "\n",
        " ",
        "é",
        "",
        "x",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(URL_PART, max_size=8).map("".join))
def test_hostname_is_the_one_urlsplit_gives(url):
    try:
        expected = urlsplit(url).hostname
    except ValueError:
        with pytest.raises(ValueError):
            _hostname(url)
        return
    assert _hostname(url) == expected


def test_an_address_in_a_display_name_is_a_word_not_the_sender():
    tokens = counts(b'From: "paypal@paypal.com" <x@evil.example>\nSubject: hi\n\nbody\n')
    assert tokens["from:addr:x@evil.example"] == 1 and tokens["from:domain:evil.example"] == 1
    assert tokens["from:paypal@paypal.com"] == 1
    assert not [t for t in tokens if t.startswith("from:") and "paypal.com" in t and ":addr:" in t]
    assert tokens["from:domain:paypal.com"] == 0


def test_an_address_in_brackets_needs_no_dot():
    tokens = counts(b"From: Root <root@localhost>\nSubject: hi\n\nbody\n")
    assert tokens["from:addr:root@localhost"] == 1 and tokens["from:domain:localhost"] == 1
    assert tokens["from:root"] == 1


def test_a_received_host_ending_in_id_is_kept():
    raw = (
        b"Received: from mail.example.co.id (mail.example.co.id [192.0.2.1])\n"
        b" by mx.example.org with ESMTP id abc123; Mon, 1 Jan 2024 00:00:00 +0000\n"
        b"Subject: hi\n\nbody\n"
    )
    tokens = counts(raw)
    assert tokens["received:mail.example.co.id"] == 2 and tokens["received:192.0.2.1"] == 1
    assert tokens["received:abc123"] == 0 and tokens["received:2024"] == 0


@settings(max_examples=500)
@given(st.text(alphabet="iIdD\u0130\u0131\u212a (\t\n;x-", max_size=16))
def test_the_received_queue_id_pattern_is_its_plain_form(text):
    """The queue-id patterns, written to start with a character class (of the ASCII letters
    for an ASCII value), remove what the plain pattern does: the word "id" in any case after
    a blank or "(", and the word after."""
    plain = re.compile(r"(?<![^\s(])id\s+\S+", re.IGNORECASE)
    assert _without_queue_id(text) == plain.sub(" ", text)


@pytest.mark.parametrize("ngrams", [1, 2])
def test_header_values_remembered_give_the_tokens_of_their_text(ngrams):
    """Header values are tokenized one by one and remembered; the tokens are those of all
    the values as one text, the first time and from memory, with n-grams across values."""
    # (word pairs, counted value by value, do not run on from one value to the next)
    analyzer = Analyzer(TokenizerConfig(ngrams=ngrams, word_pairs="none"))
    values = [
        "from relay.example.net by mx.example.org with ESMTP for <ann@example.org>",
        "from client (HELO " + "x" * 60 + ") by relay.example.net",  # a skip: token
        "from relay.example.net by mx.example.org with ESMTP for <ann@example.org>",
    ]
    joined = ["received:" + t for t in analyzer.words("\n".join(values))]
    first = analyzer._value_tokens("received", values)
    again = analyzer._value_tokens("received", values)
    assert Counter(first) == Counter(again) == Counter(joined)
    assert "received:skip:x 60" in first and "received:ann@example.org" in first
    if ngrams > 1:
        assert first == joined and "received:for from" in first  # across two values
    else:
        assert analyzer._value.cache_info().hits == 4  # the repeated value, then all three
    raw = b"To: Ann <ann@example.org>\nSubject: a\n\nbody\n"
    assert analyzer.tokens(raw) == analyzer.tokens(raw)  # remembered tokens are not changed
    kept = analyzer._value.cache_info().currsize
    long = ["from " + "relay " * 200 + "by mx.example.org"]  # too long to be remembered
    assert Counter(analyzer._value_tokens("received", long)) == Counter(
        "received:" + t for t in analyzer.words(long[0])
    )
    assert analyzer._value.cache_info().currsize == kept


@pytest.mark.parametrize("as_bytes", [False, True])
def test_plain_text_is_cut_at_max_body_chars_as_a_mail_body_is(as_bytes):
    config = TokenizerConfig(max_body_chars=1000)
    text = "free money now " * 1000  # 15,000 characters
    tokens = Analyzer(config).tokens(text.encode() if as_bytes else text)
    assert tokens[-1] == "nbspam:truncated"
    assert tokens.count("free") == 1000 // 15 + 1
    short = Analyzer(config).tokens("free money now")
    assert "nbspam:truncated" not in short


def test_a_header_value_is_cut_at_max_body_chars_once_normalised():
    # U+FDFA becomes 18 characters, 4 words: 10,000 of them made 40,000 subject tokens
    config = TokenizerConfig(max_body_chars=1000, word_pairs="none")
    raw = b"Subject: " + "\ufdfa".encode() * 10_000 + b"\n\nhi"
    subject = [t for t in Analyzer(config).tokens(raw) if t.startswith("subject:")]
    # the first 1,000 characters: 55 copies of "صلى الله عليه وسلم" and "صلى الله ع",
    # each copy's last word run together with the next one's first
    assert len(subject) == 1 + 55 * 3 + 1
    assert subject[:5] == [
        "subject:صلى",
        "subject:الله",
        "subject:عليه",
        "subject:وسلمصلى",
        "subject:الله",
    ]


def test_a_mime_boundary_gives_no_token():
    from nbspam.core.settings import build_settings
    from nbspam.text.features import Analyzer

    mail = (
        b"Subject: x\nMIME-Version: 1.0\n"
        b'Content-Type: multipart/alternative; boundary="----=_NextPart_4128429132648534529"\n\n'
        b"------=_NextPart_4128429132648534529\nContent-Type: text/plain\n\nhello there\n"
        b"------=_NextPart_4128429132648534529--\n"
    )
    tokens = Analyzer(build_settings({}).tokenizer).tokens(mail)
    assert "content-type:multipart" in tokens and "content-type:alternative" in tokens
    assert not [t for t in tokens if "4128429132648534529" in t or "nextpart" in t]


def _bucket(a: str, b: str, buckets: int) -> str:
    """The hashed pair term of two adjacent words, computed by hand (`pair_tokens`)."""
    import zlib

    return f"pair:{(zlib.crc32(a.encode()) * 0x9E3779B1 ^ zlib.crc32(b.encode())) % buckets}"


PAIRS_MAIL = b"Subject: Cheap pills today\nFrom: Ann Lee <ann@example.com>\n\nbuy cheap pills\n"


@pytest.mark.parametrize("word_pairs", ["none", "headers", "all"])
def test_word_pairs_of_the_subject_and_headers_only_leave_the_body_without_pairs(word_pairs):
    body = ["buy", "cheap", "pills"]
    subject = ["subject:cheap", "subject:pills", "subject:today"]
    sender = ["from:ann", "from:lee"]
    if word_pairs == "all":
        body += [_bucket("buy", "cheap", 64), _bucket("cheap", "pills", 64)]
    if word_pairs != "none":
        subject += ["subject:" + _bucket("cheap", "pills", 64)]
        subject += ["subject:" + _bucket("pills", "today", 64)]
        sender += ["from:" + _bucket("ann", "lee", 64)]
    expected = (
        body
        + subject
        + sender
        + ["from:addr:ann@example.com", "from:domain:example.com"]
        + ["header:subject", "header:from"]
    )
    config = TokenizerConfig(word_pairs=word_pairs, pair_buckets=64)
    assert Analyzer(config).tokens(PAIRS_MAIL) == expected
    # plain text has no headers: pairs only with "all"
    text = ["buy", "cheap", "pills"]
    if word_pairs == "all":
        text += [_bucket("buy", "cheap", 64), _bucket("cheap", "pills", 64)]
    assert Analyzer(config).tokens("Buy cheap pills") == text
