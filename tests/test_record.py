"""`Record`: frozen values that compare, hash, print, pickle and replace as frozen
dataclasses do."""

from __future__ import annotations

import pickle

import pytest

from nbspam.core.record import Record
from nbspam.core.settings import Settings, TokenizerConfig


class Point(Record):
    x: int
    y: int = 0
    """the second coordinate"""


def test_fields_in_order_with_defaults_positional_or_by_name():
    assert Point.fields() == ("x", "y")
    assert Point(1).as_dict() == {"x": 1, "y": 0}
    assert Point(1, 2) == Point(y=2, x=1)
    assert Point(1) != Point(1, 1)
    assert Point(1) != (1, 0)
    assert hash(Point(1, 2)) == hash(Point(x=1, y=2))
    assert repr(Point(1, "a")) == "Point(x=1, y='a')"


def test_wrong_fields_are_refused_as_a_dataclass_refuses_them():
    with pytest.raises(TypeError, match="missing field 'x'"):
        Point()
    with pytest.raises(TypeError, match="'z'"):
        Point(1, z=3)
    with pytest.raises(TypeError, match="'x'"):
        Point(1, x=2)
    with pytest.raises(TypeError, match="takes 2 fields, not 3"):
        Point(1, 2, 3)


def test_frozen_slotted_and_replaced_into_a_copy():
    point = Point(1, 2)
    with pytest.raises(AttributeError, match="frozen Point"):
        point.x = 5
    with pytest.raises(AttributeError, match="frozen Point"):
        del point.y
    assert not hasattr(point, "__dict__")
    assert point.replace(y=7) == Point(1, 7)
    assert point == Point(1, 2)


def test_pickled_and_back_equal():
    point = Point(3, (4, 5))
    assert pickle.loads(pickle.dumps(point)) == point
    settings = Settings(tokenizer=TokenizerConfig(ngrams=2), given=frozenset({"ngrams"}))
    back = pickle.loads(pickle.dumps(settings))
    assert back == settings and back.given == frozenset({"ngrams"})


def test_uncompared_fields_are_left_out_of_equality_and_hash():
    given = Settings(given=frozenset({"alpha"}))
    assert given == Settings() and hash(given) == hash(Settings())
    assert repr(given).endswith("stop_words='none', given=frozenset({'alpha'}))")
    assert given.replace(stop_words="english").given == frozenset({"alpha"})
