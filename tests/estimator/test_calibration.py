"""Calibration: a measured throughput replaces the MFU prior of its GPU family, and only of that one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import sm_dist
from sm_dist.catalog import get_instance
from sm_dist.errors import ConfigError
from sm_dist.estimator import calibration
from sm_dist.estimator.cost import STARTUP_SECONDS
from sm_dist.estimator.grid import Row
from sm_dist.estimator.result import Estimate
from sm_dist.estimator.timing import MFU_PRIORS

PARAMS = 400_000_000  #: the calibrated and the estimated model (a GPT-like shape from the count)
SEQ, BATCH = 1024, 32  #: sequences per optimizer step: one GPU, micro-batch 1, 32 accumulation steps


def _job(tokens_per_second: float, instance: str = "ml.g5.xlarge") -> calibration.Calibration:
    """A finished one-hour job on one instance that trained at `tokens_per_second` per GPU."""
    gpus = get_instance(instance).gpus
    return calibration.from_job(tokens=tokens_per_second * 3600 * gpus, training_seconds=3600, instance_type=instance,
                                params=PARAMS, model="gpt-like-400M", date="2026-11-25T00:00:00+00:00")


def _estimate(**kw: object) -> Estimate:
    args = dict(params=PARAMS, tokens=1e10, seq_len=SEQ, global_batch=BATCH, micro_batch=1,
                activation_checkpointing="selective", instance_types=["ml.g5.xlarge", "ml.p4d.24xlarge"],
                instance_counts=[1], strategies=["ddp", "fsdp"])
    args.update(kw)
    return sm_dist.estimate(**args)


def _row(est: Estimate, instance: str, strategy: str = "ddp") -> Row:
    return next(r for r in est.rows if r.instance_type == instance and r.strategy.value == strategy)


def test_a_job_gives_tokens_per_second_per_gpu_and_the_mfu_they_imply() -> None:
    record = calibration.from_job(tokens=8e9, training_seconds=10_000, instance_type="ml.p4d.24xlarge",
                                  instance_count=2, params=PARAMS)
    assert record.gpu_family == "A100" and record.gpus == 16 and record.source == "job"
    assert record.tokens_per_second == pytest.approx(8e9 / 10_000 / 16)
    assert record.flops_per_token == 6 * PARAMS
    assert record.mfu == pytest.approx(6 * PARAMS * 50_000 / 312e12)
    full = calibration.from_job(tokens=8e9, training_seconds=10_000, instance_type="ml.p4d.24xlarge",
                                instance_count=2, params=PARAMS, full_recompute=True)
    assert full.mfu == pytest.approx(record.mfu * 8 / 6)  # the recompute's FLOPs were done too


def test_step_time_and_cost_follow_the_measured_throughput_exactly() -> None:
    """On the calibrated GPU, the same model's compute takes tokens ÷ measured tokens per second, and
    the dollars follow the hours; twice the throughput halves both (start-up aside)."""
    slow, fast = _job(20_000), _job(40_000)
    a10g = get_instance("ml.g5.xlarge")
    rows = []
    for record in (slow, fast):
        row = _row(_estimate(calibration=record), "ml.g5.xlarge")
        assert row.mfu == pytest.approx(record.mfu)
        assert row.step.total == pytest.approx(SEQ * BATCH / record.tokens_per_second, rel=1e-12)  # one GPU: no comm
        # billed hours: the steps and the start-up, over the share of billed time that trains (failures, saves)
        assert row.hours * row.goodput.goodput == pytest.approx(row.steps * row.step.total / 3600, rel=1e-12)
        assert row.hours > row.steps * row.step.total / 3600 + STARTUP_SECONDS / 3600
        assert row.cost.sagemaker == pytest.approx(row.hours * a10g.sagemaker_usd_per_hour, rel=1e-12)
        rows.append(row)
    assert rows[1].step.total == pytest.approx(rows[0].step.total / 2, rel=1e-12)
    training = [r.cost.sagemaker - STARTUP_SECONDS / 3600 * a10g.sagemaker_usd_per_hour for r in rows]
    assert training[1] == pytest.approx(training[0] / 2, rel=1e-9)


def test_other_gpu_families_keep_their_prior_and_the_assumptions_say_which_is_which() -> None:
    record = _job(30_000)
    plain, calibrated = _estimate(), _estimate(calibration=record)
    assert _row(calibrated, "ml.p4d.24xlarge") == _row(plain, "ml.p4d.24xlarge")  # A100: untouched
    assert _row(calibrated, "ml.p4d.24xlarge", "fsdp").mfu == MFU_PRIORS["A100"]
    assert _row(calibrated, "ml.g5.xlarge").mfu != _row(plain, "ml.g5.xlarge").mfu
    a = calibrated.assumptions
    assert a["mfu"]["ml.g5.xlarge"] == pytest.approx(record.mfu) and a["mfu"]["ml.p4d.24xlarge"] == MFU_PRIORS["A100"]
    assert "A10G calibrated" in a["mfu_source"] and "for the other families" in a["mfu_source"]
    assert a["calibration"]["A10G"]["tokens_per_second"] == 30_000
    assert "A10G calibrated: MFU" in calibrated.table()


@pytest.mark.slow
def test_the_cli_reads_calibration_files(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(_job(25_000).to_json())
    out = subprocess.run([sys.executable, "-m", "sm_dist.cli", "estimate-cost", "--params", str(PARAMS), "--tokens", "1e10",
                          "--seq-len", str(SEQ), "--global-batch", str(BATCH), "--micro-batch", "1",
                          "--instance-type", "ml.g5.xlarge", "--instance-count", "1", "--strategy", "ddp",
                          "--calibration", str(path), "--json"], capture_output=True, text=True, check=True).stdout
    row = json.loads(out)["rows"][0]
    assert row["step_seconds"] == pytest.approx(SEQ * BATCH / 25_000, rel=1e-3)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "sm_dist.calibration/1", "gpu_family": "A10G"}')
    err = subprocess.run([sys.executable, "-m", "sm_dist.cli", "estimate-cost", "--params", "1e8", "--tokens", "1e9",
                          "--calibration", str(bad)], capture_output=True, text=True)
    assert err.returncode == 2 and "Traceback" not in err.stderr
    assert err.stderr.count("\n") == 1 and "calibration" in err.stderr and "missing" in err.stderr


def test_a_record_survives_its_file(tmp_path: Path) -> None:
    record = _job(12_345)._replace(peak_memory_bytes=7 * 2**30, torch_version="2.13.0", seq_len=SEQ, steps=20)
    path = tmp_path / "cal.json"
    path.write_text(record.to_json())
    assert calibration.load(path) == record


@pytest.mark.parametrize(("change", "words"), [
    ({"format": "other/2"}, "format"), ({"mfu": 1.5}, "mfu=1.5"), ({"gpu_family": "TPU"}, "TPU"),
    ({"tokens_per_second": "fast"}, "tokens_per_second"), ({"surprise": 1}, "unknown field"),
    ({"source": "guess"}, "source"),
])
def test_a_bad_file_is_named_with_the_field(tmp_path: Path, change: dict, words: str) -> None:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({**_job(1000).to_dict(), **change}))
    with pytest.raises(ConfigError) as info:
        calibration.load(path)
    assert info.value.field == "calibration" and words in str(info.value)


def test_what_cannot_calibrate_is_refused() -> None:
    record = _job(30_000)
    with pytest.raises(ConfigError, match="not both"):
        _estimate(calibration=record, mfu=0.5)
    with pytest.raises(ConfigError, match="two calibrations"):
        _estimate(calibration=[record, _job(10_000)])
    cpu = calibration.from_throughput(device_name="cpu", tokens_per_second=900, flops_per_token=6e6, model="tiny",
                                      params=10**6, source="calibrate")
    assert cpu.gpu_family is None and cpu.mfu is None
    with pytest.raises(ConfigError, match="not a catalog GPU"):
        _estimate(calibration=cpu)
    with pytest.raises(ConfigError, match="MFU"):  # more than the hardware can do
        calibration.from_job(tokens=1e12, training_seconds=1, instance_type="ml.g5.xlarge", params=PARAMS)


def test_warnings_for_a_family_not_compared_and_a_model_of_another_size() -> None:
    h100 = _job(30_000, "ml.p5.48xlarge")
    est = _estimate(calibration=h100)
    assert any("H100 calibration applies to none" in w for w in est.warnings)
    assert all(r.mfu in (MFU_PRIORS["A10G"], MFU_PRIORS["A100"]) for r in est.rows if r.runnable)
    bigger = _estimate(calibration=_job(30_000), params=20 * PARAMS)
    assert any("MFU moves with model size" in w for w in bigger.warnings)
    assert not any("communication included" in w for w in bigger.warnings)  # one GPU: no communication in it
    many = calibration.from_job(tokens=1e10, training_seconds=3600 * 10, instance_type="ml.p4d.24xlarge",
                                instance_count=2, params=PARAMS)
    assert any("on 16 GPUs, communication included" in w for w in _estimate(calibration=many).warnings)


@pytest.mark.parametrize(("device", "family"), [
    ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A10G", "A10G"), ("NVIDIA L40S", "L40S"), ("NVIDIA L4", "L4"),
    ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H200", "H200"), ("Tesla V100-SXM2-16GB", "V100"),
    ("NVIDIA B200", "B200"), ("cpu", None), ("NVIDIA GeForce RTX 4090", None),
])
def test_device_names_map_to_catalog_families(device: str, family: str | None) -> None:
    assert calibration.family_of(device) == family
