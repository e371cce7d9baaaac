"""Fixtures of the checkpoint tests: start real ranks of train_script.py, read their results."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("train_script.py")
#: Guard against a hung run (never a speed assertion): far above the ~10 s a run takes.
HANG_GUARD_S = 300


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _base_env(extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


class Ranks:
    """N processes of train_script.py joined by a TCPStore on 127.0.0.1 (no torchrun)."""

    def __init__(self, nprocs: int, args: list[str], env: dict[str, str] | None = None) -> None:
        port = str(_free_port())
        self.procs = []
        for rank in range(nprocs):
            rank_env = _base_env(env)
            rank_env.update({"RANK": str(rank), "WORLD_SIZE": str(nprocs), "LOCAL_RANK": str(rank),
                             "LOCAL_WORLD_SIZE": str(nprocs), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
            self.procs.append(subprocess.Popen([sys.executable, str(SCRIPT), *args], env=rank_env,
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))

    def wait(self) -> list[int]:
        codes = [p.wait(timeout=HANG_GUARD_S) for p in self.procs]
        self.output = "".join(p.stdout.read() for p in self.procs)
        return codes

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)


def read_events(path: Path) -> list[dict]:
    """The JSON lines rank 0 wrote."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def losses(events: list[dict]) -> dict[int, float]:
    """step -> loss; a step run twice (after a restart) keeps its last value."""
    return {e["step"]: e["loss"] for e in events if e["event"] == "step"}


def final_sha(events: list[dict]) -> str:
    finals = [e for e in events if e["event"] == "final"]
    assert finals, "the run never finished"
    return finals[-1]["sha256"]


@pytest.fixture
def spawn() -> Iterator[type[Ranks]]:
    """Yields the Ranks class; every process it started is killed at teardown."""
    started: list[Ranks] = []

    class Tracked(Ranks):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    yield Tracked
    for ranks in started:
        ranks.kill()
        for p in ranks.procs:
            p.wait()


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[dict]]:
    """Events of an uninterrupted 2-rank DDP run of 24 steps (saving every 4)."""
    root = tmp_path_factory.mktemp("baseline")
    out = root / "events.jsonl"
    ranks = Ranks(2, ["--uri", str(root / "ckpt"), "--out", str(out)])
    codes = ranks.wait()
    assert codes == [0, 0], ranks.output
    yield read_events(out)
