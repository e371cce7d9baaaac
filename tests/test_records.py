"""sm_dist._records.Record makes the class typing.NamedTuple makes, without importing typing at run time."""

from __future__ import annotations

import typing

import pytest

from sm_dist._records import Record


class Point(Record):
    """A point."""

    x: int
    y: int = 0
    label: str = "p"  #: a comment on a field

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)

    def moved(self, dx: int) -> Point:
        return self._replace(x=self.x + dx)


class TypingPoint(typing.NamedTuple):
    """A point."""

    x: int
    y: int = 0
    label: str = "p"


def test_a_record_is_the_namedtuple_typing_makes() -> None:
    p = Point(1, label="q")
    assert p == (1, 0, "q") == TypingPoint(1, label="q")
    assert isinstance(p, tuple) and p.x == 1 and p[2] == "q"
    assert Point._fields == TypingPoint._fields == ("x", "y", "label")
    assert Point._field_defaults == TypingPoint._field_defaults == {"y": 0, "label": "p"}
    assert p._asdict() == {"x": 1, "y": 0, "label": "q"}
    assert Point._make([3, 4, "r"]).norm1 == 7
    assert p.moved(2) == Point(3, 0, "q") and type(p.moved(2)) is Point
    assert repr(p) == "Point(x=1, y=0, label='q')"
    assert Point.__doc__ == "A point." and Point.__name__ == "Point" and Point.__module__ == __name__
    assert Point.__slots__ == () and not hasattr(p, "__dict__")
    assert list(Point.__annotations__) == ["x", "y", "label"]


def test_a_record_can_be_subclassed_like_a_namedtuple() -> None:
    class Named(Point):
        __slots__ = ()

        def describe(self) -> str:
            return f"{self.label} at {self.x},{self.y}"

    assert Named(1, 2).describe() == "p at 1,2" and Named(1, 2) == Point(1, 2)


def test_a_field_without_a_default_after_one_with_a_default_is_refused_as_typing_refuses_it() -> None:
    with pytest.raises(TypeError, match="without a default follows"):
        class Bad(Record):  # noqa: F841
            a: int = 0
            b: int
    with pytest.raises(TypeError):
        class BadTyping(typing.NamedTuple):  # noqa: F841
            a: int = 0
            b: int


def test_a_namedtuple_attribute_cannot_be_overwritten() -> None:
    with pytest.raises(AttributeError, match="_replace"):
        class Bad(Record):  # noqa: F841
            a: int

            def _replace(self) -> None: ...


def test_calls_bind_as_a_namedtuples_new_binds_them() -> None:
    assert Point(x=1, y=2) == Point(1, 2) == Point(1, y=2) == TypingPoint(1, 2)
    assert Point(1, 2, "r") == (1, 2, "r") and Point(1) == (1, 0, "p") == TypingPoint(1) and Point(1, 5) == (1, 5, "p")
    calls = ((), {}), ((1, 2, "r", 4), {}), ((1,), {"x": 2}), ((1,), {"z": 2})
    for args, kwargs in calls:  # each refused by both, ours naming the record
        with pytest.raises(TypeError, match=r"Point\.__new__\(\)"):
            Point(*args, **kwargs)
        with pytest.raises(TypeError):
            TypingPoint(*args, **kwargs)
    with pytest.raises(TypeError, match="Expected 3 arguments, got 2"):
        Point._make([1, 2])
    with pytest.raises(ValueError, match="unexpected field names"):
        Point(1)._replace(z=3)


def test_a_record_copies_and_pickles() -> None:
    import copy
    import pickle

    p = Point(1, 2, "q")
    assert copy.copy(p) == copy.deepcopy(p) == pickle.loads(pickle.dumps(p)) == p
    assert type(pickle.loads(pickle.dumps(p))) is Point
