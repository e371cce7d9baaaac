"""The cloud job in a notebook: its summary and cost as tables, wait() as one display, metrics from CloudWatch."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from sm_dist.cloud.cost import JobCost
from sm_dist.cloud.job import Job
from sm_dist.cloud.job_status import CloudSummary
from sm_dist.contract.job import JobStatus

EVIL = "<script>alert('x')</script>"
NAME = "sm-dist-20260101-000000-000"
ARN = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{NAME}"


def _cost() -> JobCost:
    return JobCost(name=NAME, instance_type="ml.p4d.24xlarge", instance_count=2, billable_s=1800, training_s=3600,
                   usd_per_hour=37.69, estimate_usd=40.0, max_cost_usd=None, spot=True)


def test_the_cloud_summary_and_cost_as_tables() -> None:
    status = JobStatus(NAME, "Failed", "Failed", "Training job failed", failure_reason=f"AlgorithmError: {EVIL}")
    summary = CloudSummary(status=status, cost=_cost(), checkpoint_uri="s3://b/ckpt", region="us-east-1")
    html = summary._repr_html_()
    assert "<script>" not in html and "spot saving" in html and "actual/estimate" in html
    assert html.count("<tr>") == len(str(summary).splitlines()) - 1
    assert repr(summary) == f"CloudSummary({NAME!r}, Failed / Failed, usd={_cost().usd})"
    assert "billable" in _cost()._repr_html_()
    assert "tensorboard" not in str(summary)  # launched without it
    watched = CloudSummary(status=status, cost=_cost(), checkpoint_uri=None, region=None, tensorboard_uri="s3://b/tb")
    assert f"  tensorboard     s3://b/tb (sm-dist tensorboard {NAME})" in str(watched).splitlines()
    assert "s3://b/tb" in watched._repr_html_() and watched.to_dict()["tensorboard_uri"] == "s3://b/tb"


def _describe(status: str, secondary: str, message: str) -> dict:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return {"TrainingJobName": NAME, "TrainingJobArn": ARN, "TrainingJobStatus": status, "SecondaryStatus": secondary,
            "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": now,
            "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"},
            "SecondaryStatusTransitions": [{"Status": secondary, "StartTime": now, "StatusMessage": message}]}


@pytest.fixture
def sagemaker():
    """A SageMaker client with botocore's Stubber; yields (client, stubber)."""
    boto3 = pytest.importorskip("boto3")
    from botocore.stub import Stubber

    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_wait_in_a_notebook_is_one_display_of_status_and_secondary(sagemaker, kernel) -> None:
    client, stub = sagemaker
    for state in [("InProgress", "Starting", "Launching requested ML instances"),
                  ("InProgress", "Training", f"Training image download completed {EVIL}"),
                  ("Completed", "Completed", "Training job completed")]:
        stub.add_response("describe_training_job", _describe(*state), {"TrainingJobName": NAME})
    final = Job(NAME, clients={"sagemaker": client}).wait(sleep=lambda s: None, poll_s=1)
    assert final.status == "Completed"
    assert [shown["text/plain"].split(f"{NAME} ")[-1] for shown in kernel] == [
        "InProgress / Starting: Launching requested ML instances",
        f"InProgress / Training: Training image download completed {EVIL}",
        "Completed / Completed: Training job completed"]
    assert all("<script>" not in shown["text/html"] for shown in kernel) and "secondary" in kernel[-1]["text/html"]


def test_a_job_that_cannot_be_described_still_shows(sagemaker) -> None:
    client, stub = sagemaker
    stub.add_client_error("describe_training_job", "ThrottlingException", "Rate exceeded")
    html = Job(NAME, clients={"sagemaker": client})._repr_html_()
    assert html.startswith(f"<p>Job(&#x27;{NAME}&#x27;): status unavailable") and "Rate exceeded" in html


def test_cloud_metrics_come_from_the_cloudwatch_logs(aws: str) -> None:
    import boto3

    from sm_dist.cloud.logs import LOG_GROUP

    logs = boto3.client("logs")
    logs.create_log_group(logGroupName=LOG_GROUP)
    stream = f"{NAME}/algo-1-1767225600"
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    base = int(time.time() * 1000) - 60_000
    lines = ["[sm_dist] step=1 loss=2.3 lr=0.001", "[sm_dist] step=2 loss=2.1 lr=0.001 samples_per_s=310.5",
             "[sm_dist] resumed step=2 epoch=0", "[sm_dist] step=3 loss=1.9 lr=0.001 samples_per_s=305.0"]
    logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream,
                        logEvents=[{"timestamp": base + i, "message": line} for i, line in enumerate(lines)])
    metrics = Job(NAME, region=aws).metrics()
    assert metrics.column("step") == [1, 2, 3] and metrics.throughput == "samples_per_s"
    assert metrics.column("samples_per_s") == [None, 310.5, 305.0] and metrics.resumed == (2,)


def test_wait_with_logs_streams_the_hosts_lines_then_the_status(aws: str, sagemaker) -> None:
    import io

    import boto3

    from sm_dist.cloud.logs import LOG_GROUP

    client, stub = sagemaker
    logs = boto3.client("logs")
    logs.create_log_group(logGroupName=LOG_GROUP)
    stream = f"{NAME}/algo-2-1767225600"
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream,
                        logEvents=[{"timestamp": int(time.time() * 1000) - 1000, "message": "[sm_dist] step=1 loss=2"}])
    for _ in range(2):  # following ends once the job is done; then the status is shown
        stub.add_response("describe_training_job", _describe("Completed", "Completed", "done"), {"TrainingJobName": NAME})
    out = io.StringIO()
    Job(NAME, clients={"sagemaker": client, "logs": logs}).wait(out=out, logs=True, sleep=lambda s: None)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[algo-2] [sm_dist] step=1 loss=2" and lines[-1].endswith("Completed / Completed: done")
