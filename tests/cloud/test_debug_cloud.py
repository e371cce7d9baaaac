"""`sm-dist debug` / `sm-dist stacks` for a cloud job: the documented SSM target, read from DescribeTrainingJob
(botocore's Stubber with the real response shape: moto's DescribeTrainingJob has no RemoteDebugConfig), and the
one-line refusals (docs/PLATFORM.md §1.16)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from botocore.stub import Stubber

from sm_dist import cli
from sm_dist.cloud import debug as cloud_debug
from sm_dist.cloud.job import Job
from sm_dist.errors import ConfigError

NAME = "llm-debug-20260101"
ARN = f"arn:aws:sagemaker:eu-west-1:123456789012:training-job/{NAME}"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _described(remote_debug: bool | None, secondary: str = "Training", count: int = 2,
               status: str = "InProgress") -> dict[str, Any]:
    """DescribeTrainingJob through botocore's Stubber, which checks the response against the service model."""
    import boto3

    response: dict[str, Any] = {
        "TrainingJobName": NAME, "TrainingJobArn": ARN, "TrainingJobStatus": status, "SecondaryStatus": secondary,
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": count, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": NOW,
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"},
        **({"RemoteDebugConfig": {"EnableRemoteDebug": remote_debug}} if remote_debug is not None else {}),
        "InfraCheckConfig": {"EnableInfraCheck": True},
    }
    client = boto3.client("sagemaker", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response("describe_training_job", response, {"TrainingJobName": NAME})
        return dict(Job(NAME, clients={"sagemaker": client}).describe())


def test_the_ssm_command_names_the_host_and_the_jobs_region(capsys: pytest.CaptureFixture[str]) -> None:
    assert cloud_debug.debug(_described(True), "algo-2", run=False) == 0
    first, needs = capsys.readouterr().out.splitlines()
    assert first == f"aws ssm start-session --target sagemaker-training-job:{NAME}_algo-2 --region eu-west-1"
    assert "Session Manager plugin" in needs and "ssm:StartSession" in needs


@pytest.mark.parametrize("remote_debug", [False, None])
def test_a_job_without_remote_debug_is_refused_in_one_line(remote_debug: bool | None) -> None:
    with pytest.raises(ConfigError, match=r"was launched without remote_debug: relaunch with remote_debug=True") as err:
        cloud_debug.debug(_described(remote_debug), "algo-1", run=False)
    assert "\n" not in str(err.value) and "update-training-job" in str(err.value)


def test_a_host_the_job_does_not_have_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"--host='algo-3': the job has hosts algo-1 ... algo-2"):
        cloud_debug.debug(_described(True), "algo-3", run=False)


def test_run_starts_the_session_only_while_the_job_trains(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"the job is InProgress/Downloading: a session opens while it is InProgress/Training"):
        cloud_debug.debug(_described(True, "Downloading"), "algo-1", run=True)
    started: list[list[str]] = []
    monkeypatch.setattr(cloud_debug.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(cloud_debug.subprocess, "call", lambda argv: started.append(argv) or 0)
    assert cloud_debug.debug(_described(True), "algo-1", run=True) == 0
    assert started == [["aws", "ssm", "start-session", "--target", f"sagemaker-training-job:{NAME}_algo-1",
                        "--region", "eu-west-1"]]
    monkeypatch.setattr(cloud_debug.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match=r"--run=True: needs the AWS CLI"):
        cloud_debug.debug(_described(True), "algo-1", run=True)


def test_stacks_give_the_ssm_route_or_say_nothing_reaches_the_job(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match=rf"runs without remote_debug, and nothing else reaches its processes: .*sm-dist logs {NAME}"):
        cloud_debug.stacks(_described(False))
    assert cloud_debug.stacks(_described(True, count=3)) == 0
    out = capsys.readouterr().out
    assert cloud_debug.STACKS_IN_CONTAINER in out and f"--target sagemaker-training-job:{NAME}_algo-3" in out
    # a job that ended has no processes left, remote debug or not
    with pytest.raises(ConfigError, match=rf"^job='{NAME}': is Completed: its ranks' stacks went with its processes"):
        cloud_debug.stacks(_described(True, secondary="Completed", status="Completed"))


def test_the_cli_goes_to_the_cloud_when_no_local_job_has_that_name(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    described = _described(True)
    monkeypatch.setattr(Job, "describe", lambda self: described)
    assert cli.main(["debug", NAME, "--host", "algo-2"]) == 0
    assert f"sagemaker-training-job:{NAME}_algo-2" in capsys.readouterr().out
    assert cli.main(["debug", NAME, "--command", "ls"]) == 2
    assert "--command='ls': runs in a local job's host" in capsys.readouterr().err
