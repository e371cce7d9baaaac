"""init() under real launchers: torchrun (its agent's store) and Slurm's variables (own store)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _harness import child_env, start, torchrun_argv
from rt_spawn import free_port, run_ranks

pytestmark = pytest.mark.slow  # starts processes (tests/_process_guard.py)
HERE = Path(__file__).parent


def test_under_torchrun(tmp_path: Path) -> None:
    argv = torchrun_argv(free_port(), 2, HERE / "rt_torchrun_script.py", str(tmp_path / "out"))
    run = start(argv, child_env({"TRAINING_JOB_NAME": "job-7"}))
    assert run.wait() == [0], run.report()
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
