"""fit(wait=False) against moto: the job SageMaker sees, and the code channel in S3."""

from __future__ import annotations

from pathlib import Path

import pytest
from _project import CKPT_BUCKET, DEFAULT_BUCKET, ROLE_ARN

import sm_dist
from sm_dist.jobspec import JOB_SPEC_FILENAME, JobSpec

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _fit(source_dir: Path, **kw):
    settings = dict(
        source_dir=str(source_dir), instance_type="ml.p4d.24xlarge", instance_count=2, strategy="fsdp",
        checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/run1", checkpoint_mode="sagemaker-sync", spot=True,
        max_cost_usd=101, role=ROLE_ARN, hyperparameters={"lr": 0.001, "epochs": 3},
        environment={"NCCL_DEBUG": "INFO"},
    )
    return sm_dist.fit("train.py", wait=False, **{**settings, **kw})


def test_job_as_sagemaker_sees_it(aws: str, source_dir: Path) -> None:
    import boto3

    job = _fit(source_dir)
    desc = boto3.client("sagemaker").describe_training_job(TrainingJobName=job.name)
    assert desc["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert desc["ResourceConfig"]["InstanceCount"] == 2
    assert desc["CheckpointConfig"] == {"S3Uri": f"s3://{CKPT_BUCKET}/run1", "LocalPath": "/opt/ml/checkpoints"}
    assert desc["EnableManagedSpotTraining"] is True
    # $101 ÷ (2 × $25.25/h p4d on-demand, catalog) = 2.0 h → 7199 s, less 180 s billed after MaxRuntime (stop
    # grace + upload); spot waits twice as long
    runtime = int(101 * 3600 / (2 * job.plan.limits.usd_per_hour / 2)) - 180
    assert desc["StoppingCondition"] == {"MaxRuntimeInSeconds": runtime, "MaxWaitTimeInSeconds": 2 * runtime}
    assert desc["AlgorithmSpecification"]["ContainerEntrypoint"] == ["python3", "-m", "sm_dist.container.pid1"]
    assert desc["HyperParameters"] == {"lr": "0.001", "epochs": "3"}
    # moto drops Environment from the description; the submitted request is the plan's
    assert job.plan.request["Environment"] == {"PYTHONPATH": "/opt/ml/input/data/code", "PYTHONUNBUFFERED": "1",
                                               "NCCL_DEBUG": "INFO"}
    assert job.status().status == "Completed"  # moto completes jobs at once


def test_code_channel_in_s3(aws: str, source_dir: Path) -> None:
    import boto3

    job = _fit(source_dir)
    s3 = boto3.client("s3")
    prefix = f"sm-dist/{job.name}/input/code/"
    assert job.plan.code_s3_uri == f"s3://{DEFAULT_BUCKET}/{prefix}"
    keys = {o["Key"][len(prefix):] for o in s3.list_objects_v2(Bucket=DEFAULT_BUCKET, Prefix=prefix)["Contents"]}
    assert {"train.py", "pkg/mod.py", "configs/base.yaml", JOB_SPEC_FILENAME} <= keys
    assert {"sm_dist/container/pid1.py", "sm_dist/jobspec.py", "sm_dist/_entrypoints/cnn.py"} <= keys
    assert keys == {f.path for f in job.plan.bundle.files}
    for junk in (".git", "__pycache__", ".venv", "myenv", "weights", "data", "notes", ".ipynb_checkpoints"):
        assert not any(k.split("/")[0] == junk for k in keys), junk
    spec = JobSpec.from_json(s3.get_object(Bucket=DEFAULT_BUCKET, Key=prefix + JOB_SPEC_FILENAME)["Body"].read())
    assert spec.strategy.value == "fsdp" and spec.checkpoint.mode == "sagemaker-sync"
    assert spec.job_name == job.name and spec.hyperparameters == {"lr": "0.001", "epochs": "3"}


def test_explicit_output_and_infra_stack(aws: str, source_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """fit(infra_stack="") takes role, artifact prefix and checkpoint prefix from sm-dist infra."""
    import boto3

    boto3.client("s3").create_bucket(Bucket="infra-bucket")
    monkeypatch.setenv("SM_DIST_CONFIG_HOME", str(tmp_path))
    from sm_dist.provision import config as infra_config

    infra_config.record("sm-dist", {
        "region": "us-east-1", "role_arn": ROLE_ARN, "bucket": "infra-bucket",
        "checkpoint_uri": "s3://infra-bucket/sm/checkpoints", "artifact_uri": "s3://infra-bucket/sm",
    })
    job = _fit(source_dir, role=None, infra_stack="", checkpoint_s3_uri=None, checkpoint_mode="auto")
    assert job.plan.role_arn == ROLE_ARN
    assert job.plan.code_s3_uri.startswith(f"s3://infra-bucket/sm/{job.name}/input/code/")
    assert job.plan.checkpoint_uri == f"s3://infra-bucket/sm/checkpoints/{job.name}"
    assert job.plan.job_spec.checkpoint.mode == "sagemaker-sync"  # train.py checkpoints by itself
    assert job.plan.request["CheckpointConfig"]["S3Uri"] == job.plan.checkpoint_uri  # SageMaker syncs its folder
