"""The CreateTrainingJob request: built by ModelTrainer, sm_dist's PID 1, valid for botocore."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from _project import ROLE_ARN

from sm_dist.errors import LaunchError, SmDistError
from sm_dist.planning import request as request_mod
from sm_dist.planning.channels import Channel

SPEC = request_mod.RequestSpec(
    job_name="sm-dist-test-1", role_arn=ROLE_ARN, instance_type="ml.p4d.24xlarge", instance_count=2,
    volume_size_gb=50, volume_kms_key="arn:aws:kms:us-east-1:123456789012:key/vol", spot=True,
    image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312",
    max_runtime_s=7200, max_wait_s=14400, output_s3_uri="s3://out-bucket/sm-dist",
    output_kms_key="arn:aws:kms:us-east-1:123456789012:key/out", checkpoint_config_uri="s3://ckpt-bucket/run",
    channels={"code": Channel(source="s3://out-bucket/sm-dist/sm-dist-test-1/input/code/"),
              "train": Channel(source="s3://data/train/")},
    environment={"PYTHONPATH": "/opt/ml/input/data/code"}, hyperparameters={"lr": "0.1"},
    tags={"team": "ml"}, subnets=("subnet-1",), security_group_ids=("sg-1",), network_isolation=True,
    encrypt_inter_container_traffic=True, retry_attempts=2,
    metric_definitions=({"Name": "loss", "Regex": "loss=([0-9.]+)"},),
)


def test_request_has_every_setting(aws: str) -> None:
    req = request_mod.build_request(SPEC)
    algo = req["AlgorithmSpecification"]
    assert algo["ContainerEntrypoint"] == ["python3", "-m", "sm_dist.container.pid1"]
    assert "ContainerArguments" not in algo
    assert req["TrainingJobName"] == "sm-dist-test-1"
    assert req["ResourceConfig"] == {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50,
                                     "VolumeKmsKeyId": SPEC.volume_kms_key}
    assert req["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 14400}
    assert req["EnableManagedSpotTraining"] is True
    assert req["CheckpointConfig"] == {"S3Uri": "s3://ckpt-bucket/run", "LocalPath": "/opt/ml/checkpoints"}
    assert req["OutputDataConfig"]["KmsKeyId"] == SPEC.output_kms_key
    assert req["VpcConfig"] == {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]}
    assert req["EnableNetworkIsolation"] is True and req["EnableInterContainerTrafficEncryption"] is True
    assert req["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert [c["ChannelName"] for c in req["InputDataConfig"]] == ["code", "train"]
    assert {"Key": "team", "Value": "ml"} in req["Tags"]


def test_local_container_mode_builds_the_same_request(aws: str) -> None:
    """Pins the module's premise: without SourceCode, the mode that skips role/bucket resolution
    serializes exactly what SAGEMAKER_TRAINING_JOB mode would (the SDK appends a timestamp to
    the job name in both)."""
    import boto3
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.train.model_trainer import Mode

    session = Session(boto_session=boto3.Session(region_name=aws))
    local = request_mod._trainer(SPEC, session)._create_training_job_args(boto3=True)
    cloud = request_mod._trainer(SPEC, session, Mode.SAGEMAKER_TRAINING_JOB)._create_training_job_args(boto3=True)
    for req in (local, cloud):
        assert req.pop("TrainingJobName").startswith("sm-dist-test-1")
    assert local == cloud


def test_botocore_validation_catches_a_broken_request(aws: str) -> None:
    req = request_mod.build_request(SPEC)
    request_mod.validate_request(req)
    broken = copy.deepcopy(req)
    broken["ResourceConfig"]["InstanceCount"] = "two"
    del broken["RoleArn"]
    with pytest.raises(LaunchError, match="RoleArn"):
        request_mod.validate_request(broken)


def test_default_image_follows_region_and_device() -> None:
    gpu = request_mod.default_image("eu-west-1", "2.10", "py313", "ml.p4d.24xlarge")
    cpu = request_mod.default_image("us-east-1", "2.10", None, "ml.c5.xlarge")
    assert gpu == "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.10-gpu-py313"
    assert cpu.endswith("pytorch-training:2.10-cpu-py313")


def test_default_image_is_the_newest_tested_torch_in_awss_new_pytorch_repository() -> None:
    """The SDK's image table does not know the `pytorch` repository (torch 2.11+); sm_dist's does."""
    from sm_dist.catalog.images import default_version

    image = request_mod.default_image("us-east-1", None, None, "ml.p5.48xlarge")
    assert image.endswith(f"/pytorch:{default_version()}-cu133-amzn2023-sagemaker")


@pytest.mark.parametrize(("torch_version", "py_version", "field"), [("1.9", None, "torch_version"),
                                                                    ("2.13", "py310", "py_version")])
def test_an_image_that_does_not_exist_is_refused(torch_version: str, py_version: str | None, field: str) -> None:
    with pytest.raises(SmDistError) as info:
        request_mod.default_image("us-east-1", torch_version, py_version, "ml.p5.48xlarge")
    assert info.value.field == field


def test_settings_the_sdk_rejects_are_an_sdk_error(aws: str) -> None:
    from sm_dist.errors import ConfigError, SdkError

    with pytest.raises(SdkError, match="SageMaker SDK rejected the launch settings") as info:
        request_mod.build_request(dataclasses.replace(SPEC, instance_count="two"))  # type: ignore[arg-type]
    assert isinstance(info.value, LaunchError) and not isinstance(info.value, ConfigError)
