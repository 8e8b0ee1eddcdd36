"""Frozen values with named fields, made without `dataclasses`.

`dataclasses` imports `inspect` (and with it `ast`, `dis`, `tokenize`) and writes each
class's methods with ``exec``: together nearly a `python -c pass` of a mail filter's cold
start. The values that scoring one message builds (the settings, `Message`, `Prediction`,
the parsed mail) are `Record` subclasses instead: the fields are the class's annotations
in order, a class attribute of the same name is the default, and the instances compare,
hash and print as a frozen dataclass's do::

    class Point(Record):
        x: int
        y: int = 0

    Point(1) == Point(x=1, y=0); Point(1).replace(y=2)  # Point(x=1, y=2)

The fields are the class's slots, so a record holds no ``__dict__``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class _RecordType(type):
    """Makes a `Record` class: its annotations become its slots, their values its defaults
    (a slot and a class attribute cannot share a name)."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        if bases:  # a record class, not Record itself
            fields = tuple(namespace.get("__annotations__", {}))
            namespace["_defaults"] = {f: namespace.pop(f) for f in fields if f in namespace}
            namespace["_fields"] = fields
            namespace["__slots__"] = fields
        return super().__new__(mcs, name, bases, namespace)


class Record(metaclass=_RecordType):
    """A frozen value: fields set once by ``__init__``; ``==``, ``hash``, ``repr`` and
    pickling by its fields; `replace` makes a changed copy."""

    __slots__ = ()
    #: the fields in order and their defaults, made by `_RecordType`
    _fields: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}
    #: fields left out of ``==`` and ``hash`` (a dataclass's ``field(compare=False)``)
    _uncompared: frozenset[str] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__} takes {len(fields)} fields, not {len(args)}")
        values = dict(zip(fields, args))
        for name, value in kwargs.items():
            if name not in fields or name in values:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated field {name!r}")
            values[name] = value
        for name in fields:
            if name in values:
                value = values[name]
            elif name in self._defaults:
                value = self._defaults[name]
            else:
                raise TypeError(f"{type(self).__name__}: missing field {name!r}")
            object.__setattr__(self, name, value)

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self._fields if n not in self._uncompared)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        shown = (f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__name__}({', '.join(shown)})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), tuple(getattr(self, n) for n in self._fields)

    def replace(self, **changes: Any) -> Any:
        """A copy with the fields named in ``changes`` changed (`dataclasses.replace`)."""
        return type(self)(**{**self.as_dict(), **changes})

    def as_dict(self) -> dict[str, Any]:
        """The fields by name, in order (not recursively)."""
        return {n: getattr(self, n) for n in self._fields}

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The names of the fields, in order."""
        return cls._fields
