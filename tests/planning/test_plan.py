"""Plan, then act: a plan (and a dry run) creates nothing and calls nothing it needn't."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _project import CKPT_BUCKET, ROLE_ARN

import sm_dist
from sm_dist.errors import ConfigError
from sm_dist.planning.plan import Plan

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

EXPLICIT = dict(instance_type="ml.g5.12xlarge", role=ROLE_ARN, output_s3_uri="s3://out-bucket/runs", region="us-east-1",
                max_runtime_s=3600)


def test_dry_run_leaves_moto_empty(aws: str, source_dir: Path, capsys) -> None:
    import boto3

    plan = sm_dist.plan("train.py", source_dir=str(source_dir), instance_type="ml.p4d.24xlarge",
                        instance_count=2, spot=True, checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/r", max_cost_usd=300,
                        role=ROLE_ARN)
    assert isinstance(plan, Plan)
    assert "python3 -m sm_dist.container.pid1" in str(plan)
    with pytest.raises(ConfigError, match=r"^dry_run=True: sm_dist.plan\(...\) is the dry run"):
        sm_dist.fit("train.py", source_dir=str(source_dir), dry_run=True, instance_type="ml.p4d.24xlarge")  # type: ignore[call-arg]
    s3 = boto3.client("s3")
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == [CKPT_BUCKET]  # no default bucket made
    assert s3.list_objects_v2(Bucket=CKPT_BUCKET).get("KeyCount", 0) == 0
    assert boto3.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_explicit_plan_makes_no_aws_call(source_dir: Path, monkeypatch) -> None:
    """No credentials, no moto: every AWS call would be recorded (and fail)."""
    import botocore.client

    calls = []
    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", lambda self, op, params: calls.append(op))
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), **EXPLICIT)
    assert calls == []
    assert plan.code_s3_uri == f"s3://out-bucket/runs/{plan.job_name}/input/code/"
    assert plan.default_bucket is None


def test_plan_is_a_frozen_value(source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), hyperparameters={"lr": 0.1}, **EXPLICIT)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.job_name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        plan.environment["X"] = "1"  # type: ignore[index]
    plan.request["HyperParameters"]["lr"] = "9"
    assert plan.request["HyperParameters"]["lr"] == "0.1"
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["container_command"] == ["python3", "-m", "sm_dist.container.pid1"]
    assert data["environment"]["PYTHONPATH"] == "/opt/ml/input/data/code"
    assert {f["path"] for f in data["bundle"]["files"]} >= {"train.py", "sm_dist/container/pid1.py"}
    assert data["request"]["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600}


def test_auto_strategy_comes_from_the_estimator(source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), strategy="auto", params=3e9, tokens=1e9,
                        **{**EXPLICIT, "instance_type": "ml.p4d.24xlarge"})
    assert plan.strategy.value not in ("ddp", "dp")  # 3B fp32 + Adam does not fit replicated on 40 GB
    assert plan.sizing.row.fits is True and plan.sizing.row.strategy is plan.strategy
    tags = {t["Key"]: t["Value"] for t in plan.request["Tags"]}
    assert tags["sm-dist:strategy"] == plan.strategy.value
    assert float(tags["sm-dist:estimate-usd"]) == pytest.approx(plan.sizing.row.cost.sagemaker, abs=0.005)


def test_function_entry_and_dp(source_dir: Path) -> None:
    plan = sm_dist.plan("pkg.mod:main", source_dir=str(source_dir), strategy="dp", **EXPLICIT)
    assert plan.job_spec.entry == "pkg.mod:main" and plan.job_spec.nproc_per_node == 1


@pytest.mark.slow
def test_plan_does_not_import_torch(source_dir: Path) -> None:
    code = (
        "import sys, sm_dist\n"
        f"sm_dist.plan('train.py', source_dir={str(source_dir)!r}, **{EXPLICIT!r})\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_auto_over_budget_takes_the_cheapest_that_fits(source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), strategy="auto", params=3e9, tokens=1e12,
                        **{**EXPLICIT, "instance_type": "ml.p4d.24xlarge", "max_runtime_s": None, "max_cost_usd": 50})
    assert plan.sizing.row.fits is True
    assert any("chose the cheapest that fits" in w for w in plan.warnings)
    assert any("shorter than the estimated" in w for w in plan.warnings)


def test_local_plan_needs_no_aws_setting_and_calls_nothing(source_dir: Path, monkeypatch) -> None:
    """A local plan fills region, role, bucket and instance type with labels, once, and calls no AWS API."""
    import botocore.client

    from sm_dist.planning.locations import LOCAL_BUCKET, LOCAL_ROLE_ARN
    from sm_dist.planning.plan import LOCAL_DEFAULTS

    calls = []
    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", lambda self, op, params: calls.append(op))
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), local=True)
    assert plan.local and calls == []
    assert (plan.region, plan.instance_type) == (LOCAL_DEFAULTS["region"], LOCAL_DEFAULTS["instance_type"])
    assert plan.role_arn == LOCAL_ROLE_ARN and plan.default_bucket is None
    assert plan.code_s3_uri.startswith(f"s3://{LOCAL_BUCKET}/") and plan.to_dict()["local"] is True
    assert any("local mode syncs checkpoints" in w for w in plan.warnings)
    assert not any("lost when the job ends" in w for w in plan.warnings)
    given = sm_dist.plan("train.py", source_dir=str(source_dir), local=True, region="eu-west-1",
                         instance_type="ml.g5.12xlarge")
    assert (given.region, given.instance_type) == ("eu-west-1", "ml.g5.12xlarge")  # given values win


def test_cloud_plan_without_instance_type_names_the_field(source_dir: Path) -> None:
    from sm_dist.errors import ConfigError

    with pytest.raises(ConfigError, match="instance_type=None: name the SageMaker instance type"):
        sm_dist.plan("train.py", source_dir=str(source_dir), role=ROLE_ARN, region="us-east-1")


def test_a_local_plan_is_refused_by_the_cloud_backend(source_dir: Path) -> None:
    from sm_dist.cloud import submit
    from sm_dist.errors import ConfigError

    plan = sm_dist.plan("train.py", source_dir=str(source_dir), local=True)
    with pytest.raises(ConfigError, match="sm_dist.local.run"):
        submit.run(plan, session=object())


@pytest.mark.slow
@pytest.mark.parametrize("aws_env", [{}, {"AWS_PROFILE": "does-not-exist"}], ids=["no AWS_*", "missing profile"])
def test_cli_local_dry_run_with_no_aws_settings(tmp_path: Path, aws_env: dict[str, str]) -> None:
    """`sm-dist fit cnn.py --source-dir entrypoints --local --dry-run` in a fresh interpreter whose
    environment has no AWS_* variable (or a profile that does not exist) and an empty HOME."""
    import os

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), **aws_env)
    out = subprocess.run([sys.executable, "-m", "sm_dist.cli", "fit", "cnn.py", "--source-dir", "entrypoints",
                          "--local", "--dry-run"], cwd=repo, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "runs on this machine" in out.stdout and "cnn.py" in out.stdout
    assert "region=None" not in out.stderr


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_p5_plan_names_a_sagemaker_pytorch_image_of_the_tested_torch(source_dir: Path, region: str) -> None:
    """The job gets AWS's SageMaker PyTorch training image of the torch the runtime is tested on, in its region."""
    from sm_dist.catalog.images import default_version

    settings = {**EXPLICIT, "instance_type": "ml.p5.48xlarge", "region": region}
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), **settings)
    image = plan.request["AlgorithmSpecification"]["TrainingImage"]
    assert image == f"763104351884.dkr.ecr.{region}.amazonaws.com/pytorch:{default_version()}-cu133-amzn2023-sagemaker"
