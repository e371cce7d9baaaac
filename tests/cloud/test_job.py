"""The Job handle: status/wait/stop/cost with botocore's Stubber; logs and checkpoints on moto."""

from __future__ import annotations

import io
import json
import time
from datetime import datetime, timezone

import pytest
from botocore.stub import Stubber

from sm_dist.cloud.job import Job
from sm_dist.cloud.logs import LOG_GROUP, iter_log_lines
from sm_dist.contract.checkpoint import FileEntry, Manifest
from sm_dist.errors import ConfigError
from sm_dist.planning.tags import TAG_ESTIMATE

NAME = "sm-dist-20260101-000000-000"
ARN = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{NAME}"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def describe(status: str, secondary: str, message: str = "", **extra) -> dict:
    return {
        "TrainingJobName": NAME, "TrainingJobArn": ARN, "TrainingJobStatus": status, "SecondaryStatus": secondary,
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": NOW, "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"},
        "SecondaryStatusTransitions": [{"Status": secondary, "StartTime": NOW, "StatusMessage": message}],
        **extra,
    }


@pytest.fixture
def sagemaker():
    import boto3

    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_wait_prints_each_transition(sagemaker) -> None:
    client, stub = sagemaker
    for state in [("InProgress", "Starting", "Launching requested ML instances"), ("InProgress", "Starting", "Launching requested ML instances"),
                  ("InProgress", "Training", "Training image download completed"), ("Stopping", "Stopping", ""),
                  ("Stopped", "Stopped", "")]:
        stub.add_response("describe_training_job", describe(*state), {"TrainingJobName": NAME})
    out, sleeps = io.StringIO(), []
    final = Job(NAME, clients={"sagemaker": client}).wait(out=out, sleep=sleeps.append, poll_s=7)
    assert final.status == "Stopped" and final.done
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and "Starting: Launching requested ML instances" in lines[0] and "Stopped / Stopped" in lines[-1]
    assert sleeps == [7, 7, 7, 7]


def test_stop_running_and_finished(sagemaker) -> None:
    client, stub = sagemaker
    stub.add_response("stop_training_job", {}, {"TrainingJobName": NAME})
    stub.add_response("describe_training_job", describe("Stopping", "Stopping"), {"TrainingJobName": NAME})
    stub.add_client_error("stop_training_job", "ValidationException", "already completed")
    stub.add_response("describe_training_job", describe("Completed", "Completed"), {"TrainingJobName": NAME})
    job = Job(NAME, clients={"sagemaker": client})
    assert job.stop().status == "Stopping"
    assert job.stop().status == "Completed"


def test_cost_after_a_spot_job(sagemaker) -> None:
    client, stub = sagemaker
    stub.add_response("describe_training_job", describe(
        "Completed", "Completed", BillableTimeInSeconds=1800, TrainingTimeInSeconds=3600,
        EnableManagedSpotTraining=True), {"TrainingJobName": NAME})
    stub.add_response("describe_training_job", describe("Completed", "Completed"), {"TrainingJobName": NAME})
    stub.add_response("list_tags", {"Tags": [{"Key": TAG_ESTIMATE, "Value": "40.00"}]}, {"ResourceArn": ARN})
    cost = Job(NAME, region="us-east-1", clients={"sagemaker": client}).cost()
    from sm_dist.catalog import get_instance

    price = get_instance("ml.p4d.24xlarge").sagemaker_usd_per_hour
    assert cost.usd == pytest.approx(0.5 * 2 * price)
    assert cost.spot_savings == pytest.approx(0.5)
    text = str(cost)
    assert "spot saving  50%" in text and "$40.00 before launch" in text and "actual/estimate" in text


def test_status_of_unknown_job_is_a_config_error(sagemaker) -> None:
    client, stub = sagemaker
    stub.add_client_error("describe_training_job", "ValidationException", f"Could not find training job '{ARN}'")
    with pytest.raises(ConfigError, match="no such training job"):
        Job.attach(NAME, clients={"sagemaker": client})


def test_logs_interleave_hosts_and_follow_without_repeats(aws: str) -> None:
    import boto3

    logs = boto3.client("logs")
    logs.create_log_group(logGroupName=LOG_GROUP)
    streams = {h: f"{NAME}/{h}-1767225600" for h in ("algo-1", "algo-2")}
    for stream in streams.values():
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName="other-job/algo-1-1")

    def put(host: str, ts: int, msg: str) -> None:
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=streams[host],
                            logEvents=[{"timestamp": ts, "message": msg}])

    base = int(time.time() * 1000) - 60_000  # CloudWatch (and moto) reject events older than 14 days
    put("algo-1", base + 1, "a1"), put("algo-2", base + 2, "b1"), put("algo-1", base + 3, "a2")
    logs.put_log_events(logGroupName=LOG_GROUP, logStreamName="other-job/algo-1-1",
                        logEvents=[{"timestamp": base, "message": "not ours"}])
    later = iter([lambda: put("algo-2", base + 4, "b2"), lambda: None])
    lines = list(iter_log_lines(logs, NAME, follow=True, is_done=lambda: True, sleep=lambda s: next(later)()))
    assert lines == ["[algo-1] a1", "[algo-2] b1", "[algo-1] a2", "[algo-2] b2"]


def test_logs_before_the_job_wrote_any(aws: str) -> None:
    import boto3

    assert list(iter_log_lines(boto3.client("logs"), NAME)) == []


def test_checkpoints_newest_first(aws: str, sagemaker) -> None:
    import boto3

    client, stub = sagemaker
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="ckpts")
    files = {"model/__0_0.distcp": FileEntry(size=100, sha256="0" * 64)}
    # 15: a manifest that is there but does not parse (a foreign or truncated file) is not a commit,
    # exactly as the runtime's loader sees it.
    manifests = {5: Manifest(step=5, epoch=0, world_size=4, sharded=True, strategy="fsdp", files=files).to_json(),
                 10: Manifest(step=10, epoch=0, world_size=4, sharded=True, strategy="fsdp", files=files).to_json(),
                 15: json.dumps({"step": 15, "world_size": 4, "files": {}}), 20: None}
    for step, text in manifests.items():
        s3.put_object(Bucket="ckpts", Key=f"run/step-{step:09d}/model/__0_0.distcp", Body=b"x" * 100)
        if text is not None:
            s3.put_object(Bucket="ckpts", Key=f"run/step-{step:09d}/manifest.json", Body=text)
    s3.put_object(Bucket="ckpts", Key="run/notes.txt", Body=b"x")
    stub.add_response("describe_training_job", describe("Completed", "Completed", CheckpointConfig={"S3Uri": "s3://ckpts/run"}),
                      {"TrainingJobName": NAME})
    found = Job(NAME, clients={"sagemaker": client, "s3": s3}).checkpoints()
    assert [(c.step, c.committed) for c in found] == [(20, False), (15, False), (10, True), (5, True)]
    found = found[1:]
    assert found[1].total_bytes == 100 and found[1].world_size == 4 and found[1].uri == "s3://ckpts/run/step-000000010/"


def test_a_finished_job_is_a_calibration(sagemaker) -> None:
    """`sm-dist cost JOB --calibration-out`: the planned tokens over the Training phase on the job's GPUs."""
    from datetime import timedelta

    from sm_dist.planning.tags import TAG_FLOPS_PARAMS, TAG_TOKENS

    client, stub = sagemaker
    phases = [{"Status": "Downloading", "StartTime": NOW, "EndTime": NOW + timedelta(minutes=5)},
              {"Status": "Training", "StartTime": NOW + timedelta(minutes=5), "EndTime": NOW + timedelta(hours=2, minutes=5)},
              {"Status": "Uploading", "StartTime": NOW + timedelta(hours=2, minutes=5)}]
    done = describe("Completed", "Completed", TrainingTimeInSeconds=7800)
    done["SecondaryStatusTransitions"] = phases
    stub.add_response("describe_training_job", done, {"TrainingJobName": NAME})
    stub.add_response("describe_training_job", done, {"TrainingJobName": NAME})
    tags = [{"Key": TAG_TOKENS, "Value": "3.456e+08"}, {"Key": TAG_FLOPS_PARAMS, "Value": "6738415616"}]
    stub.add_response("list_tags", {"Tags": tags}, {"ResourceArn": ARN})
    cal = Job(NAME, region="us-east-1", clients={"sagemaker": client}).calibration()
    assert cal.gpus == 16 and cal.gpu_family == "A100" and cal.source == "job"
    assert cal.tokens_per_second == pytest.approx(3.456e8 / 7200 / 16)  # the Training phase only: 2 h, not 7800 s
    assert cal.mfu == pytest.approx(cal.tokens_per_second * 6 * 6738415616 / (cal.peak_tflops * 1e12))


def test_only_a_completed_job_with_its_work_tagged_is_a_calibration(sagemaker) -> None:
    client, stub = sagemaker
    stub.add_response("describe_training_job", describe("Failed", "Failed"), {"TrainingJobName": NAME})
    stub.add_response("describe_training_job", describe("Failed", "Failed"), {"TrainingJobName": NAME})
    stub.add_response("list_tags", {"Tags": []}, {"ResourceArn": ARN})
    with pytest.raises(ConfigError, match="is Failed: only a completed job"):
        Job(NAME, region="us-east-1", clients={"sagemaker": client}).calibration()
    stub.add_response("describe_training_job", describe("Completed", "Completed"), {"TrainingJobName": NAME})
    stub.add_response("describe_training_job", describe("Completed", "Completed"), {"TrainingJobName": NAME})
    stub.add_response("list_tags", {"Tags": []}, {"ResourceArn": ARN})
    with pytest.raises(ConfigError, match="launch with tokens= and the model size"):
        Job(NAME, region="us-east-1", clients={"sagemaker": client}).calibration()
