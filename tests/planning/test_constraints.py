"""CreateTrainingJob's rules that botocore does not check (docs/PLATFORM.md §9): one test per row.

A refused plan creates nothing (moto: no bucket, no object, no job); a rule with one fix is applied with a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _project import CKPT_BUCKET, ROLE_ARN, aws_state

import sm_dist
from sm_dist.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GOOD = dict(instance_type="ml.p4d.24xlarge", instance_count=2, strategy="ddp", role=ROLE_ARN,
            checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/run", max_runtime_s=3600)
DAY = 86_400

#: case -> (settings, the field named, a fragment of the message)
REFUSED: dict[str, tuple[dict[str, Any], str, str]] = {
    # sm_dist's own rules on what it builds
    "20 data channels (the code channel is the 21st)": (
        {"inputs": {f"c{i}": f"s3://data/{i}" for i in range(20)}}, "inputs", "SageMaker takes 20"),
    "V100 with the CUDA 13 default image": ({"instance_type": "ml.p3.16xlarge"}, "instance_type", "compute capability 7.0"),
    "Grace (arm64) with the x86_64 image": ({"instance_type": "ml.p6e-gb200.36xlarge", "instance_count": 1},
                                            "instance_type", "arm64"),
    "hyperparameter value over 2500 chars": ({"hyperparameters": {"x": "a" * 2501}}, "hyperparameters.x",
                                             "longer than 2500"),
    "NUL in a hyperparameter": ({"hyperparameters": {"note": "a\0b"}}, "hyperparameters.note", "NUL character"),
    "NUL in an environment value": ({"environment": {"NOTE": "a\0b"}}, "environment.NOTE", "NUL character"),
    "NUL in a script argument": ({"args": ("--x", "a\0b")}, "args", "NUL character"),
    "output KMS key with an S3 Express bucket": (
        {"output_s3_uri": "s3://out--use1-az4--x-s3/p", "output_kms_key": "arn:aws:kms:us-east-1:123456789012:key/k"},
        "output_kms_key", "S3 Express One Zone"),
    # the service model's limits, checked on the built request
    "string too long (AlgorithmImage, 255)": ({"image_uri": "1" * 12 + ".dkr.ecr.us-east-1.amazonaws.com/" + "r" * 220},
                                              "image_uri (AlgorithmSpecification.TrainingImage)", "at most 255"),
    "pattern (KmsKeyId has no '.')": ({"output_kms_key": "alias/team.key"},
                                      "output_kms_key (OutputDataConfig.KmsKeyId)", "must match"),
    "pattern (RoleArn has no space)": ({"role": "arn:aws:iam::123456789012:role/sm dist"}, "role (RoleArn)",
                                       "must match"),
    "list too long (Subnets, 16)": ({"subnets": tuple(f"subnet-{i}" for i in range(17)), "security_group_ids": ("sg-1",)},
                                    "subnets (VpcConfig.Subnets)", "at most 16"),
    "list too long (SecurityGroupIds, 5)": ({"subnets": ("subnet-1",), "security_group_ids": tuple(f"sg-{i}" for i in range(6))},
                                            "security_group_ids (VpcConfig.SecurityGroupIds)", "at most 5"),
    "integer above 32 bits (VolumeSizeInGB)": ({"volume_size_gb": 2**31, "instance_type": "ml.c5.xlarge",
                                                 "instance_count": 1}, "volume_size_gb (ResourceConfig.VolumeSizeInGB)",
                                               "above 2147483647"),
}


def _fit(source_dir: Path, **overrides: Any) -> Any:
    return sm_dist.fit("train.py", wait=False, **{**GOOD, "source_dir": str(source_dir), **overrides})


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_before_anything_is_created(aws: str, source_dir: Path, case: str) -> None:
    overrides, field, text = REFUSED[case]
    before = aws_state()
    with pytest.raises(ConfigError) as caught:
        _fit(source_dir, **overrides)
    assert caught.value.field == field and text in str(caught.value)
    assert aws_state() == before  # no bucket, no object, no job


def test_nineteen_data_channels_go_through(aws: str, source_dir: Path) -> None:
    import boto3

    boto3.client("s3").create_bucket(Bucket="data")  # the remote checks look for a channel's bucket
    job = _fit(source_dir, inputs={f"c{i}": f"s3://data/{i}" for i in range(19)})
    assert len(job.plan.request["InputDataConfig"]) == 20


def test_a_volume_key_is_dropped_with_a_warning_on_local_nvme(aws: str, source_dir: Path) -> None:
    import boto3

    key = "arn:aws:kms:us-east-1:123456789012:key/vol"
    job = _fit(source_dir, instance_type="ml.p5.48xlarge", volume_kms_key=key)
    assert "VolumeKmsKeyId" not in job.plan.request["ResourceConfig"]
    assert any(w.startswith(f"volume_kms_key {key} not sent: ml.p5.48xlarge has local NVMe") for w in job.plan.warnings)
    sent = boto3.client("sagemaker").describe_training_job(TrainingJobName=job.name)["ResourceConfig"]
    assert "VolumeKmsKeyId" not in sent


def test_a_volume_key_is_kept_on_an_ebs_instance(aws: str, source_dir: Path) -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/vol"
    plan = sm_dist.plan("train.py", **{**GOOD, "source_dir": str(source_dir), "instance_type": "ml.c5.xlarge",
                                       "instance_count": 1, "volume_kms_key": key})
    assert plan.request["ResourceConfig"]["VolumeKmsKeyId"] == key
    assert not any("volume_kms_key" in w for w in plan.warnings)


def test_a_single_quote_reaches_the_script_as_it_is(aws: str, source_dir: Path) -> None:
    """sm_dist's PID 1 passes hyperparameters as arguments, through no shell and no env file (PLATFORM §9)."""
    job = _fit(source_dir, hyperparameters={"note": "it's", "cmd": "a 'b' \"c\" $HOME `x`"})
    assert job.plan.job_spec.script_args() == ["--note", "it's", "--cmd", "a 'b' \"c\" $HOME `x`"]
    assert job.plan.request["HyperParameters"]["note"] == "it's"


def test_spots_default_wait_stays_within_28_days(aws: str, source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", **{**GOOD, "source_dir": str(source_dir), "spot": True, "max_runtime_s": 20 * DAY})
    assert plan.request["StoppingCondition"] == {"MaxRuntimeInSeconds": 20 * DAY, "MaxWaitTimeInSeconds": 28 * DAY}
    assert any(w.startswith("MaxWait 28 days leaves 192.0 h to wait") for w in plan.warnings)
    short = sm_dist.plan("train.py", **{**GOOD, "source_dir": str(source_dir), "spot": True})
    assert short.request["StoppingCondition"]["MaxWaitTimeInSeconds"] == 2 * 3600


def test_an_explicit_wait_beyond_28_days_is_sent_with_a_warning(aws: str, source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", **{**GOOD, "source_dir": str(source_dir), "spot": True, "max_wait_s": 40 * DAY})
    assert plan.request["StoppingCondition"]["MaxWaitTimeInSeconds"] == 40 * DAY
    assert any("documents no maximum for MaxWaitTimeInSeconds" in w for w in plan.warnings)


def test_an_enum_value_the_api_does_not_take_is_refused() -> None:
    from sm_dist.planning.constraints import check_request

    request = {"AlgorithmSpecification": {"TrainingImage": "x", "TrainingInputMode": "Streaming"}}
    with pytest.raises(ConfigError, match="not a value CreateTrainingJob takes for TrainingInputMode"):
        check_request(request, None)


def test_every_pattern_of_the_request_is_checked() -> None:
    """No pattern of CreateTrainingJob's input is skipped: each compiles (Java's classes translated)."""
    from botocore.model import ListShape, MapShape, StructureShape

    from sm_dist.planning.constraints import pattern_matcher
    from sm_dist.planning.preflight import sagemaker_service_model

    patterns: set[str] = set()
    seen: set[str] = set()

    def walk(shape: Any) -> None:
        if shape.name in seen:
            return
        seen.add(shape.name)
        if "pattern" in shape.metadata:
            patterns.add(shape.metadata["pattern"])
        children = (list(shape.members.values()) if isinstance(shape, StructureShape) else
                    [shape.member] if isinstance(shape, ListShape) else
                    [shape.key, shape.value] if isinstance(shape, MapShape) else [])
        for child in children:
            walk(child)

    walk(sagemaker_service_model().operation_model("CreateTrainingJob").input_shape)
    assert len(patterns) > 15
    for pattern in patterns:
        pattern_matcher(pattern)("probe")
    tag = pattern_matcher("([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)")
    assert tag("Team Ä-1/x") and not tag("a,b")
    lam = pattern_matcher("arn:[\\p{Alnum}\\-]+:lambda:[\\p{Alnum}\\-]+:[0-9]{12}:function:.*")
    assert lam("arn:aws:lambda:us-east-1:123456789012:function:f") and not lam("arn:aws:lambda:us east:1:function:f")


def test_the_channel_limit_is_the_models() -> None:
    from sm_dist.planning.preflight import MAX_INPUT_CHANNELS, sagemaker_service_model

    assert sagemaker_service_model().shape_for("InputDataConfig").metadata["max"] == MAX_INPUT_CHANNELS
