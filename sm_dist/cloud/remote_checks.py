"""Read-only AWS checks the cloud backend makes just before it uploads anything.

The role may do what the job does (sm_dist.cloud.role_check, IAM's policy simulator), and the checkpoint and code buckets are in the job's region
(a bucket elsewhere makes SageMaker fail late, or pay cross-region traffic). The pure checks run
earlier, while the plan is made (`sm_dist.planning.preflight`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sm_dist.cloud.network_checks import check_network
from sm_dist.cloud.quotas import check_capacity
from sm_dist.cloud.role_check import check_role
from sm_dist.cloud.warm_pool import check_reuse
from sm_dist.errors import ConfigError
from sm_dist.planning.channels import SourceKind
from sm_dist.planning.reach import s3_parts

if TYPE_CHECKING:
    from boto3.session import Session

    from sm_dist.planning.plan import Plan
    from sm_dist.planning.warm_pool import PoolReuse

_log = logging.getLogger(__name__)


def remote_checks(plan: Plan, session: Session, validate_role: bool = True,
                  skip_code_bucket: bool = False) -> PoolReuse | None:
    """Read-only AWS checks before fit uploads: the role (IAM's simulator), then the regions of the
    checkpoint, code and data buckets, the VPC, capacity; returns the last warm pool the job could start
    on and whether it does (a plan with keep_alive_s; else None).

    `skip_code_bucket`: the code goes to the SDK default bucket, which fit creates if missing.
    """
    if validate_role and not _switched_off(os.environ):
        for warning in check_role(plan, session):
            _log.warning("%s", warning)
    elif validate_role:
        _log.warning("role %s not checked: SAGEMAKER_VALIDATE_ROLE=%s switches role validation off",
                     plan.role_arn, os.environ.get("SAGEMAKER_VALIDATE_ROLE"))
    else:
        _log.warning("role %s not checked (validate_role=False / --no-validate-role)", plan.role_arn)
    if plan.run is not None:  # a chain: the region's chain stack creates its next jobs (its supervisor)
        from sm_dist.cloud.supervision import check_chain_stack

        for warning in check_chain_stack(session, plan.region, plan.role_arn):
            _log.warning("%s", warning)
    # the data channels' S3 prefixes too: SageMaker reads them from the job's region (a local folder's
    # upload prefix is under the code's bucket, checked with it)
    data = [c.source for c in plan.channels.values() if c.kind is SourceKind.S3]
    uris = [plan.checkpoint_uri, None if skip_code_bucket else plan.code_s3_uri, *data]
    created_by_fit = f"s3://{plan.default_bucket}/" if skip_code_bucket and plan.default_bucket else None
    for bucket_uri in dict.fromkeys(u for u in uris if u and not (created_by_fit and u.startswith(created_by_fit))):
        check_bucket_region(session, bucket_uri, plan.region)
    check_network(plan, session)  # the VPC: subnets' free addresses, the groups' rules between hosts (EFA)
    pool = check_reuse(plan, session)  # docs/PLATFORM.md §1.13
    # the training quotas less what runs, or the training plan; a pool the job moves onto is not in the way
    check_capacity(plan, session, reusing=pool.job_name if pool is not None and pool.reusable else None)
    return pool


def _switched_off(environ: Mapping[str, str]) -> bool:
    """The SageMaker SDK's documented switch for its role validation, honoured for ours too."""
    return environ.get("SAGEMAKER_VALIDATE_ROLE", "true").lower() in ("false", "0", "no")


def check_bucket_region(session: Session, uri: str, region: str) -> None:
    """A bucket in another region makes SageMaker fail late (or pay cross-region traffic)."""
    from botocore.exceptions import ClientError

    bucket = s3_parts(uri)[0]
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
