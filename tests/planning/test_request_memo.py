"""A local plan's request read back from the memo is the SDK's own for the same settings and name."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from _project import ROLE_ARN

from sm_dist.planning import request as request_mod
from sm_dist.planning.channels import Channel

NAME = "sm-dist-20261126-170000-001"


def _spec(name: str) -> request_mod.RequestSpec:
    """A local plan's settings: the job name is in TrainingJobName and in the code channel's URI."""
    return request_mod.RequestSpec(
        job_name=name, role_arn=ROLE_ARN, instance_type="ml.g5.xlarge", instance_count=2,
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312",
        max_runtime_s=3600, output_s3_uri="s3://sm-dist-local/sm-dist", checkpoint_config_uri=None,
        channels={"code": Channel(source=f"s3://sm-dist-local/sm-dist/{name}/input/code/")},
        environment={"PYTHONPATH": "/opt/ml/input/data/code"}, hyperparameters={"steps": "24"},
        tags={"sm-dist:strategy": "ddp"}, metric_definitions=({"Name": "loss", "Regex": "loss=([0-9.]+)"},),
    )


def _no_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the SDK was asked although the memo holds the request")

    monkeypatch.setattr(request_mod, "_trainer", refuse)


def test_a_kept_request_is_the_sdks_for_the_next_name(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    other = "sm-dist-20261126-170512-377"
    expected = request_mod.build_request(_spec(other))  # the SDK's own, no memo
    request_mod.build_request(_spec(NAME), memo=True)
    _no_sdk(monkeypatch)
    got = request_mod.build_request(_spec(other), memo=True)
    assert got == expected
    assert got["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"].endswith(f"/{other}/input/code/")
    changed = dataclasses.replace(_spec(other), hyperparameters={"steps": "25"})  # other settings: the SDK again
    with pytest.raises(AssertionError, match="the SDK was asked"):
        request_mod.build_request(changed, memo=True)


def test_the_memo_follows_the_sagemaker_config_file(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    request_mod.build_request(_spec(NAME), memo=True)
    assert request_mod.recall_request(_spec(NAME)) is not None
    user_config = Path(os.environ["XDG_CONFIG_HOME"]) / "sagemaker" / "config.yaml"  # the SDK's user file
    user_config.parent.mkdir(parents=True)
    user_config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  TrainingJob:\n    Tags: [{Key: team, Value: ml}]\n")
    assert request_mod.recall_request(_spec(NAME)) is None
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(user_config))  # may name S3: never kept
    request_mod.keep_request(_spec(NAME), {"TrainingJobName": NAME})
    assert request_mod.recall_request(_spec(NAME)) is None


def test_a_short_name_is_not_kept(aws: str) -> None:
    short = "job-1"  # a placeholder of its length could stand for other text in the settings
    request_mod.build_request(_spec(short), memo=True)
    assert request_mod.recall_request(_spec(short)) is None
