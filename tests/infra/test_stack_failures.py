"""What moto cannot do: a failed create, a no-op update, a stack stuck in ROLLBACK_COMPLETE.

botocore's Stubber plays CloudFormation's side of the conversation with a real client, so the
requests sm_dist sends are checked against the API model and the answers are real shapes.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from sm_dist.errors import InfraError
from sm_dist.provision import config, events, stack

botocore_stub = pytest.importorskip("botocore.stub")
ARN = "arn:aws:cloudformation:us-east-1:123456789012:stack/sm-dist/1"
T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


class _Session:
    """Hands out one pre-stubbed client."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self, service: str) -> Any:
        assert service == "cloudformation"
        return self._client


@pytest.fixture
def stubbed(aws_credentials: str) -> Any:
    boto3 = pytest.importorskip("boto3")
    cfn = boto3.Session(region_name=aws_credentials).client("cloudformation")
    with botocore_stub.Stubber(cfn) as stubber:
        yield cfn, stubber
        stubber.assert_no_pending_responses()


def _stack(status: str, outputs: bool = True) -> dict[str, Any]:
    stack_dict: dict[str, Any] = {"StackId": ARN, "StackName": "sm-dist", "StackStatus": status, "CreationTime": T0,
                                  "Description": "sm_dist: bucket and role"}
    if outputs:
        stack_dict["Outputs"] = [
            {"OutputKey": "RoleArn", "OutputValue": "arn:aws:iam::123456789012:role/r"},
            {"OutputKey": "BucketName", "OutputValue": "b"},
            {"OutputKey": "CheckpointUri", "OutputValue": "s3://b/checkpoints"},
        ]
    return {"Stacks": [stack_dict]}


def _event(n: int, logical: str, rtype: str, status: str, reason: str | None = None) -> dict[str, Any]:
    event = {"StackId": ARN, "EventId": f"e{n}", "StackName": "sm-dist", "LogicalResourceId": logical,
             "ResourceType": rtype, "ResourceStatus": status, "Timestamp": T0 + dt.timedelta(seconds=n)}
    if reason:
        event["ResourceStatusReason"] = reason
    return event


def _missing(stubber: Any) -> None:
    stubber.add_client_error("describe_stacks", "ValidationError", "Stack with id sm-dist does not exist")


def test_failed_create_names_the_failing_resource(stubbed: Any, config_home: Path) -> None:
    cfn, stubber = stubbed
    _missing(stubber)
    stubber.add_response("create_stack", {"StackId": ARN})
    stubber.add_response("describe_stacks", _stack("ROLLBACK_IN_PROGRESS", outputs=False))
    first = [_event(1, "sm-dist", "AWS::CloudFormation::Stack", "CREATE_IN_PROGRESS", "User Initiated"),
             _event(2, "Bucket", "AWS::S3::Bucket", "CREATE_FAILED", "my-ckpts already exists")]
    stubber.add_response("describe_stack_events", {"StackEvents": first[::-1]})
    stubber.add_response("describe_stacks", _stack("ROLLBACK_COMPLETE", outputs=False))
    later = [_event(3, "sm-dist", "AWS::CloudFormation::Stack", "ROLLBACK_COMPLETE")]
    stubber.add_response("describe_stack_events", {"StackEvents": (first + later)[::-1]})
    lines: list[str] = []
    with pytest.raises(InfraError) as info:
        stack.deploy("sm-dist", {"BucketName": "my-ckpts"}, session=_Session(cfn), on_event=lines.append, poll_seconds=0)
    assert str(info.value) == (
        "create of stack sm-dist ended in ROLLBACK_COMPLETE: Bucket (AWS::S3::Bucket): my-ckpts already exists"
    )
    assert lines == [
        "12:00:01 sm-dist (AWS::CloudFormation::Stack) CREATE_IN_PROGRESS: User Initiated",
        "12:00:02 Bucket (AWS::S3::Bucket) CREATE_FAILED: my-ckpts already exists",
        "12:00:03 sm-dist (AWS::CloudFormation::Stack) ROLLBACK_COMPLETE",
    ]
    assert config.read()["stacks"] == {}


def test_update_without_changes_is_not_an_error(stubbed: Any, config_home: Path) -> None:
    cfn, stubber = stubbed
    stubber.add_response("describe_stacks", _stack("CREATE_COMPLETE"))
    stubber.add_response("describe_stack_events", {"StackEvents": [_event(1, "sm-dist", "AWS::CloudFormation::Stack", "CREATE_COMPLETE")]})
    stubber.add_client_error("update_stack", "ValidationError", "No updates are to be performed.")
    info = stack.deploy("sm-dist", {}, session=_Session(cfn), poll_seconds=0)
    assert info.changed is False and info.status == "CREATE_COMPLETE"
    assert config.read()["stacks"]["sm-dist"]["bucket"] == "b"


def test_rolled_back_stack_must_be_deleted_first(stubbed: Any, config_home: Path) -> None:
    cfn, stubber = stubbed
    stubber.add_response("describe_stacks", _stack("ROLLBACK_COMPLETE", outputs=False))
    with pytest.raises(InfraError, match="sm-dist infra delete sm-dist"):
        stack.deploy("sm-dist", {}, session=_Session(cfn), poll_seconds=0)


def test_other_aws_errors_become_one_line(stubbed: Any, config_home: Path) -> None:
    cfn, stubber = stubbed
    stubber.add_client_error("describe_stacks", "AccessDenied", "User is not authorized to perform cloudformation:DescribeStacks")
    with pytest.raises(InfraError, match="AccessDenied: User is not authorized"):
        stack.deploy("sm-dist", {}, session=_Session(cfn), poll_seconds=0)


def test_watch_sleeps_between_polls_until_final() -> None:
    class Fake:
        statuses = ["CREATE_IN_PROGRESS", "CREATE_IN_PROGRESS", "CREATE_COMPLETE"]

        def describe_stacks(self, StackName: str) -> dict[str, Any]:
            return {"Stacks": [{"StackStatus": self.statuses.pop(0)}]}

        def get_paginator(self, name: str) -> Any:
            class Pages:
                def paginate(self, StackName: str) -> list[dict[str, Any]]:
                    return [{"StackEvents": []}]
            return Pages()

    naps: list[float] = []
    status, seen = events.watch(Fake(), ARN, poll_seconds=2.5, sleep=naps.append)
    assert (status, seen, naps) == ("CREATE_COMPLETE", [], [2.5, 2.5])
