"""A whole number written in ASCII digits, as protocols, file names and state files write
them: `str.isdigit` also passes digits of other scripts and superscripts ("²"), which
`int` then refuses or reads as another number, so a text from outside is checked here."""

from __future__ import annotations

import re

_DIGITS = re.compile("[0-9]+")


def ascii_number(text: str, most_digits: int) -> int | None:
    """The number ``text`` writes in ASCII digits alone, of at most ``most_digits`` of
    them (a bound on the number, and on the work of reading it); None for anything else."""
    if len(text) > most_digits or not _DIGITS.fullmatch(text):
        return None
    return int(text)
