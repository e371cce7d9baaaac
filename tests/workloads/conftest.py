"""Fixtures for the workload tests: run an entrypoint under torchrun (real processes, gloo, CPU).

Ports, child environments and launching come from the suite's harness (tests/_harness.py);
`worker_env` is re-exported for the test modules here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _harness import child_env as worker_env
from _harness import start, torchrun_argv

from sm_dist._resources import resource_dir
from sm_dist.contract.log_lines import FinalLine, read_line

__all__ = ["ENTRYPOINTS", "Run", "final_lines", "parse_run", "worker_env"]

ENTRYPOINTS = resource_dir("entrypoints")


@dataclass(frozen=True)
class Run:
    """A finished run: exit code, output, and the final line's step and sha (None if absent)."""

    returncode: int
    out: str
    step: int | None
    sha: str | None


def final_lines(out: str) -> list[FinalLine]:
    """Every `[sm_dist] final ...` line in `out`, read by the log-line contract."""
    return [line for line in map(read_line, out.splitlines()) if isinstance(line, FinalLine)]


def parse_run(returncode: int, out: str) -> Run:
    found = final_lines(out)
    step, sha = (found[-1].step, found[-1].model_sha256) if found else (None, None)
    return Run(returncode, out, step, sha)


@pytest.fixture
def torchrun(port_factory) -> Iterator[object]:
    """Yields run(script_name, *args, nproc=2, cwd=None) -> Run, for an entrypoint under torchrun."""

    def run(script: str, *args: str, nproc: int = 2, cwd: Path | None = None) -> Run:
        group = start(torchrun_argv(port_factory(), nproc, ENTRYPOINTS / script, *args), worker_env(), cwd)
        (code,) = group.wait()
        return parse_run(code, group.output)

    yield run

