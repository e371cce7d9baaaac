"""A chained run in the cloud, against moto: `fit --chain` creates its first job tagged as a link, the
supervisor decides after it, and `sm-dist status RUN` lists the jobs, what was decided, and the sums."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _project import CKPT_BUCKET, ROLE_ARN, deploy_chain_stack

from sm_dist.cli import main
from sm_dist.cloud import supervisor
from sm_dist.cloud.run import Run

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _fit(source_dir: Path) -> list[str]:
    return ["fit", "train.py", "--source-dir", str(source_dir), "--instance-type", "ml.p4d.24xlarge",
            "--instance-count", "2", "--strategy", "fsdp", "--role", ROLE_ARN, "--region", "us-east-1",
            "--checkpoint-s3-uri", f"s3://{CKPT_BUCKET}/runs", "--spot", "--max-cost-usd", "2000", "--chain",
            "--max-links", "4", "--on-demand-after", "2", "--job-name", "pretrain", "--json"]


def _chain_stack(role: str = ROLE_ARN) -> str:
    return deploy_chain_stack(role)


def _nothing_created() -> bool:
    import boto3

    listed = boto3.client("s3").list_objects_v2(Bucket=CKPT_BUCKET).get("KeyCount", 0)
    return boto3.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == [] and listed == 0


def test_fit_chain_without_the_chain_stack_is_refused_naming_it(aws: str, source_dir: Path, capsys) -> None:
    """Finding 9 of issue 39: without the region's chain stack, or with one whose supervisor may not pass the
    job's role, the run stopped after its first job; now fit refuses before anything is uploaded."""
    assert main(_fit(source_dir)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sm-dist fit: error: chain='sm-dist-chain': no chain stack sm-dist-chain in us-east-1") and "\n" not in err
    assert "sm-dist infra deploy --region us-east-1 --template sm-dist-chain.yaml --stack-name sm-dist-chain" in err
    assert _nothing_created()
    import boto3

    from sm_dist.cloud.supervision import check_chain_stack
    from sm_dist.errors import ConfigError

    _chain_stack(role="arn:aws:iam::123456789012:role/another-role")  # the check fit makes, on its own
    with pytest.raises(ConfigError) as refused:
        check_chain_stack(boto3.Session(region_name="us-east-1"), "us-east-1", ROLE_ARN)
    assert refused.value.field == "role" and "may pass only arn:aws:iam::123456789012:role/another-role" in str(
        refused.value)
    assert check_chain_stack(boto3.Session(region_name="us-east-1"), "us-east-1",
                             "arn:aws:iam::123456789012:role/another-role") == []


def test_fit_chain_creates_the_first_job_then_status_follows_the_run(aws: str, source_dir: Path, capsys) -> None:
    import boto3

    _chain_stack()
    assert main(_fit(source_dir)) == 0
    assert json.loads(capsys.readouterr().out)["job_name"] == "pretrain"
    sagemaker = boto3.client("sagemaker")
    desc = sagemaker.describe_training_job(TrainingJobName="pretrain-1")
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=desc["TrainingJobArn"])["Tags"]}
    assert tags["sm-dist:run"] == "pretrain" and tags["sm-dist:link"] == "1"
    assert "max-links=4" in tags["sm-dist:chain"] and "on-demand-after=2" in tags["sm-dist:chain"]
    # moto's job completed at once; the supervisor has not seen it yet
    assert main(["status", "pretrain"]) == 0
    out = capsys.readouterr().out
    assert "run pretrain: InProgress / Deciding" in out and "is the chain stack deployed" in out
    supervisor.handle({"detail": {"TrainingJobName": "pretrain-1"}}, sagemaker)
    assert '"action": "done"' in capsys.readouterr().out  # the function's log line
    assert main(["status", "pretrain", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["status"] == "Completed" and status["done"] is True
    assert [job["name"] for job in status["jobs"]] == ["pretrain-1"]
    assert status["jobs"][0]["decision"].startswith("done: pretrain-1 completed")
    assert main(["status", "pretrain-1"]) == 0  # a job of the run is still a job
    assert "pretrain-1: Completed / Completed" in capsys.readouterr().out


def test_a_run_lists_every_job_and_what_followed_it(aws: str, capsys) -> None:
    import boto3

    sagemaker = boto3.client("sagemaker")
    decisions = ["next: pretrain-1 reached its MaxRuntime; next: pretrain-2",
                 "retry: pretrain-2 got no capacity; waiting 60 s, then pretrain-3", None]
    for number, decision in enumerate(decisions, start=1):
        tags = [{"Key": "sm-dist:run", "Value": "pretrain"}, {"Key": "sm-dist:link", "Value": str(number)}]
        if decision:
            tags.append({"Key": "sm-dist:chain-decision", "Value": decision})
        sagemaker.create_training_job(
            TrainingJobName=f"pretrain-{number}", RoleArn=ROLE_ARN, Tags=tags,
            AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13",
                                    "TrainingInputMode": "File"},
            OutputDataConfig={"S3OutputPath": f"s3://{CKPT_BUCKET}/out"},
            ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
            StoppingCondition={"MaxRuntimeInSeconds": 3600})
    run = Run("pretrain", region="us-east-1")
    summary = run.summary()
    assert [link.name for link in summary.links] == ["pretrain-1", "pretrain-2", "pretrain-3"]
    assert summary.links[1].decision is not None and summary.links[1].decision.startswith("retry")
    assert summary.status.status == "InProgress" and summary.status.secondary == "Deciding"
    text = str(summary)
    assert "total           3 jobs, 0 spot interruptions" in text and "pretrain-2" in text
    assert run.status().name == "pretrain" and not run.status().done
    assert main(["status", "nothing-here"]) == 2
    assert "no job of that name here (no local run of that name under " in capsys.readouterr().err


def test_status_reports_the_event_the_supervisor_failed_on(aws: str, source_dir: Path, capsys) -> None:
    """Finding 7 of issue 39: an event the supervisor raised on (after Lambda's retries) is kept in the chain
    stack's queue, as Lambda's dead-letter queue writes it (the event as the body, ErrorMessage as an
    attribute), and the run's status says so instead of waiting for a decision that will never come."""
    import boto3

    queue = _chain_stack()
    assert main(_fit(source_dir)) == 0
    capsys.readouterr()
    sqs = boto3.client("sqs")
    attributes = {"RequestID": {"DataType": "String", "StringValue": "7f1c"},
                  "ErrorCode": {"DataType": "Number", "StringValue": "200"},
                  "ErrorMessage": {"DataType": "String", "StringValue": "KeyError: 'TrainingJobArn'"}}
    other = {"detail": {"TrainingJobName": "another-run-1", "TrainingJobStatus": "Stopped"}}
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(other), MessageAttributes=attributes)
    assert Run("pretrain", session=boto3.Session(region_name="us-east-1")).status().secondary == "Deciding"
    mine = {"detail": {"TrainingJobName": "pretrain-1", "TrainingJobStatus": "Completed"}}
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(mine), MessageAttributes=attributes)
    assert main(["status", "pretrain"]) == 0
    out = capsys.readouterr().out
    assert "run pretrain: Failed / Failed" in out and "KeyError: 'TrainingJobArn'" in out and queue in out
    assert len(sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]) == 2  # read, not taken
    # an event EventBridge could not hand to the function: its dead-letter message names the error its own way
    from sm_dist.cloud.supervision import failed_event

    undelivered = {"ERROR_CODE": {"DataType": "String", "StringValue": "SDK_CLIENT_ERROR"},
                   "ERROR_MESSAGE": {"DataType": "String", "StringValue": "Function does not exist"}}
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({"detail": {"TrainingJobName": "other-run-3"}}),
                     MessageAttributes=undelivered)
    found = failed_event(boto3.Session(region_name="us-east-1"), "us-east-1", "other-run-3")
    assert found is not None and "(Function does not exist;" in found


def test_a_chain_whose_checkpoint_uri_is_no_tag_value_is_refused(aws: str, source_dir: Path, capsys) -> None:
    """Finding 6 of issue 39: the supervisor finds a link's checkpoints by its sm-dist:checkpoint-uri tag when the
    request has no CheckpointConfig; a URI that is no tag value (over 256 characters) was left untagged."""
    args = _fit(source_dir)
    args[args.index("--checkpoint-s3-uri") + 1] = f"s3://{CKPT_BUCKET}/" + "run/" * 64
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "finds each job's checkpoints by its tag sm-dist:checkpoint-uri" in err and _nothing_created()
