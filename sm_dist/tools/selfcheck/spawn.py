"""Rank processes for the check kit: torchrun-style variables on a free port, results as JSON files.

Each rank is `python -m sm_dist.tools.selfcheck rank JOB --config FILE --out FILE` with RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/MASTER_PORT in its environment (never a fixed port: the
operating system picks a free one), so `sm_dist.runtime.init()` joins the group as it would under
torchrun: NCCL with GPUs, gloo without.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sm_dist.errors import SmDistError

#: Ceiling for one job's ranks (model builds and a few steps per strategy).
RANK_TIMEOUT_S = 1200


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _environment(rank: int, world: int, port: int, cpu: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "SM_DIST_JOB_SPEC"))}
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
               GROUP_RANK="0", GROUP_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_ranks(job: str, config: Mapping[str, Any], world: int, *, cpu: bool) -> list[dict[str, Any]]:
    """Run `job` (see __main__: strategies, syncbn) in `world` processes; their results by rank."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="sm-dist-selfcheck-") as tmp:
        cfg = Path(tmp) / "config.json"
        cfg.write_text(json.dumps(config), encoding="utf-8")
        procs = [
            subprocess.Popen([sys.executable, "-m", "sm_dist.tools.selfcheck", "rank", job, "--config", str(cfg),
                              "--out", str(Path(tmp) / f"{rank}.json")],
                             env=_environment(rank, world, port, cpu), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
            for rank in range(world)
        ]
        try:
            logs = [p.communicate(timeout=RANK_TIMEOUT_S)[0] for p in procs]
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise SmDistError(f"selfcheck {job}: the ranks did not finish within {RANK_TIMEOUT_S} s") from None
        for rank, (proc, log) in enumerate(zip(procs, logs)):
            if proc.returncode != 0:
                tail = " | ".join(log.strip().splitlines()[-3:])
                raise SmDistError(f"selfcheck {job}: rank {rank} failed (exit {proc.returncode}): {tail}")
        return [json.loads((Path(tmp) / f"{rank}.json").read_text(encoding="utf-8")) for rank in range(world)]


__all__ = ["RANK_TIMEOUT_S", "free_port", "run_ranks"]
