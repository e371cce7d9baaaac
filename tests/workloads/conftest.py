"""Fixtures for the workload tests: run an entrypoint under torchrun (real processes, gloo, CPU)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sm_dist._resources import resource_dir

ENTRYPOINTS = resource_dir("entrypoints")
FINAL = re.compile(r"^\[sm_dist\] final step=(\d+) model_sha256=([0-9a-f]{64})$", re.M)
#: Guard against a hung process group only; never a speed assertion (STYLE.md point 13).
HANG_GUARD_S = 600


@dataclass(frozen=True)
class Run:
    """A finished run: exit code, output, and the final line's step and sha (None if absent)."""

    returncode: int
    out: str
    step: int | None
    sha: str | None


def torchrun_argv(port: int, nproc: int, script: str, *args: str) -> list[str]:
    """`python -m torch.distributed.run` on a free c10d port (never the default 29500/29400)."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", str(script), *args]


def worker_env() -> dict[str, str]:
    """The (already stripped) environment, one thread per worker: 2 cores shared by many ranks."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def parse_run(returncode: int, out: str) -> Run:
    found = FINAL.findall(out)
    step, sha = (int(found[-1][0]), found[-1][1]) if found else (None, None)
    return Run(returncode, out, step, sha)


@pytest.fixture
def torchrun(port_factory) -> Iterator[object]:
    """Yields run(script_name, *args, nproc=2, cwd=None) -> Run, for an entrypoint under torchrun."""

    def run(script: str, *args: str, nproc: int = 2, cwd: Path | None = None) -> Run:
        argv = torchrun_argv(port_factory(), nproc, ENTRYPOINTS / script, *args)
        proc = subprocess.run(argv, capture_output=True, text=True, env=worker_env(), cwd=cwd,
                              timeout=HANG_GUARD_S, check=False)
        return parse_run(proc.returncode, proc.stdout + proc.stderr)

    yield run


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def port_factory_module() -> Iterator[object]:
    """Like the root port_factory, for module-scoped fixtures (which cannot use function fixtures)."""
    yield _free_port
