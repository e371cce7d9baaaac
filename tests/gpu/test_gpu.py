"""The GPU check kit and calibrate on this machine's GPUs (NCCL, CUDA memory, bf16 MFU).

Skipped without CUDA. On a GPU host: `python -m pytest tests/gpu -m "" -q` (a few minutes); the same
figures, with more steps, come from `python -m sm_dist.selfcheck --out report.json`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _harness import child_env

import sm_dist
from sm_dist.estimator.calibration import family_of

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA GPU: torch.cuda.is_available() is False on this machine"),
              pytest.mark.slow]  # every test runs a child process (tests/_process_guard.py)
#: Peak CUDA memory against the estimator's allocator figure (its total less CUDA context and NCCL buffers).
MEMORY_TOLERANCE = 0.25


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], env=child_env(), capture_output=True, text=True, timeout=1800)


def test_every_strategy_runs_with_nccl_on_every_gpu(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = _run("-m", "sm_dist.selfcheck", "--out", str(out), "--steps", "5")
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    gpus = torch.cuda.device_count()
    assert report["device"] == "cuda" and report["world_size"] == gpus and report["ok"]
    assert set(report["strategies"]) == {"ddp", "zero1", "zero2", "fsdp"} | ({"dp"} if gpus > 1 else set())
    family = family_of(torch.cuda.get_device_name(0))
    for name, result in report["strategies"].items():
        assert result["ok"] and result["backend"] == "nccl", name
        assert abs(result["peak_memory"]["relative_difference"]) <= MEMORY_TOLERANCE, (name, result["peak_memory"])
        assert (result["mfu"] is None) == (family is None)
        if family is not None:
            assert 0 < result["mfu"] <= 1
    assert report["sync_batchnorm"]["ok"] and report["sync_batchnorm"]["world_size"] == gpus
    assert report["grad_scaler"]["ok"] and report["grad_scaler"]["device"] == "cuda"
    assert report["platform"]["nccl"] and report["platform"]["devices"][0] == torch.cuda.get_device_name(0)


def test_calibrate_measures_this_gpu_and_the_estimate_uses_it(tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    done = _run("-m", "sm_dist.cli", "calibrate", "--model", "llama2-7b", "--layers", "2", "--seq-len", "1024",
                "--steps", "5", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert record["device_name"] == torch.cuda.get_device_name(0) and record["peak_memory_bytes"] > 0
    family = family_of(record["device_name"])
    if family is None:
        pytest.skip(f"{record['device_name']} is not a GPU of the catalog: its record calibrates no estimate")
    assert record["gpu_family"] == family and 0 < record["mfu"] <= 1
    est = sm_dist.estimate(model="llama2-7b", tokens=1e10, instance_types=["ml.p4d.24xlarge", "ml.p5.48xlarge"],
                           instance_counts=[1], calibration=out)
    for row in est.rows:
        if row.runnable:
            calibrated = row.instance_type == {"A100": "ml.p4d.24xlarge", "H100": "ml.p5.48xlarge"}.get(family)
            assert (row.mfu == pytest.approx(record["mfu"])) == calibrated
