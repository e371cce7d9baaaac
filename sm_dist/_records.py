"""`Record`: `typing.NamedTuple`'s class syntax, without importing `typing` at run time.

`sm-dist estimate-cost` starts in the core world on the standard library, and `typing` is a visible share of
its start-up: importing it, and building each record through `typing.NamedTuple`, which evaluates every
field's annotation (tests/bench/bench_cli_startup.py). A type checker sees `typing.NamedTuple` itself (the
`TYPE_CHECKING` branch), so a record is checked, and seen by a user's mypy, exactly as before; at run time
`class Row(Record): ...` is the same `collections.namedtuple` class `typing.NamedTuple` makes (fields in
order, defaults, `_replace`, `_asdict`, `_fields`, the class's methods and docstring), its annotations left
as the strings `from __future__ import annotations` writes.

The modules that `estimate-cost` loads write `if TYPE_CHECKING:` against a module constant
(`TYPE_CHECKING = False`, as type checkers understand it) rather than `typing.TYPE_CHECKING`, for the same
reason; tests/test_imports.py checks that the command never imports `typing`.
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NamedTuple as Record
else:
    #: What a class body may hold besides fields and methods (as typing.NamedTuple allows).
    _SPECIAL = frozenset({"__module__", "__qualname__", "__annotations__", "__doc__", "__slots__"})

    class _RecordMeta(type):
        def __new__(mcls, name, bases, namespace):
            if namespace.get("_root", False):
                return super().__new__(mcls, name, bases, namespace)
            fields = list(namespace.get("__annotations__", {}))
            defaults = [namespace[f] for f in fields if f in namespace]
            if any(f not in namespace for f in fields[len(fields) - len(defaults):]):
                raise TypeError(f"{name}: a field without a default follows one with a default")
            record = namedtuple(name, fields, defaults=defaults or None, module=namespace["__module__"])
            record.__annotations__ = dict(namespace.get("__annotations__", {}))
            record.__qualname__ = namespace.get("__qualname__", name)
            if "__doc__" in namespace:
                record.__doc__ = namespace["__doc__"]
            for key, value in namespace.items():
                if key in _SPECIAL or key in fields:
                    continue
                if key in ("_make", "_replace", "_asdict", "_fields", "_field_defaults"):
                    raise AttributeError(f"{name}: cannot overwrite namedtuple attribute {key}")
                setattr(record, key, value)
                if hasattr(value, "__set_name__"):
                    value.__set_name__(record, key)
            return record

    Record = type.__new__(_RecordMeta, "Record", (), {"_root": True, "__module__": __name__})

__all__ = ["Record", "TYPE_CHECKING"]
