"""Warm pools in the account: the last one this job could start on, and ending one (`sm-dist release`).

Before a job that keeps a pool (`keep_alive_s`) is created, `check_reuse` finds the newest job of the same
base name whose pool is `Available` (ListTrainingJobs `WarmPoolStatusEquals=Available`, newest first, then
DescribeTrainingJob) and compares it with the plan (`sm_dist.planning.warm_pool.pool_differences`); the
plan report shows the answer. `release` ends a pool: UpdateTrainingJob with
`ResourceConfig.KeepAlivePeriodInSeconds=0`, the developer guide's way (docs/PLATFORM.md §1.13). Reading
is never a refusal: a lookup that fails is a warning.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from sm_dist.errors import ConfigError
from sm_dist.planning.warm_pool import PoolReuse, pool_differences

if TYPE_CHECKING:
    from boto3.session import Session
    from mypy_boto3_sagemaker import SageMakerClient

    from sm_dist.planning.plan import Plan

_log = logging.getLogger(__name__)

#: The newest jobs of the base name described while looking for an Available pool.
MAX_DESCRIBED = 10
#: new_job_name's stamp (<base>-YYYYmmdd-HHMMSS-mmm), and a chain link's -N after it.
_STAMP = re.compile(r"-\d{8}-\d{6}-\d{3}(?:-\d+)?$")


def base_name(job_name: str) -> str:
    """The base job name a job name was made from (`sm-dist-20261126-193555-361` -> `sm-dist`); a name
    without sm_dist's stamp is its own base."""
    return _STAMP.sub("", job_name)


def available_pool(sagemaker: SageMakerClient, base: str, exclude: str | None = None) -> dict[str, Any] | None:
    """DescribeTrainingJob of the newest job of base name `base` whose warm pool is Available; None if none."""
    page = sagemaker.list_training_jobs(WarmPoolStatusEquals="Available", NameContains=base, SortBy="CreationTime",
                                        SortOrder="Descending", MaxResults=MAX_DESCRIBED)
    for summary in page.get("TrainingJobSummaries", []):
        name = summary["TrainingJobName"]
        if name == exclude or base_name(name) != base:  # NameContains matches other bases too
            continue
        desc: Any = sagemaker.describe_training_job(TrainingJobName=name)
        if (desc.get("WarmPoolStatus") or {}).get("Status") == "Available":  # the filter's answer, checked
            return dict(desc)
    return None


def check_reuse(plan: Plan, session: Session) -> PoolReuse | None:
    """For a plan that keeps a pool: the last Available pool of its base name and what keeps the plan
    off it; None when the plan keeps none, there is none, or it cannot be read (a warning)."""
    from botocore.exceptions import BotoCoreError, ClientError

    request = plan.request
    if not request["ResourceConfig"].get("KeepAlivePeriodInSeconds"):
        return None
    base = base_name(plan.run or plan.job_name)
    try:
        previous = available_pool(session.client("sagemaker", region_name=plan.region), base, exclude=plan.job_name)
    except (ClientError, BotoCoreError) as exc:
        _log.warning("warm pool: could not look for an Available pool of %s (%s); the job may still start on one",
                     base, getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__)
        return None
    if previous is None:
        return None
    retained = previous["WarmPoolStatus"].get("ResourceRetainedBillableTimeInSeconds")
    return PoolReuse(previous["TrainingJobName"], pool_differences(request, previous), retained)


def release(sagemaker: SageMakerClient, job_name: str, desc: Any) -> int | None:
    """End the warm pool of `job_name` (described as `desc`): UpdateTrainingJob with keep-alive 0; its
    retained billable seconds so far. A job whose pool is not Available: a ConfigError saying its state."""
    pool = desc.get("WarmPoolStatus") or {}
    status = pool.get("Status")
    if status != "Available":
        asked = (desc.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds")
        state = (f"its warm pool is {status}" + (f" (by {pool['ReusedByJob']})" if pool.get("ReusedByJob") else "")
                 if status else "SageMaker reports no warm pool for it (still running, or none kept: the warm-pool "
                 "quota is 0 by default)" if asked else "it keeps no warm pool (launched without keep_alive_s)")
        raise ConfigError("job", job_name, f"nothing to release: {state}")
    sagemaker.update_training_job(TrainingJobName=job_name, ResourceConfig={"KeepAlivePeriodInSeconds": 0})
    retained: int | None = pool.get("ResourceRetainedBillableTimeInSeconds")
    return retained


__all__ = ["MAX_DESCRIBED", "available_pool", "base_name", "check_reuse", "release"]
