"""Fixtures of the checkpoint tests: start real ranks of train_script.py and read their results."""

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


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


class Run:
    """Processes of one run; `wait()` returns their exit codes and keeps their output."""

    def __init__(self, procs: list[subprocess.Popen]) -> None:
        self.procs = procs
        self.output = ""

    def wait(self) -> list[int]:
        codes = [p.wait(timeout=HANG_GUARD_S) for p in self.procs]
        self.output = "".join(p.stdout.read() for p in self.procs if p.stdout)
        return codes

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()


class Kit:
    """Starts runs of train_script.py (kills leftovers at teardown) and reads rank 0's events."""

    script = SCRIPT

    def __init__(self) -> None:
        self.runs: list[Run] = []

    def spawn(self, nprocs: int, args: list[str], env: dict[str, str] | None = None) -> Run:
        """`nprocs` ranks joined through a TCPStore on 127.0.0.1 (no torchrun)."""
        port = str(_free_port())
        procs = []
        for rank in range(nprocs):
            rank_env = _env(env)
            rank_env.update({"RANK": str(rank), "WORLD_SIZE": str(nprocs), "LOCAL_RANK": str(rank),
                             "LOCAL_WORLD_SIZE": str(nprocs), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
            procs.append(subprocess.Popen([sys.executable, str(SCRIPT), *args], env=rank_env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        self.runs.append(Run(procs))
        return self.runs[-1]

    def torchrun(self, nprocs: int, args: list[str], *, max_restarts: int, env: dict[str, str] | None = None) -> Run:
        """torchrun with c10d rendezvous on a free 127.0.0.1 port, unshared store (docs/PLATFORM.md §2.3)."""
        extra = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **(env or {})}
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc-per-node={nprocs}",
               f"--max-restarts={max_restarts}", "--rdzv-backend=c10d",
               f"--rdzv-endpoint=127.0.0.1:{_free_port()}", "--monitor-interval=0.2", str(SCRIPT), *args]
        proc = subprocess.Popen(cmd, env=_env(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.runs.append(Run([proc]))
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
