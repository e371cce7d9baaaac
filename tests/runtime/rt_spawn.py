"""Run a worker function of tests/runtime in N real processes with a launcher's variables.

`run_ranks(n, "module:function", args, port)` starts n processes through the suite's harness
(tests/_harness.py) with the variables torchrun (default), Slurm or SageMaker would give them,
waits for all, and returns each rank's JSON result. A failing rank's output is in the
AssertionError, so a failure explains itself.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from _harness import call_in_ranks, child_env, free_port, rank_env

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
__all__ = ["free_port", "rank_env", "run_ranks"]  # free_port: re-exported for the tests that import it here


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
    """Start `world` processes running `target(**args)` (a function in tests/runtime); results by rank."""
    with tempfile.TemporaryDirectory() as tmp:
        envs = []
        for rank in range(world):
            if launcher == "slurm":
                names = slurm_env(rank, world, port)
            elif launcher == "sagemaker":
                names = sagemaker_env(rank, world, port, Path(tmp))
            else:
                names = rank_env(rank, world, port, nodes)
            envs.append(child_env({**names, **(extra_env or {})}))
        return call_in_ranks(target, args, envs, HERE, cwd=REPO)
