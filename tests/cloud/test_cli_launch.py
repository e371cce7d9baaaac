"""`sm-dist fit|status|cost|checkpoints|logs`, in-process against moto."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _project import CKPT_BUCKET, ROLE_ARN

from sm_dist.cli import main
from sm_dist.contract.checkpoint import Manifest

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _fit_args(source_dir: Path) -> list[str]:
    return ["fit", "train.py", "--source-dir", str(source_dir), "--instance-type", "ml.p4d.24xlarge",
            "--instance-count", "2", "--strategy", "fsdp", "--role", ROLE_ARN, "--region", "us-east-1",
            "--checkpoint-s3-uri", f"s3://{CKPT_BUCKET}/cli", "--spot", "--max-cost-usd", "200",
            "--hp", "lr=0.01", "--hp", "epochs=2", "--tag", "team=ml"]


def test_dry_run_json(aws: str, source_dir: Path, capsys) -> None:
    assert main([*_fit_args(source_dir), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    req = plan["request"]
    assert req["ResourceConfig"]["InstanceCount"] == 2 and req["EnableManagedSpotTraining"] is True
    assert req["HyperParameters"] == {"lr": "0.01", "epochs": "2"}
    assert {"Key": "team", "Value": "ml"} in req["Tags"]
    assert req["StoppingCondition"]["MaxWaitTimeInSeconds"] == 2 * req["StoppingCondition"]["MaxRuntimeInSeconds"]
    assert plan["job_spec"]["strategy"] == "fsdp"


def test_config_file_with_flag_override(aws: str, source_dir: Path, tmp_path: Path, capsys) -> None:
    config = tmp_path / "job.yaml"
    config.write_text(f"entry: train.py\nsource_dir: {source_dir}\ninstance_type: ml.g5.xlarge\nrole: {ROLE_ARN}\n"
                      "max_runtime_s: 600\nhyperparameters:\n  lr: 0.5\n")
    assert main(["fit", "--config", str(config), "--instance-count", "1", "--max-runtime-s", "900", "--dry-run", "--json"]) == 0
    req = json.loads(capsys.readouterr().out)["request"]
    assert req["StoppingCondition"]["MaxRuntimeInSeconds"] == 900 and req["HyperParameters"] == {"lr": "0.5"}


def test_bad_input_is_one_line_and_creates_nothing(aws: str, source_dir: Path, capsys) -> None:
    import boto3

    args = [a for a in _fit_args(source_dir) if a not in ("--checkpoint-s3-uri", f"s3://{CKPT_BUCKET}/cli")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sm-dist fit: error: spot=True") and "checkpoint_s3_uri" in err[0]
    assert boto3.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_launch_then_follow_up_commands(aws: str, source_dir: Path, capsys) -> None:
    import boto3

    assert main([*_fit_args(source_dir), "--json"]) == 0
    name = json.loads(capsys.readouterr().out)["job_name"]
    assert main(["status", name]) == 0
    assert "Completed / Completed" in capsys.readouterr().out
    assert main(["cost", name, "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    assert cost["instance_count"] == 2 and cost["spot"] is True and cost["max_cost_usd"] == pytest.approx(200, abs=0.05)
    manifest = Manifest(step=7, epoch=0, world_size=2, sharded=False).to_json()
    boto3.client("s3").put_object(Bucket=CKPT_BUCKET, Key="cli/step-000000007/manifest.json", Body=manifest)
    boto3.client("s3").put_object(Bucket=CKPT_BUCKET, Key="cli/step-000000009/manifest.json", Body=b"{}")
    assert main(["checkpoints", name]) == 0
    out = capsys.readouterr().out
    assert "step         7  committed" in out and "step         9  NOT committed" in out  # {} is no manifest
    assert main(["logs", name]) == 0
    assert main(["status", "no-such-job"]) == 2
    assert ") or in us-east-1 (a training job, or a chained run's no-such-job-1)" in capsys.readouterr().err
