"""Tests of nbspam.mail.htmltext: visible text and links, bounded time on hostile HTML."""

from __future__ import annotations

import email
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbspam.mail.htmltext import MAX_HTML_CHARS, html_to_text
from nbspam.mail.mailparse import decode_bytes

# --- behaviour ------------------------------------------------------------------------------


def test_html_to_text_drops_hidden_content_and_decodes_entities():
    html = (
        "<html><head><title>The Title</title><style>body {x: y}</style>"
        "<script type='text/javascript'>var hidden = '<b>no</b>';</script></head>"
        "<body><h1>Heading</h1><p>Fish &amp; chips &eacute;t&eacute; &#36;5&nbsp;only</p>"
        "V<!-- split -->iagra<br>next line<div>block</div><ul><li>one<li>two</ul>"
        "<table><tr><td>cell a</td><td>cell b</td></tr></table></body></html>"
    )
    text, links = html_to_text(html)
    assert text.split("\n") == [
        "The Title",
        "Heading",
        "Fish & chips été $5 only",
        "Viagra",
        "next line",
        "block",
        "one",
        "two",
        "cell a",
        "cell b",
    ]
    assert links == ()


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("foo<b>bar</b>baz", "foobarbaz"),
        ("V<i>i</i>a<font face=Arial>g</font>r<span class=x>a</span>", "Viagra"),
        ("<p>a</p><p>b</p>", "a\nb"),
        ("a<br>b<br/>c<hr>d", "a\nb\nc\nd"),
        ("a<DIV>b</DiV>c", "a\nb\nc"),
        ("  spaced \t out \r\n\r\n\n  lines  ", "spaced out\nlines"),
        ("<p> </p><div>\u00a0</div><p>x</p>", "x"),
        ("a<script>x</script>b<style>y</style>c<!-- z -->d", "abcd"),
        ("a<script>never closed <b>x</b>", "a"),
        ("<textarea>kept</textarea><noscript>too</noscript>", "kepttoo"),
    ],
)
def test_inline_text_is_joined_and_blocks_start_lines(html, text):
    assert html_to_text(html) == (text, ())


def test_html_to_text_collects_link_targets_in_order():
    html = (
        '<body background="bg.jpg"><a href="http://a.example/x?p=1&amp;q=2">A</a>'
        "<IMG SRC=http://img.example/i.gif><iframe src='http://frame.example/'></iframe>"
        '<map><area href="http://area.example/"></map><script src="http://js.example/s.js">'
        "</script><form action=\"http://form.example/post\"></form><a name='anchor'>no link</a>"
        '<!-- <a href="http://comment.example/"> -->'
    )
    text, links = html_to_text(html)
    assert links == (
        "bg.jpg",
        "http://a.example/x?p=1&q=2",
        "http://img.example/i.gif",
        "http://frame.example/",
        "http://area.example/",
        "http://js.example/s.js",
        "http://form.example/post",
    )
    assert text == "A\nno link"


def test_an_element_with_two_link_attributes_gives_each_once_and_blank_ones_none():
    html = "<a href=' x ' src=y>z</a><img src='  '><a href=''>w</a><a href>v</a>"
    assert html_to_text(html) == ("zwv", ("x", "y"))


@pytest.mark.parametrize(
    "html",
    [
        "<p>unclosed <b>tags <i>everywhere",
        "<a href='x>broken",
        "<<<>>> </ > <! <? <!-- never closed",
        "<script>never closed",
        "<style",
        '<img src="" alt=">">text',
        "&bogus; &#xZZ; &#99999999999; &",
        "\x00\x01<p\x00>nul</p>",
        "lone \ud800 surrogates \udfff<a href='\udc80x'>",
        "",
    ],
)
def test_html_to_text_survives_broken_html(html):
    text, links = html_to_text(html)
    assert isinstance(text, str)
    assert all(isinstance(link, str) for link in links)


def test_html_text_keeps_words_around_broken_tags():
    text, links = html_to_text('<font color="red" <b>Free</b> money <a href="x" >now</a>')
    assert text.split() == ["Free", "money", "now"]
    assert links == ("x",)


def test_past_max_html_chars_the_text_is_read_without_parsing():
    filler = "<p>word</p>" * (MAX_HTML_CHARS // 11 + 1)
    rest = (
        "<p>late &amp; <b>bold</b></p><script>var hidden</script><!-- unseen -->"
        "<a href=late.example>end</a><STYLE>p {}</style"
    )
    text, links = html_to_text(filler + rest)
    # the rest loses its links, not its words: every tag there ends a line
    assert text.split("\n")[-4:] == ["word", "late &", "bold", "end"]
    assert "hidden" not in text and "unseen" not in text and "p {}" not in text
    assert links == ()
    head, _ = html_to_text(filler)
    assert text.startswith(head)


def test_past_max_html_chars_an_unclosed_script_hides_the_rest():
    filler = "<p>word</p>" * (MAX_HTML_CHARS // 11 + 1)
    text, _ = html_to_text(filler + "<p>seen</p><script>never " + "x " * 1000)
    assert text.endswith("seen") and "never" not in text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>/!-=\"' &;#abpr1x\n")) | st.characters()))
def test_html_to_text_never_raises(html):
    text, links = html_to_text(html)
    assert isinstance(text, str) and isinstance(links, tuple)
    lines = text.split("\n") if text else []
    assert all(line and line == " ".join(line.split()) for line in lines)
    assert all(link and link == link.strip() for link in links)


# --- bounded time -----------------------------------------------------------------------------

# Documents of about 1.5 MB that made html.parser, or Lexbor without the limit on the characters
# read, take from seconds to hours: unclosed constructs, deep nesting, misnested formatting
# elements, many attributes. Each now takes well under a second; the limit is generous.
SIZE = 1_500_000
WORST_CASES = {
    **{
        unit: "<html><body>" + unit * (SIZE // len(unit))
        for unit in ["<p a=", "<!--", "<![CDATA[", "<?", "<a", '<a href="', "&#", "<div>"]
        + ["<b>", "<dl>", "<ul>", "<rt>", "<dd><dl>", "<font><center>", "<a><ul>", "<p>"]
    },
    "misnested formatting": "<b><i>x" * 200_000 + "</b>" * 100_000,
    "misnested formatting 2": "<b><i><u><s>x" * 100_000 + "</b>y" * 100_000,
    "formatting elements with attributes": "".join(f"<b c={i}>" for i in range(150_000)),
    "100,000 attributes": "<p " + " ".join(f"a{i}=1" for i in range(100_000)) + ">x",
    "one huge attribute": '<a href="' + "x" * SIZE + '">y</a>',
    "NULs": "\x00" * SIZE,
    "lone surrogates": "<p>\ud800x\udfff" * (SIZE // 6),
}


@pytest.mark.parametrize("html", WORST_CASES.values(), ids=WORST_CASES.keys())
def test_hostile_html_takes_bounded_time(html):
    start = time.perf_counter()
    html_to_text(html)
    assert time.perf_counter() - start < 5


# --- the SpamAssassin corpus --------------------------------------------------------------------


@pytest.fixture(scope="module")
def html_parts(spamassassin: Path) -> list[str]:
    """The decoded text/html parts of every message of the SpamAssassin corpus."""
    parts = []
    for path in sorted(p for label in ("ham", "spam") for p in (spamassassin / label).iterdir()):
        data = path.read_bytes()
        if b"text/html" not in data.lower():
            continue
        for part in email.message_from_bytes(data).walk():
            if part.get_content_type() == "text/html":
                payload = part.get_payload(decode=True) or b""
                parts.append(decode_bytes(payload, part.get_content_charset()))
    return parts


@pytest.mark.corpus
def test_the_corpus_html_gives_text_and_links(html_parts):
    assert len(html_parts) > 1000
    with_text = with_links = 0
    for html in html_parts:
        text, links = html_to_text(html)
        with_text += bool(text)
        with_links += bool(links)
    assert with_text > 0.98 * len(html_parts)  # the others show only images
    assert with_links > 0.8 * len(html_parts)
