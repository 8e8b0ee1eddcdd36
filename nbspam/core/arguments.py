"""The checks of an argument of the Python API (`api`, `sklearn`), or of an option a command
passes on to it unchecked: a value of the wrong type or out of range is one `ConfigError`
naming the argument and what it must be, raised where the value comes in. Unchecked, such
a value failed deep inside as a bare TypeError (``top="3"`` in a slice), or was taken for
another (``True`` as 1 term, ``"no"`` as true)."""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable

from ..errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def whole(name: str, value: Any, low: int, high: int | None = None) -> int:
    """``value``, a whole number from ``low`` (to ``high``): an int (numpy's too), never a
    bool (True is no count) nor a float (2.0 is no index)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f">= {low}" if high is None else f"from {low} to {high:,}"
        raise ConfigError(f"{name} must be a whole number {bound}, not {_shown(value)}")
    return int(value)


def number(name: str, value: Any, interval: str) -> float:
    """``value``, a real number (an int or a float, never a bool nor NaN) in ``interval``,
    written as the message says it: ``"(0, 1)"``, ``"[0, 0.5)"``, ``"(0.5, 1]"``."""
    low, high = (float(bound) for bound in interval[1:-1].split(","))
    inside = (
        not isinstance(value, bool)
        and isinstance(value, numbers.Real)
        and (low < value if interval[0] == "(" else low <= value)
        and (value < high if interval[-1] == ")" else value <= high)
    )
    if not inside:
        raise ConfigError(f"{name} must be a number in {interval}, not {_shown(value)}")
    return float(value)


def flag(name: str, value: Any) -> bool:
    """``value``, True or False: not a string nor a number taken for one."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, not {_shown(value)}")
    return value


def text(name: str, value: Any) -> str:
    """``value``, a str."""
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be text, not {_shown(value)}")
    return value


def texts(name: str, value: Any) -> list[str]:
    """``value``, a str or an iterable of them (a list, a tuple), as a list."""
    found = [value] if isinstance(value, str) else value
    if isinstance(found, (bytes, dict)) or not isinstance(found, Iterable):
        raise ConfigError(f"{name} must be text or a list of texts, not {_shown(value)}")
    found = list(found)
    if not all(isinstance(item, str) for item in found):
        raise ConfigError(f"{name} must be text or a list of texts, not {_shown(value)}")
    return found


def one_of(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value``, one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, not {_shown(value)}")
    return value


def path(name: str, value: Any) -> str:
    """``value``, a file's name as a str or an `os.PathLike` (`pathlib.Path`) of one, as a
    str; never bytes, which the API takes for a message."""
    found = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(found, str):
        raise ConfigError(f"{name} must be a str or os.PathLike, not {_shown(value)}")
    return found


def instance(name: str, value: Any, kind: type, what: str) -> Any:
    """``value``, an instance of ``kind``, which ``what`` names for the message."""
    if not isinstance(value, kind):
        raise ConfigError(f"{name} must be {what}, not {_shown(value)}")
    return value


def optional(check: Any, name: str, value: Any, *args: Any) -> Any:
    """None, or ``value`` as ``check`` (one of the above) passes it."""
    return None if value is None else check(name, value, *args)


def _shown(value: Any) -> str:
    """The value as the message shows it: its repr, at most 60 characters of it."""
    return f"{value!r:.60}"
