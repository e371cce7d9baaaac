"""Fixtures of the runtime tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # rt_spawn / rt_workers are imported by module name
    sys.path.insert(0, _HERE)


@pytest.fixture
def run_ranks(port_factory) -> Iterator[object]:
    """Yields run(world, "module:func", args, nodes=1): results of real gloo processes by rank."""
    from rt_spawn import run_ranks as _run

    def run(world: int, target: str, args: dict, nodes: int = 1) -> list:
        return _run(world, target, args, port_factory(), nodes=nodes)

    yield run
