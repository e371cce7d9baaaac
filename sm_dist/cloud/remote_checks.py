"""Read-only AWS checks the cloud backend makes just before it uploads anything.

The role passes the SDK's validation, and the checkpoint and code buckets are in the job's region
(a bucket elsewhere makes SageMaker fail late, or pay cross-region traffic). The pure checks run
earlier, while the plan is made (`sm_dist.planning.preflight`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sm_dist.cloud.network_checks import check_network
from sm_dist.cloud.quotas import check_capacity
from sm_dist.errors import ConfigError
from sm_dist.planning.channels import SourceKind

if TYPE_CHECKING:
    from boto3.session import Session

    from sm_dist.planning.plan import Plan

_log = logging.getLogger(__name__)


def remote_checks(plan: Plan, session: Session, validate_role: bool = True, skip_code_bucket: bool = False) -> None:
    """Read-only AWS checks before fit uploads: the role (via the SDK), then the regions of the
    checkpoint, code and data buckets.

    `skip_code_bucket`: the code goes to the SDK default bucket, which fit creates if missing.
    """
    if validate_role:
        from sagemaker.core.helper.iam_role_resolver import resolve_and_validate_role
        from sagemaker.core.helper.session_helper import Session

        try:
            resolve_and_validate_role(provided_role=plan.role_arn, sagemaker_session=Session(boto_session=session))
        except ValueError as exc:  # RoleValidationError is a ValueError too
            raise ConfigError("role", plan.role_arn, str(exc)) from None
    # the data channels' S3 prefixes too: SageMaker reads them from the job's region (a local folder's
    # upload prefix is under the code's bucket, checked with it)
    data = [c.source for c in plan.channels.values() if c.kind is SourceKind.S3]
    uris = [plan.checkpoint_uri, None if skip_code_bucket else plan.code_s3_uri, *data]
    created_by_fit = f"s3://{plan.default_bucket}/" if skip_code_bucket and plan.default_bucket else None
    for bucket_uri in dict.fromkeys(u for u in uris if u and not (created_by_fit and u.startswith(created_by_fit))):
        check_bucket_region(session, bucket_uri, plan.region)
    check_network(plan, session)  # the VPC: subnets' free addresses, the groups' rules between hosts (EFA)
    check_capacity(plan, session)  # the training quotas less what runs, or the training plan


def check_bucket_region(session: Session, uri: str, region: str) -> None:
    """A bucket in another region makes SageMaker fail late (or pay cross-region traffic)."""
    from botocore.exceptions import ClientError

    bucket = uri[len("s3://"):].split("/", 1)[0]
    try:
        location = session.client("s3").get_bucket_location(Bucket=bucket).get("LocationConstraint")
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchBucket", "404"):
            raise ConfigError("s3 bucket", bucket, f"does not exist (from {uri}); create it or use sm-dist infra deploy") from None
        _log.warning("could not check the region of bucket %s (%s)", bucket, code)
        return
    bucket_region = location or "us-east-1"  # the API returns null for us-east-1
    if bucket_region != region:
        raise ConfigError("s3 bucket", bucket, f"is in {bucket_region}, the job runs in {region}; use a bucket in {region}")


__all__ = ["check_bucket_region", "remote_checks"]
