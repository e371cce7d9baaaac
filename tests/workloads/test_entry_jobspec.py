"""Entrypoint defaults come from the job spec (SM_DIST_JOB_SPEC); flags win. In one process."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sm_dist.jobspec import JOB_SPEC_ENV, JobSpec
from sm_dist.runtime.entry import run_entrypoint

from .conftest import ENTRYPOINTS, final_lines


def _cnn_module():
    spec = importlib.util.spec_from_file_location("sm_dist_test_cnn_entry", ENTRYPOINTS / "cnn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(tmp: Path, capsys, *extra: str) -> str:
    cnn = _cnn_module()
    argv = ["--steps", "3", "--batch-size", "8", "--dataset-size", "64", "--model-dir", str(tmp / "m"), *extra]
    assert run_entrypoint("cnn", cnn.add_flags, cnn.workload, batch_size=32, lr=1e-3, argv=argv) == 0
    return final_lines(capsys.readouterr().out)[-1].model_sha256


def _steps(folder: Path) -> list[str]:
    return sorted(p.parent.name for p in folder.glob("step-*/manifest.json"))


def test_seed_and_checkpoints_from_the_job_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    explicit = _run(tmp_path / "explicit", capsys, "--seed", "5")
    ckpt = tmp_path / "ck"
    spec = JobSpec(entry="cnn.py", seed=5,
                   checkpoint={"mode": "local", "local_path": str(ckpt), "interval_steps": 2, "keep": 2})
    monkeypatch.setenv(JOB_SPEC_ENV, str(spec.write(tmp_path)))
    assert _run(tmp_path / "spec", capsys) == explicit
    assert _steps(ckpt) == ["step-000000002", "step-000000003"]


def test_flags_win_over_the_job_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    spec = JobSpec(entry="cnn.py", seed=5, checkpoint={"mode": "local", "local_path": str(tmp_path / "spec_ck")})
    monkeypatch.setenv(JOB_SPEC_ENV, str(spec.write(tmp_path)))
    other_seed = _run(tmp_path / "a", capsys, "--seed", "6", "--checkpoint-dir", str(tmp_path / "flag_ck"),
                      "--checkpoint-interval-steps", "1")
    assert other_seed != _run(tmp_path / "b", capsys, "--no-checkpoint")
    assert _steps(tmp_path / "flag_ck")[-1] == "step-000000003"
    assert not (tmp_path / "spec_ck").exists() or not _steps(tmp_path / "spec_ck")


def test_checkpoint_uri_flag_writes_to_s3_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys,
                                                       aws_credentials: str, moto_endpoint: str) -> None:
    """--checkpoint-uri s3://... through the Checkpointer's S3 storage, against moto's HTTP server."""
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    s3 = boto3.client("s3", region_name=aws_credentials, endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket="ckpt-workloads")
    uri = "s3://ckpt-workloads/run1"
    first = _run(tmp_path / "a", capsys, "--checkpoint-uri", uri, "--checkpoint-interval-steps", "2")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="ckpt-workloads", Prefix="run1/")["Contents"]]
    assert any(k.endswith("manifest.json") and "000000003" in k for k in keys)
    cnn = _cnn_module()
    argv = ["--steps", "3", "--batch-size", "8", "--dataset-size", "64", "--model-dir", str(tmp_path / "b"),
            "--checkpoint-uri", uri]
    assert run_entrypoint("cnn", cnn.add_flags, cnn.workload, batch_size=32, lr=1e-3, argv=argv) == 0
    out = capsys.readouterr().out
    assert "[sm_dist] resumed step=3 epoch=0" in out and final_lines(out)[-1].model_sha256 == first
