"""Fixtures of the notebook tests. Each yields one thing."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest


class _Handle:
    """What IPython's display(..., display_id=True) returns: records every update."""

    def __init__(self, shown: list[dict[str, str]]) -> None:
        self.shown = shown

    def update(self, data: dict[str, str], raw: bool = False) -> None:
        assert raw
        self.shown.append(data)


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, str]]]:
    """A stand-in for a Jupyter kernel's IPython: a shell with a kernel, a display that records;
    yields what was displayed (the first display, then each update)."""
    shown: list[dict[str, str]] = []

    def display(data: dict[str, str], raw: bool = False, display_id: bool = False) -> _Handle:
        assert raw and display_id
        shown.append(data)
        return _Handle(shown)

    shell = types.SimpleNamespace(kernel=object())
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell  # type: ignore[attr-defined]
    display_module = types.ModuleType("IPython.display")
    display_module.display = display  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display_module)
    yield shown
