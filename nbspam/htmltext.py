"""Visible text and link targets of an HTML document.

Two extractors give the same answer. The reference is built on the standard ``html.parser``
(``convert_charrefs=True``). The fast one, several times faster, splits the document with one
regular expression, so that its work is done in C, and declines wherever it cannot be sure to
read the markup as html.parser does (unterminated or unusual constructs, start tags outside a
strict grammar); then the reference takes over. The fast path's rules follow html.parser as
of CPython 3.10 to 3.13.0, and the tests compare both extractors on real and generated HTML.
Later releases change html.parser (the 2025 security fixes), so the fast path is used only
where html.parser's source is one it was checked against (`fast_path_verified`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable
from itertools import compress, count, product, repeat
from operator import itemgetter
from typing import NamedTuple

__all__ = ["fast_path_verified", "html_to_text"]

# Elements whose start and end begin a new line of text.
_BLOCK_TAGS = frozenset(
    "address article aside blockquote br dd div dl dt footer form h1 h2 h3 h4 h5 h6 header hr "
    "li ol p pre section table td th title tr ul".split()
)
_HIDDEN_TAGS = frozenset(("script", "style"))
_LINK_ATTRIBUTES = frozenset(("href", "src", "background", "action"))


def html_to_text(html: str) -> tuple[str, tuple[str, ...]]:
    """Return the visible text of an HTML document and its link targets; never raises.

    Script, style and comments are dropped, the title is kept, entities are decoded, block
    elements and table cells start new lines and runs of white space become one space. Link
    targets are the values of href, src, background and action attributes, in order. The
    answer is that of ``html.parser`` (``parser_html_to_text``), found faster where possible.
    """
    found = None
    if fast_path_verified():
        try:
            found = fast_html_to_text(html)
        except Exception:  # not expected; the reference is the answer anyway
            found = None
    return parser_html_to_text(html) if found is None else found


# SHA-256 of html/parser.py followed by _markupbase.py, as released with CPython 3.10.13,
# 3.11.7, and 3.12.1 and 3.13.0 (the same files): the parsers whose rules the fast path
# copies. Their differences do not touch parsing.
_VERIFIED_PARSERS = frozenset(
    (
        "1c383802890e072019058d13a359ca39f630c0ae4be45e8d17290a6445179e96",
        "c679a63e9a349553de6797dac8a05e51db06f817bc890deab96fd57a13146adc",
        "3d15314ecd5b4449f567bd2b48d71a2cb71c702dcc1618ca2fd9587ffc380d64",
    )
)


@functools.lru_cache(maxsize=1)
def fast_path_verified() -> bool:
    """True where this Python's html.parser is one the fast path was checked against.

    Reads the two source files beside the standard library's ``os`` module, without
    importing html.parser; where they are missing or differ, html.parser alone is used.
    """
    import hashlib  # here, on the first HTML: loading it (and OpenSSL) costs a cold start 3-10 ms

    stdlib = os.path.dirname(os.__file__)
    digest = hashlib.sha256()
    try:
        for name in (os.path.join("html", "parser.py"), "_markupbase.py"):
            with open(os.path.join(stdlib, name), "rb") as source:
                digest.update(source.read())
    except OSError:
        return False
    return digest.hexdigest() in _VERIFIED_PARSERS


def fast_html_to_text(html: str) -> tuple[str, tuple[str, ...]] | None:
    """The fast extractor alone: ``html_to_text``'s answer, or None where it declines."""
    found = _fast_extract(html)
    return None if found is None else _finish(*found)


def parser_html_to_text(html: str) -> tuple[str, tuple[str, ...]]:
    """The reference extractor alone, built on ``html.parser``."""
    return _finish(*_parser_extract(html))


# A run of white space holding two or more newlines: the lines inside it are blank.
_BLANK_LINES = re.compile(r"\n\s*\n")


def _finish(text: str, links: list[str]) -> tuple[str, tuple[str, ...]]:
    """Make the white space of each line one space and drop empty lines.

    The same as joining ``" ".join(line.split())`` for each line of ``text.split("\\n")``,
    leaving out empty ones; blank lines are removed first in C, since block elements leave
    many.
    """
    lines = _BLANK_LINES.sub("\n", text).split("\n")
    return "\n".join(filter(None, map(" ".join, map(str.split, lines)))), tuple(links)


def _link_value(name: str, value: str | None) -> str | None:
    """The link target an attribute names, if it is a link attribute with a non-blank value."""
    if name in _LINK_ATTRIBUTES and value and value.strip():
        return value.strip()
    return None


# --- the reference: html.parser ---------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _extractor_class() -> type:
    """The HTML text extractor, built on first use: most mail has no HTML, and a filter run
    per delivery should not pay for importing html.parser."""
    from html.parser import HTMLParser

    class _TextExtractor(HTMLParser):
        """Collects the visible text of an HTML document and the targets of its links."""

        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.pieces: list[str] = []
            self.links: list[str] = []
            self.hidden = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self._attributes(attrs)
            if tag in _HIDDEN_TAGS:
                self.hidden += 1
            elif tag in _BLOCK_TAGS:
                self.pieces.append("\n")

        def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self._attributes(attrs)
            if tag in _BLOCK_TAGS:
                self.pieces.append("\n")

        def handle_endtag(self, tag: str) -> None:
            if tag in _HIDDEN_TAGS:
                self.hidden = max(0, self.hidden - 1)
            elif tag in _BLOCK_TAGS:
                self.pieces.append("\n")

        def handle_data(self, data: str) -> None:
            if not self.hidden:
                self.pieces.append(data)

        def _attributes(self, attrs: list[tuple[str, str | None]]) -> None:
            for name, value in attrs:
                link = _link_value(name, value)
                if link is not None:
                    self.links.append(link)

    return _TextExtractor


def _parser_extract(html: str) -> tuple[str, list[str]]:
    """The text pieces, joined, and the links html.parser finds; keeps what it read if it fails."""
    extractor = _extractor_class()()
    try:
        extractor.feed(html)
        extractor.close()
    except Exception:  # html.parser gave up on broken markup: keep what it had read
        pass
    return "".join(extractor.pieces), extractor.links


# --- the fast path: one regular expression --------------------------------------------------
#
# The pattern matches, at a "<", markup in a form where html.parser's reading of it is certain.
# re.split cuts the document at its matches: the text between them is html.parser's data, and
# the groups of each match tell what the markup stands for. A "<" that html.parser takes for
# markup (a letter, "/", "!" or "?" follows) but that the pattern does not match stays in the
# text, where one search finds it, and the fast path declines; any other "<" is text for both.
#
# Start tags follow a strict grammar. The tag name is html.parser's: it ends at a tab, line
# feed, carriage return, form feed, space, "/" or ">". An attribute follows white space (or
# a "/" not before ">", as html.parser allows) or the closing quote of a quoted value. Its
# name starts with none of "=", "/", ">" and white space; its value, after "=" (or "==" and so
# on) and optional white space, is quoted, or bare (it starts with neither a quote nor "="),
# or empty before ">". Names and bare values must be followed by what ends them for
# html.parser. So a start tag splits into attributes in one way only, and it is the way of
# html.parser's locatestarttagend_tolerant and attrfind_tolerant. A bare value swallows a "/"
# before ">": <script src=x/> is a start tag, with raw text after it, as in html.parser.
# Names and white space are ASCII (quick for re, and enough for mail): where html.parser would
# read on, the grammar fails and the fast path declines.

_WHITE = r"[\t\n\x0b\x0c\r ]"
_TAG_NAME = r"[a-zA-Z][!-.0-=?-~]*"
_TAG_NAME_END = r"(?=[\t\n\r\f />])"
_ATTRIBUTE_NAME = r"[!-.0-<?-~]+(?=[\t\n\x0b\x0c\r =/>])"
_EQUALS = rf"{_WHITE}*=+{_WHITE}*"
# Code points above ASCII that are white space for re and str.isspace(). Bare values may hold
# every other code point above ASCII (font names, say): their classes are written as "none
# of" these and of some ASCII, which re compiles far quicker than the ranges of all the rest.
_WIDE_SPACE = r"\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# A bare value: it starts with none of white space, the quotes, "=" and ">" (nor DEL), and
# goes on to white space or ">".
_VALUE = (
    rf""""[^"]*"|'[^']*'|[^\x00-\x20"'=>\x7f{_WIDE_SPACE}][^\x00-\x20>\x7f{_WIDE_SPACE}]*"""
    r"(?=[\t\n\x0b\x0c\r >])|(?=>)"
)
# One attribute of a script or style start tag (these keep to white space between attributes,
# since there "/>" and ">" differ), and one attribute with its name and value as groups.
_ATTRIBUTE = rf"""(?:{_WHITE}+|(?<=["'])){_ATTRIBUTE_NAME}(?:{_EQUALS}(?:{_VALUE}))?"""
_ATTRIBUTE_PARTS = rf"({_ATTRIBUTE_NAME})(?:{_EQUALS}({_VALUE}))?"


def _any_case(word: str) -> str:
    """A pattern for an ASCII word in any letter case (re.IGNORECASE would also match 'ſ')."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


def _any_of(words: Iterable[str]) -> str:
    """A pattern for any of some ASCII words in any letter case."""
    return "(?:" + "|".join(_any_case(word) for word in sorted(words)) + ")"


_LINK_NAME = rf"{_any_of(_LINK_ATTRIBUTES)}(?=[\t\n\x0b\x0c\r =/>])"
_SPACING = r"[\t\n\x0b\x0c\r /]"
# The attributes of any other start tag, up to its ">": group ``link`` holds the value of the
# link attribute, and group ``links`` is set if another follows one with a value (the tag is
# then left to html.parser). ">" and "/>" are alike here, since html.parser does the same with
# a start tag of these elements as with a start-end tag. LINK stands for the number of group
# ``link``: the test whether it is set comes before the group, where only a number can name it.
_LINKED_ATTRIBUTES = (
    rf"""(?:(?:{_SPACING}+|(?<=["']))(?:{_LINK_NAME}(?(LINK)(?P<links>))"""
    rf"(?:{_EQUALS}(?P<link>{_VALUE}))?|{_ATTRIBUTE_NAME}(?:{_EQUALS}(?:{_VALUE}))?))*"
    rf"{_SPACING}*>"
)


def _raw_text(name: str) -> str:
    """A pattern for the raw text of a script or style element, as html.parser reads it: up to
    the first ``</name>`` in any case (white space allowed around the name) or to the end of
    the document. Anything else that starts like an end tag of the element, in any case that
    html.parser's search would accept, stops the pattern short, so the fast path declines."""
    return rf"[^<]*(?:<(?!/\s*(?i:{name}))[^<]*)*(?:</\s*{_any_case(name)}\s*>|\Z)"


_RAW_TEXT_NAME = _any_of(_HIDDEN_TAGS) + _TAG_NAME_END


def _raw_text_elements() -> str:
    """A pattern for script and style start tags after their "<" and, unless they end with
    "/>", their raw text. Group ``raw``, read ahead once for both, holds the attributes."""
    elements = "|".join(
        rf"{_any_case(name)}(?P=raw)(?:/>|>{_raw_text(name)})" for name in sorted(_HIDDEN_TAGS)
    )
    return rf"(?={_RAW_TEXT_NAME}(?P<raw>(?:{_ATTRIBUTE})*{_WHITE}*))(?:{elements})"


_MARKUP_BRANCHES = (
    # start tags but those of script and style
    rf"(?!{_RAW_TEXT_NAME})(?P<start>{_TAG_NAME}){_TAG_NAME_END}{_LINKED_ATTRIBUTES}",
    # end tags, named as html.parser's tagfind_tolerant reads them; its endtagfind, tried
    # first, finds the same name where this branch matches (no white space after "</", and
    # the name ends at a tab, line feed, carriage return, form feed, space or ">")
    r"/(?P<end>[a-zA-Z][!-.0-=?-~]*)(?=[\t\n\r\f />\x00])[^>]*>",
    _raw_text_elements(),
    # "</>" and bogus comments, which html.parser skips up to ">"
    r"/(?:[^a-zA-Z>\s][^>]*)?>",
    # comments, which end at the first "--", white space and ">" after "<!--"
    r"!--(?s:.*?)--\s*>",
    # doctype and other declarations but marked sections, and processing instructions
    r"!(?!--|\[)[^>]*>",
    r"\?[^>]*>",
    # Microsoft Office's <![if ...]>, <![else]> and <![endif]>, which end at the first "]",
    # white space and ">"; other marked sections (CDATA...) are left to html.parser
    rf"!\[(?:{_any_case('if')}|{_any_case('else')}|{_any_case('endif')})"
    r"(?![-_.a-zA-Z0-9])(?s:.*?)\]\s*>",
)
_MARKUP = "<(?:" + "|".join(_MARKUP_BRANCHES) + ")"

# Code points that html.unescape never produces (it drops them). One that the document lacks
# stands for markup other than block elements, so that the text is unescaped in one call yet
# each entity decodes as in its own piece of data, as html.parser unescapes them (numeric
# references stop at it, and no entity name holds it); then it is removed.
_SEPARATORS = "\x01\x02\x03\x04\x05\x06\x07\x08"


class _FastPath(NamedTuple):
    """The fast path's compiled patterns and tables, made on first use: like html.parser,
    they cost time that mail without HTML should not pay."""

    markup: re.Pattern[str]
    width: int  # items per match in markup.split(): the text before it, then its groups
    start: int  # the positions of groups in a match's items
    end: int
    link: int
    links: int
    raw: int
    unsure: re.Pattern[str]  # markup html.parser reads that the pattern did not match
    attribute: re.Pattern[str]
    block_names: dict[str, str]  # the name of a block element, in any case: a newline
    unescape: Callable[[str], str]


@functools.lru_cache(maxsize=1)
def _fast_path() -> _FastPath:
    """Compile the fast path's patterns."""
    from html import unescape

    link = _MARKUP[: _MARKUP.index("(?P<link>")].count("(?P<") + 1  # all groups are named
    markup = re.compile(_MARKUP.replace("(?(LINK)", f"(?({link})"))
    group = markup.groupindex
    assert group["link"] == link
    return _FastPath(
        markup=markup,
        width=markup.groups + 1,
        start=group["start"],
        end=group["end"],
        link=group["link"],
        links=group["links"],
        raw=group["raw"],
        unsure=re.compile("<[a-zA-Z/!?]"),
        attribute=re.compile(_ATTRIBUTE_PARTS),
        block_names={
            "".join(letters): "\n"
            for name in _BLOCK_TAGS
            for letters in product(*({c.lower(), c.upper()} for c in name))
        },
        unescape=unescape,
    )


def _fast_extract(html: str) -> tuple[str, list[str]] | None:
    """The text, html.parser's pieces joined, and the links; None where it cannot be sure.

    Each piece of markup becomes a newline (block elements) or the separator.
    """
    separator = next((c for c in _SEPARATORS if c not in html), None)
    if separator is None:
        return None
    fast = _fast_path()
    parts = fast.markup.split(html)
    width = fast.width
    matches = len(parts) // width
    if parts[fast.links :: width].count(None) != matches:
        return None
    # A match holds a start tag's name, an end tag's or neither: the end tag's newline or
    # separator is the default when the start tag's name is looked up.
    newline = fast.block_names.get
    ends = map(newline, parts[fast.end :: width], repeat(separator))
    pieces = [""] * (2 * matches + 1)
    pieces[0::2] = parts[0::width]
    pieces[1::2] = map(newline, parts[fast.start :: width], ends)
    text = "".join(pieces)
    if fast.unsure.search(text):
        return None
    return fast.unescape(text).replace(separator, ""), _links(fast, parts, separator)


def _links(fast: _FastPath, parts: list[str | None], separator: str) -> list[str]:
    """The link targets of the start tags that markup.split() found, in order."""
    width = fast.width
    values = parts[fast.link :: width]
    raw = _raw_tag_links(fast, parts)  # (match number, value) of script and style tags
    if not raw:  # the usual case
        return _link_targets(fast, list(filter(None, values)), separator)
    numbered = zip(compress(count(), values), filter(None, values))
    merged = sorted([*numbered, *raw], key=itemgetter(0))  # stable: tag order kept
    return _link_targets(fast, [value for _, value in merged], separator)


def _raw_tag_links(fast: _FastPath, parts: list[str | None]) -> list[tuple[int, str]]:
    """The values of the link attributes of script and style start tags, with the number of
    the match that found each tag."""
    found = []
    column = parts[fast.raw :: fast.width]
    for number, text in zip(compress(count(), column), filter(None, column)):
        # the ">" lets the grammar see where the last name or value ends
        for name, value in fast.attribute.findall(text + ">"):
            if name.lower() in _LINK_ATTRIBUTES:
                found.append((number, value))
    return found


def _link_targets(fast: _FastPath, written: list[str], separator: str) -> list[str]:
    """The targets of link attributes from their values as written (quotes and all): without
    the quotes, unescaped and stripped, and left out if blank. The values are unescaped in one
    call, joined by the separator as the text is."""
    values = [value[1:-1] if value[:1] in ('"', "'") else value for value in written]
    values = fast.unescape(separator.join(values)).split(separator)
    return list(filter(None, map(str.strip, values)))
