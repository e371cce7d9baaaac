"""The GPU check kit and `sm-dist calibrate` on CPU: what runs without a GPU, run for real.

`python -m sm_dist.selfcheck` in a subprocess, as a user starts it: the strategies train with gloo
at world size 2, the ranks agree, the persistent memory matches the estimator, the fp16 scaler
skips an inf step, and every GPU-only part is one SKIP line in the output and in the report.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _harness import child_env

import sm_dist
from sm_dist.errors import ConfigError
from sm_dist.estimator import hf_config
from sm_dist.tools.measure_cli import TOLERANCE

pytestmark = pytest.mark.slow  # starts processes (tests/_process_guard.py)

TINY_LLAMA = {"model_type": "llama", "hidden_size": 128, "intermediate_size": 344, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 512, "max_position_embeddings": 64}


def _run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], env=child_env(), capture_output=True, text=True, timeout=timeout)


def test_the_kit_runs_what_a_cpu_can_and_says_what_it_skipped(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = _run("-m", "sm_dist.selfcheck", "--device", "cpu", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["format"] == "sm_dist.selfcheck/1" and report["ok"] is True and report["device"] == "cpu"
    age = dt.datetime.now(dt.timezone.utc) - dt.datetime.fromisoformat(report["date"])
    assert dt.timedelta(0) <= age < dt.timedelta(minutes=10)
    assert report["platform"]["torch"] == torch.__version__ and report["world_size"] == 2
    assert set(report["strategies"]) == {"ddp", "zero1", "zero2", "fsdp"}
    for name, result in report["strategies"].items():
        assert result["ok"] and result["backend"] == "gloo" and result["world_size"] == 2, name
        assert result["ranks_agree"] and result["loss_fell"] and result["finite"]
        assert result["mfu"] is None and "peak_memory" not in result  # GPU-only
        diff = result["persistent_memory"]["relative_difference"]
        assert set(diff) == {"params", "grads", "optimizer"}
        assert all(abs(v) <= TOLERANCE for v in diff.values()), (name, diff)
    scaler = report["grad_scaler"]
    assert scaler["ok"] and scaler["autocast_dtype"] == "torch.float16"
    assert not scaler["inf_step_changed_weights"] and scaler["scale_after_inf"] == scaler["scale_after_finite_steps"] / 2
    assert "skipped" in report["sync_batchnorm"]
    skipped = report["skipped"]
    for part in ("dp", "hsdp", "NCCL", "peak CUDA memory", "MFU", "SyncBatchNorm"):
        assert any(part in line for line in skipped), part
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("SKIP ")] == [f"SKIP {line}" for line in skipped]
    assert sum(line.split()[0] in report["strategies"] for line in lines) == 4  # one line per strategy


def test_calibrate_on_cpu_writes_a_record_that_calibrates_no_gpu(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_LLAMA))
    out = tmp_path / "cal.json"
    done = _run("-m", "sm_dist.cli", "calibrate", "--model", str(config), "--steps", "2", "--warmup", "1",
                "--device", "cpu", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert record["source"] == "calibrate" and record["gpu_family"] is None and record["mfu"] is None
    # the module built from the config has exactly the parameters the estimator counts for it
    assert record["params"] == hf_config.read(config).params
    assert record["flops_per_token"] == 6 * record["params"] and record["tokens_per_second"] > 0
    assert (record["seq_len"], record["micro_batch"], record["steps"]) == (64, 1, 2)
    with pytest.raises(ConfigError, match="not a catalog GPU"):
        sm_dist.estimate(params=1e8, tokens=1e9, calibration=out)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: calibrate does not refuse here")
def test_calibrate_without_a_gpu_refuses_in_one_line(tmp_path: Path) -> None:
    done = _run("-m", "sm_dist.cli", "calibrate", "--model", "gpt2", "--out", str(tmp_path / "cal.json"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "no CUDA GPU" in done.stderr and "--device cpu" in done.stderr
    assert not (tmp_path / "cal.json").exists()


@pytest.mark.parametrize(("argv", "words"), [
    (["--model", "llama9"], "did you mean"), (["--model", "gpt2", "--steps", "0"], "--steps"),
    (["--model", "nope_module:fn"], "importable"), (["--model", "gpt2", "--precision", "fp8"], "precision"),
])
def test_calibrate_bad_input_is_one_line(tmp_path: Path, argv: list[str], words: str) -> None:
    done = _run("-m", "sm_dist.cli", "calibrate", *argv, "--out", str(tmp_path / "cal.json"), timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert words in done.stderr
