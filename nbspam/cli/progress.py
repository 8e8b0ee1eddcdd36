"""Progress on stderr while a command works: on a terminal a bar with the total, the share
done and the time left; elsewhere (cron, a log file) a plain line every `PERIOD` seconds,
so that a short job prints none; nothing with -q.

The library tells its stages through `core.progress` (a typed table's reading among them,
its rows beside its bytes); the messages a command reads are counted here as they pass
(`Meter.reading`), in bytes against the listing's total (`mail.extent`), so no message is
read twice to count them. That total may be given as a function, called when the total is
first shown: the listing is then never made with -q, nor for a job off a terminal that
ends before its first line. Written with click.echo
alone: a bar of one line needs no library of its own."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import click

PERIOD = 10.0  # seconds between plain lines
REDRAW = 0.1  # seconds between redraws of the bar
WIDTH = 20  # characters of the bar

#: A stage's total: a number of steps, None where it is not known, or a function that
#: gives either, called when the total is first shown (listing a folder takes some 10 µs
#: a file, and nothing needs it where no progress is shown).
Total = int | Callable[[], int | None] | None


class Meter:
    """The progress of one stage at a time (a `core.progress.Listener`), shown on ``stream``
    as a bar (``terminal``) or as plain lines, or not at all (``quiet``)."""

    def __init__(
        self,
        stream: IO[str],
        *,
        terminal: bool,
        quiet: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream, self.clock = stream, clock
        self.mode = "off" if quiet else "bar" if terminal else "lines"
        self.what: str | None = None
        self._total: Total = None
        self.drawn = False

    def begin(self, what: str, total: Total, noun: str | None = None) -> None:
        """A stage of ``total`` steps (None: not known; a function: called when the total
        is first shown); with a ``noun``, the items (as messages) are counted beside the
        steps (as bytes)."""
        self.clear()
        self.what, self._total, self.noun = what, total, noun
        self.done = self.items = 0
        self.started = self.shown = self.clock()
        if self.mode == "bar":
            self._draw()

    def advance(self, steps: int, items: int = 0) -> None:
        if self.what is None:
            return
        self.done += steps
        self.items += items
        now = self.clock()
        if self.mode == "bar" and now - self.shown >= REDRAW:
            self.shown = now
            self._draw()
        elif self.mode == "lines" and now - self.shown >= PERIOD:
            self.shown = now
            click.echo(self.text(plain=True), file=self.stream)

    def end(self) -> None:
        self.clear()
        self.what = None

    def clear(self) -> None:
        """Take the bar off the line, before another line is written there."""
        if self.drawn:
            click.echo("\r\x1b[K", file=self.stream, nl=False, color=True)
            self.drawn = False

    @property
    def total(self) -> int | None:
        """The stage's total, its function called the first time it is asked for."""
        if callable(self._total):
            self._total = self._total()
        return self._total

    def reading(self, messages: Iterable[Any], total: Total, verb: str) -> Iterator[Any]:
        """The ``messages`` as they come, each counted by its bytes against ``total``."""
        self.begin(verb, total, noun="messages")
        try:
            for message in messages:
                self.advance(len(message.data), 1)
                yield message
        finally:
            self.end()

    def _draw(self) -> None:
        width = shutil.get_terminal_size().columns - 1
        click.echo("\r" + self.text()[:width] + "\x1b[K", file=self.stream, nl=False, color=True)
        self.drawn = True

    def text(self, *, plain: bool = False) -> str:
        """What the stage has done: with a total, how much of it, the share and the time
        left (a bar on a terminal)."""
        what = self.what or ""
        total = self.total
        if self.noun is not None:
            what = f"{what} {self.items:,} {self.noun}"
            if total:
                what += f", {_size(self.done, total)}"
        elif total:
            what = f"{what} {min(self.done, total):,} of {total:,}"
        if not total:
            return what
        share = min(self.done / total, 1.0)
        left = _left(self.clock() - self.started, share)
        if plain:
            return f"{what} ({share:.0%})" + (f", about {left} left" if left else "")
        filled = round(share * WIDTH)
        bar = "#" * filled + " " * (WIDTH - filled)
        return f"{what} {share:4.0%} [{bar}]" + (f" {left} left" if left else "")


def _size(done: int, total: int) -> str:
    """``done`` of ``total`` bytes, in the unit of the total."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if total >= scale:
            return f"{min(done, total) / scale:.1f} of {total / scale:.1f} {unit}"
    return f"{min(done, total)} of {total} bytes"


def _left(elapsed: float, share: float) -> str | None:
    """The time left at this pace, as M:SS (H:MM:SS past an hour); None too early to tell."""
    if share <= 0 or elapsed < 1.0:
        return None
    seconds = round(elapsed * (1 - share) / share)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{seconds:02}" if hours else f"{minutes}:{seconds:02}"
