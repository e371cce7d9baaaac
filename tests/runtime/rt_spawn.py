"""Run a worker function in N real processes with torchrun-style environment variables.

`run_ranks(n, "module:function", args, port)` starts `python rt_spawn.py ...` n
times (RANK, WORLD_SIZE, MASTER_ADDR/PORT, ... set as torchrun would, without its agent
store), waits for all, and returns each rank's JSON result. A failing rank's stderr is
included in the AssertionError so a test failure explains itself.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
#: Generous: startup of a torch process on a loaded 2-core CI machine takes seconds.
PROCESS_TIMEOUT_S = 600


def rank_env(rank: int, world: int, port: int, nodes: int = 1) -> dict[str, str]:
    """torchrun's variables for `rank` of `world` processes spread evenly over `nodes` hosts."""
    per_node = world // nodes
    return {
        "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank % per_node),
        "LOCAL_WORLD_SIZE": str(per_node), "GROUP_RANK": str(rank // per_node),
        "GROUP_WORLD_SIZE": str(nodes), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    }


def slurm_env(rank: int, world: int, port: int) -> dict[str, str]:
    """What `srun --ntasks=world` on one node would export (plus MASTER_PORT)."""
    return {
        "SLURM_NTASKS": str(world), "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank),
        "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "127.0.0.1", "SLURM_JOB_NUM_NODES": "1",
        "SLURM_TASKS_PER_NODE": str(world), "SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "train",
        "MASTER_PORT": str(port),
    }


def sagemaker_env(rank: int, world: int, port: int, root: Path) -> dict[str, str]:
    """One process per emulated host: its own /opt/ml root with resourceconfig.json."""
    config = root / f"algo-{rank + 1}" / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    hosts = [f"algo-{i + 1}" for i in range(world)]
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": hosts[rank], "hosts": hosts}))
    return {"SM_DIST_OPT_ML": str(config.parents[1]), "SM_DIST_RDZV_HOST": "127.0.0.1",
            "SM_MASTER_PORT": str(port), "TRAINING_JOB_NAME": "local-job"}


def run_ranks(world: int, target: str, args: dict[str, Any], port: int, nodes: int = 1,
              extra_env: dict[str, str] | None = None, launcher: str = "torchrun") -> list[Any]:
    """Start `world` processes running `target(**args)`; return their results by rank."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for rank in range(world):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "TORCHELASTIC", "PET_", "SLURM_"))}
            if launcher == "slurm":
                names = slurm_env(rank, world, port)
            elif launcher == "sagemaker":
                names = sagemaker_env(rank, world, port, Path(tmp))
            else:
                names = rank_env(rank, world, port, nodes)
            env.update(names, OMP_NUM_THREADS="1", **(extra_env or {}))
            out = Path(tmp) / f"rank{rank}.json"
            cmd = [sys.executable, str(HERE / "rt_spawn.py"), target, json.dumps(args), str(out)]
            procs.append((subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True), out))
        results, failures = [], []
        for rank, (proc, out) in enumerate(procs):
            log, _ = proc.communicate(timeout=PROCESS_TIMEOUT_S)
            if proc.returncode != 0:
                failures.append(f"--- rank {rank} exit {proc.returncode}\n{log[-4000:]}")
            else:
                results.append(json.loads(out.read_text()))
        assert not failures, "\n".join(failures)
        return results


def _main() -> None:
    target, args, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    sys.path.insert(0, str(HERE))  # worker modules (rt_workers, ...) live next to this file
    module_name, func = target.split(":")
    result = getattr(importlib.import_module(module_name), func)(**args)
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    _main()


def free_port() -> int:
    """A free 127.0.0.1 port (as the port_factory fixture; usable from module-scoped fixtures)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
