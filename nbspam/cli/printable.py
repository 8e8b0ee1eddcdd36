"""Names as a terminal may show them: the characters it would act on, written as escapes.

File names are their owners' choice, and nbspam prints them in lines that people read on
terminals (root's among them): the text lines of predict and filter, the inputs skipped,
the one line of an error. A name holding ESC could move the cursor, retitle the window or
rewrite what was printed before it; one holding a line feed or a carriage return could print
a line of its own. JSON Lines and TSV are escaped by their own rules.
"""

from __future__ import annotations

_ESCAPED = "[\x00-\x08\x0a-\x1f\x7f-\x9f\udc80-\udc9f]"
"""C0 controls but tab, DEL, C1 controls, and the bytes 0x80-0x9f of a name that is not
UTF-8 (written as their own bytes, where 8-bit terminals read 0x9b as CSI)."""


def printable(text: str) -> str:
    """``text`` with each character of `_ESCAPED` as ``\\xNN`` (its code, or its byte); the
    same ``text`` where it has none, as nearly every name has (checked without a regular
    expression: scoring one message compiles none)."""
    if text.isprintable():
        return text
    import re

    return re.sub(_ESCAPED, _escape, text)


def _escape(match) -> str:  # a re.Match
    return f"\\x{ord(match.group()) & 0xFF:02x}"
