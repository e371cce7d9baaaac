"""init() under real launchers: torchrun (its agent's store) and Slurm's variables (own store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rt_spawn import PROCESS_TIMEOUT_S, free_port, run_ranks

HERE = Path(__file__).parent


def test_under_torchrun(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SLURM_", "TORCHELASTIC_", "PET_"))}
    env.update(OMP_NUM_THREADS="1", TRAINING_JOB_NAME="job-7")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}",
           str(HERE / "rt_torchrun_script.py"), str(tmp_path / "out")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads((tmp_path / f"out.{rank}").read_text()) for rank in range(2)]
    for rank, result in enumerate(results):
        assert result == {"rank": rank, "launcher": "torchrun", "job_name": "job-7", "same_weights": True}


def test_under_slurm_variables() -> None:
    results = run_ranks(2, "rt_workers:train", {"runs": [["ddp", "fp32"]], "steps": 2}, free_port(),
                        launcher="slurm")
    assert [r["launcher"] for r in results] == ["slurm", "slurm"]
    assert results[0]["ddp/fp32"]["losses"] == results[1]["ddp/fp32"]["losses"]
    assert results[0]["ddp/fp32"]["local_digest"] == results[1]["ddp/fp32"]["local_digest"]


def test_under_sagemaker_one_process_per_host() -> None:
    """ModelTrainer without torchrun: ranks from resourceconfig.json, store on the first host."""
    results = run_ranks(2, "rt_workers:train", {"runs": [["fsdp", "fp32"]], "steps": 2}, free_port(),
                        launcher="sagemaker")
    assert [r["launcher"] for r in results] == ["sagemaker", "sagemaker"]
    assert results[0]["fsdp/fp32"]["losses"] == results[1]["fsdp/fp32"]["losses"]
