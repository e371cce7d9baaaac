"""Fixtures of the checkpoint tests: start real ranks of train_script.py and read their results."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _harness import (
    Group,
    child_env,
    free_port,
    rank_env,
    start,
    start_ranks,
    torchrun_argv,
)

SCRIPT = Path(__file__).with_name("train_script.py")


class Kit:
    """Starts runs of train_script.py (kills leftovers at teardown) and reads rank 0's events.

    A run is a `_harness.Group`: `procs`, `wait()` -> exit codes, `output`, `kill()`.
    """

    script = SCRIPT

    def __init__(self) -> None:
        self.runs: list[Group] = []

    def spawn(self, nprocs: int, args: list[str], env: dict[str, str] | None = None) -> Group:
        """`nprocs` ranks joined through a TCPStore on 127.0.0.1 (no torchrun)."""
        port = free_port()
        envs = [child_env({**(env or {}), **rank_env(rank, nprocs, port)}) for rank in range(nprocs)]
        self.runs.append(start_ranks([sys.executable, str(SCRIPT), *args], envs))
        return self.runs[-1]

    def torchrun(self, nprocs: int, args: list[str], *, max_restarts: int, env: dict[str, str] | None = None) -> Group:
        """torchrun with c10d rendezvous on a free 127.0.0.1 port, unshared store (docs/PLATFORM.md §2.3)."""
        extra = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **(env or {})}
        argv = torchrun_argv(free_port(), nprocs, SCRIPT, *args, max_restarts=max_restarts, monitor_interval=0.2)
        self.runs.append(start(argv, child_env(extra)))
        return self.runs[-1]

    @staticmethod
    def events(path: Path) -> list[dict]:
        """The JSON lines rank 0 wrote (all attempts)."""
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    @staticmethod
    def losses(events: list[dict]) -> dict[int, float]:
        """step -> loss; a step run twice (after a restart) keeps its last value."""
        return {e["step"]: e["loss"] for e in events if e["event"] == "step"}

    @staticmethod
    def final_sha(events: list[dict]) -> str | None:
        finals = [e for e in events if e["event"] == "final"]
        return finals[-1]["sha256"] if finals else None

    @staticmethod
    def resumes(events: list[dict]) -> list[int]:
        return [e["step"] for e in events if e["event"] == "resume"]


@pytest.fixture
def kit() -> Iterator[Kit]:
    """Yields a Kit; every process it started is killed at teardown."""
    k = Kit()
    yield k
    for run in k.runs:
        run.kill()


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[dict]]:
    """Events of an uninterrupted 2-rank DDP run of 24 steps (saving every 4)."""
    root = tmp_path_factory.mktemp("baseline")
    out = root / "events.jsonl"
    k = Kit()
    run = k.spawn(2, ["--uri", str(root / "ckpt"), "--out", str(out)])
    codes = run.wait()
    assert codes == [0, 0], run.output
    yield k.events(out)
