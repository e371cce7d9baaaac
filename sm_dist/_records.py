"""`Record`: `typing.NamedTuple`'s class syntax, without importing `typing` at run time.

`sm-dist estimate-cost` starts in the core world on the standard library, and `typing` is a visible share of
its start-up: importing it, and building each record through `typing.NamedTuple`, which evaluates every
field's annotation (tests/bench/bench_cli_startup.py). A type checker sees `typing.NamedTuple` itself (the
`TYPE_CHECKING` branch), so a record is checked, and seen by a user's mypy, exactly as before; at run time
`class Row(Record): ...` is a tuple class as `collections.namedtuple` makes it (fields read by the same
getters, in order, with defaults, `_replace`, `_asdict`, `_make`, `_fields`, `_field_defaults`, its repr,
copy and pickle, the class's own methods and docstring), its annotations left as the strings
`from __future__ import annotations` writes. What namedtuple writes into each class is written once here
(`_Tuple`): namedtuple compiles a `__new__` per class, and estimate-cost defines about fifteen records.
tests/test_records.py holds it to `typing.NamedTuple`.

The modules that `estimate-cost` loads write `if TYPE_CHECKING:` against a module constant
(`TYPE_CHECKING = False`, as type checkers understand it) rather than `typing.TYPE_CHECKING`, for the same
reason; tests/test_imports.py checks that the command never imports `typing`.
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    from operator import itemgetter

    try:  # what collections.namedtuple reads its fields with
        from _collections import _tuplegetter
    except ImportError:  # pragma: no cover - other interpreters
        def _tuplegetter(index, doc):
            return property(itemgetter(index), doc=doc)

    #: What a class body may hold besides fields and methods (as typing.NamedTuple allows).
    _SPECIAL = frozenset({"__module__", "__qualname__", "__annotations__", "__doc__", "__slots__"})
    _RESERVED = frozenset({"_make", "_replace", "_asdict", "_fields", "_field_defaults", "__new__",
                           "__getnewargs__", "__match_args__"})

    class _Tuple(tuple):
        """What collections.namedtuple writes into every class, written once: a namedtuple compiles a `__new__`
        per class (eval), ~0.6 M instructions for each of the ~15 records estimate-cost defines."""

        __slots__ = ()
        _fields = ()
        _field_defaults = {}


        @classmethod
        def _bind(cls, args, kwargs):
            """The values of a call with keywords or defaults, or the TypeError a function of the fields raises."""
            fields = cls._fields
            where = f"{cls.__name__}.__new__()"
            if len(args) > len(fields):
                raise TypeError(f"{where} takes {len(fields) + 1} positional arguments but {len(args) + 1} were given")
            values = list(args)
            for name in fields[len(args):]:
                if name in kwargs:
                    values.append(kwargs.pop(name))
                elif name in cls._field_defaults:
                    values.append(cls._field_defaults[name])
                else:
                    raise TypeError(f"{where} missing required argument: {name!r}")
            for name in kwargs:
                raise TypeError(f"{where} got {'multiple values for' if name in fields else 'an unexpected keyword'} "
                                f"argument {name!r}")
            return values

        @classmethod
        def _make(cls, iterable):
            """Make a new record from a sequence or iterable."""
            result = tuple.__new__(cls, iterable)
            if len(result) != len(cls._fields):
                raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(result)}")
            return result

        def _replace(self, /, **kwds):
            """Return a new record replacing the fields given."""
            result = self._make(map(kwds.pop, self._fields, self))
            if kwds:
                raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
            return result

        def __repr__(self):
            return f"{self.__class__.__name__}({', '.join(f'{n}={v!r}' for n, v in zip(self._fields, self))})"

        def _asdict(self):
            """A new dict which maps field names to their values."""
            return dict(zip(self._fields, self))

        def __getnewargs__(self):
            """Return self as a plain tuple (copy and pickle)."""
            return tuple(self)

    _tuple_new = tuple.__new__

    def _new(size, defaults):
        """A record's `__new__`: fields given by position (most calls), the rest from `defaults` (the last
        fields' values), make the tuple at once; keywords are bound by `_bind`."""
        required = size - len(defaults)

        def __new__(cls, *args, **kwargs):
            if not kwargs:
                given = len(args)
                if given == size:
                    return _tuple_new(cls, args)
                if required <= given < size:
                    return _tuple_new(cls, args + defaults[given - required:])
            return _tuple_new(cls, cls._bind(args, kwargs))

        return __new__

    class _RecordMeta(type):
        def __new__(mcls, name, bases, namespace):
            if namespace.get("_root", False):
                return super().__new__(mcls, name, bases, namespace)
            annotations = namespace.get("__annotations__", {})
            fields = tuple(annotations)
            defaults = {f: namespace[f] for f in fields if f in namespace}
            if any(f not in namespace for f in fields[len(fields) - len(defaults):]):
                raise TypeError(f"{name}: a field without a default follows one with a default")
            body = {"__slots__": (), "_fields": fields, "_field_defaults": defaults, "__match_args__": fields,
                    "__module__": namespace["__module__"], "__qualname__": namespace.get("__qualname__", name),
                    "__annotations__": dict(annotations),
                    "__doc__": namespace.get("__doc__") or f"{name}({', '.join(fields)})"}
            for index, field in enumerate(fields):
                body[field] = _tuplegetter(index, f"Alias for field number {index}")
            body["__new__"] = _new(len(fields), tuple(defaults.values()))
            for key, value in namespace.items():
                if key in _SPECIAL or key in fields:
                    continue
                if key in _RESERVED:
                    raise AttributeError(f"{name}: cannot overwrite namedtuple attribute {key}")
                body[key] = value
            return type(name, (_Tuple,), body)

    Record = type.__new__(_RecordMeta, "Record", (), {"_root": True, "__module__": __name__})

__all__ = ["Record", "TYPE_CHECKING"]
