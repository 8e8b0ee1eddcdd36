"""Visible text and link targets of an HTML document."""

from __future__ import annotations

import functools

__all__ = ["html_to_text"]

# Elements whose start and end begin a new line of text.
_BLOCK_TAGS = frozenset(
    "address article aside blockquote br dd div dl dt footer form h1 h2 h3 h4 h5 h6 header hr "
    "li ol p pre section table td th title tr ul".split()
)
_HIDDEN_TAGS = frozenset(("script", "style"))
_LINK_ATTRIBUTES = frozenset(("href", "src", "background", "action"))


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
                if name in _LINK_ATTRIBUTES and value and value.strip():
                    self.links.append(value.strip())

    return _TextExtractor


def html_to_text(html: str) -> tuple[str, tuple[str, ...]]:
    """Return the visible text of an HTML document and its link targets; never raises.

    Uses the standard ``html.parser``: script, style and comments are dropped, the title is
    kept, entities are decoded, block elements and table cells start new lines and runs of
    white space become one space. Link targets are the values of href, src, background and
    action attributes, in order.
    """
    extractor = _extractor_class()()
    try:
        extractor.feed(html)
        extractor.close()
    except Exception:  # html.parser gave up on broken markup: keep what it had read
        pass
    lines = (" ".join(line.split()) for line in "".join(extractor.pieces).split("\n"))
    return "\n".join(line for line in lines if line), tuple(extractor.links)
