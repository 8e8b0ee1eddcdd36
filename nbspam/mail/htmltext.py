"""Visible text and link targets of an HTML document, read with selectolax's Lexbor parser.

Lexbor builds the tree a browser would (HTML5 parsing rules) in C. Like every HTML5 tree
builder its time still grows with the square of the nesting depth and of the number of
attributes of one tag (16,000 nested ``<dl>``, 64 KB, take most of a second), so only the
first ``MAX_HTML_CHARS`` characters of a document are parsed: then no document takes more
than about 0.2 s. A message's HTML parts share those characters (`mailparse` passes what is
left of them), so that a message of a hundred such parts takes no longer than one. The
rest, in the few documents that are longer (21 of the 1,210 HTML parts of the SpamAssassin
corpus, newsletters most), is read by one linear pass of a regular expression that drops
markup, script, style and comments, so its words still count.
"""

from __future__ import annotations

import re

__all__ = ["MAX_HTML_CHARS", "html_to_text"]

MAX_HTML_CHARS = 32_768
"""HTML past this many characters of a message (all its HTML parts together: `mailparse`
passes each part what is left) is not parsed, only stripped of its markup."""
MAX_STRIPPED_CHARS = 1_000_000
"""HTML past this many characters more is not read at all (the text a message's body gives
is cut shorter still, at the tokenizer's max_body_chars)."""

# Elements whose start and end begin a new line of text.
_BLOCK_TAGS = (
    "address article aside blockquote br dd div dl dt footer form h1 h2 h3 h4 h5 h6 header hr "
    "li ol p pre section table td th title tr ul".split()
)
_HIDDEN_TAGS = ["script", "style"]
_LINK_ATTRIBUTES = ("href", "src", "background", "action")
# ":is" finds an element with two link attributes once, where a plain selector list repeats it.
_LINKED = ":is(" + ",".join(f"[{name}]" for name in _LINK_ATTRIBUTES) + ")"
_BLOCKS = ",".join(_BLOCK_TAGS)


def html_to_text(html: str, parse: int = MAX_HTML_CHARS) -> tuple[str, tuple[str, ...]]:
    """Return the visible text of an HTML document and its link targets; never raises.

    Script, style and comments are dropped, the title is kept, entities are decoded, block
    elements and table cells start new lines, runs of white space become one space and empty
    lines are dropped. Link targets are the values of href, src, background and action
    attributes, stripped and non-blank, in document order, from the first ``parse``
    characters, which Lexbor parses (the text of the rest is read too, without its links).
    """
    # imported here: most mail has no HTML, and a filter run per delivery should not pay for it
    from selectolax.lexbor import LexborHTMLParser

    head, tail = _cut(html, min(parse, MAX_HTML_CHARS))
    tree = LexborHTMLParser(head)
    links = [
        value.strip()
        for node in tree.css(_LINKED)
        for name, value in node.attributes.items()
        if name in _LINK_ATTRIBUTES and value and not value.isspace()
    ]
    tree.strip_tags(_HIDDEN_TAGS, recursive=True)
    for node in tree.css(_BLOCKS):
        node.insert_before("\n")
        node.insert_after("\n")
    root = tree.root
    text = "" if root is None else root.text()
    if tail:
        text += "\n" + _stripped(tail)
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(filter(None, lines)), tuple(links)


def _cut(html: str, parse: int) -> tuple[str, str]:
    """(what Lexbor parses, the rest): the first ``parse`` characters, ended after the last
    ">" among them where there is one, so that no tag is cut in two."""
    if len(html) <= parse:
        return html, ""
    end = html.rfind(">", 0, parse) + 1 or parse
    return html[:end], html[end : end + MAX_STRIPPED_CHARS]


# Markup in the rest: script and style elements and comments to their end, any other tag
# ("<" and a letter, "/", "!" or "?") to its ">", each to the end of the text where it is not
# closed. Every match consumes what it looked at, so one pass is linear in the length.
_MARKUP = re.compile(
    r"<(?:(?i:(script|style))\b.*?(?:</(?i:\1)\s*>|\Z)|!--.*?(?:-->|\Z)|[a-zA-Z/!?][^>]*(?:>|\Z))",
    re.DOTALL,
)


def _stripped(html: str) -> str:
    """The text of HTML without parsing it: markup becomes a line break, entities are
    decoded (`html.unescape`, linear too)."""
    from html import unescape

    return unescape(_MARKUP.sub("\n", html))
