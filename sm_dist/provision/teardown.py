"""Delete the sm_dist infra stack, refusing to destroy checkpoints unless asked.

CloudFormation cannot delete a non-empty bucket; instead of letting it fail halfway (role gone,
bucket left), `delete()` looks first: a bucket with objects stops the delete before anything
changes, unless `empty_bucket=True`, in which case every object version is deleted first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from sm_dist.errors import ConfigError, InfraError
from sm_dist.provision import aws, config, events, outputs, params

if TYPE_CHECKING:
    from boto3.session import Session
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

_log = logging.getLogger(__name__)

_BATCH = 1000  # DeleteObjects takes at most 1000 keys per call


def stack_buckets(cfn: CloudFormationClient, stack_id: str) -> list[str]:
    """Names of the S3 buckets a stack created (its AWS::S3::Bucket resources)."""
    names: list[str] = []
    with aws.aws_errors(f"resources of stack {stack_id}"):
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack_id):
            for res in page["StackResourceSummaries"]:
                if res["ResourceType"] == "AWS::S3::Bucket" and res.get("PhysicalResourceId"):
                    if res.get("ResourceStatus") != "DELETE_COMPLETE":
                        names.append(res["PhysicalResourceId"])
    return names


def _versions(s3: S3Client, bucket: str) -> Iterator[ObjectIdentifierTypeDef]:
    """Yield {"Key", "VersionId"} for every object version and delete marker; nothing if the bucket is gone."""
    try:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for item in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]:
                yield {"Key": item["Key"], "VersionId": item["VersionId"]}
    except Exception as exc:
        if aws.error_code(exc) != "NoSuchBucket":
            raise


def first_object(s3: S3Client, bucket: str) -> str | None:
    """The key of some object (or version) in `bucket`, or None when it is empty or gone."""
    with aws.aws_errors(f"list bucket {bucket}"):
        return next((v["Key"] for v in _versions(s3, bucket)), None)


def empty(s3: S3Client, bucket: str) -> int:
    """Delete every object version and delete marker in `bucket`; returns how many were deleted."""
    deleted = 0
    with aws.aws_errors(f"empty bucket {bucket}"):
        batch: list[ObjectIdentifierTypeDef] = []
        # List everything first: deleting while paginating the listing could skip versions.
        for version in [*_versions(s3, bucket)]:
            batch.append(version)
            if len(batch) == _BATCH:
                deleted += _delete_batch(s3, bucket, batch)
                batch = []
        if batch:
            deleted += _delete_batch(s3, bucket, batch)
    _log.info("deleted %d object versions from %s", deleted, bucket)
    return deleted


def _delete_batch(s3: S3Client, bucket: str, batch: list[ObjectIdentifierTypeDef]) -> int:
    result = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
    errors = result.get("Errors") or []
    if errors:
        first = errors[0]
        raise InfraError(f"could not delete s3://{bucket}/{first.get('Key')}: {first.get('Code')}: {first.get('Message')}")
    return len(batch)


def delete(
    stack_name: str,
    *,
    session: Session | None = None,
    empty_bucket: bool = False,
    on_event: events.EventSink | None = None,
    poll_seconds: float = events.POLL_SECONDS,
    environ: Mapping[str, str] | None = None,
) -> str:
    """Delete `stack_name` and wait; returns the final status (DELETE_COMPLETE).

    A non-empty stack bucket -> InfraError and nothing is deleted, unless `empty_bucket`.
    """
    name = params.check_stack_name(stack_name)
    cfn = aws.cloudformation(session)
    stack = outputs.describe_stack(cfn, name)
    if stack is None:
        raise ConfigError("stack", name, f"no such stack in region {aws.region_of(cfn)}; check the name, AWS_REGION and AWS_PROFILE")
    outputs.require_ours(stack)
    if not events.is_final(stack["StackStatus"]):
        raise InfraError(f"stack {name} is {stack['StackStatus']}; wait for it to finish, then delete")
    stack_id = stack["StackId"]
    buckets = stack_buckets(cfn, stack_id)
    s3 = aws.s3(session)
    for bucket in buckets:
        key = first_object(s3, bucket)
        if key is not None and not empty_bucket:
            raise InfraError(
                f"bucket {bucket} of stack {name} is not empty (e.g. {key!r}); nothing was deleted. "
                "Copy what you need, then rerun with --empty-bucket to delete its objects with the stack"
            )
    for bucket in buckets if empty_bucket else []:
        empty(s3, bucket)
    after = events.latest_event_id(cfn, stack_id)
    with aws.aws_errors(f"delete stack {name}"):
        cfn.delete_stack(StackName=stack_id)
    status, seen = events.watch(cfn, stack_id, after=after, on_event=on_event, poll_seconds=poll_seconds)
    if status != "DELETE_COMPLETE":
        raise InfraError(events.failure_summary(name, "delete", status, seen))
    config.forget(name, environ)
    return status
