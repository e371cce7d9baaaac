"""A job on a SageMaker training plan (`training_plan_arn=`): the plan must hold it, checked with
DescribeTrainingPlan before anything is uploaded (docs/PLATFORM.md §1.10).

A training plan reserves instances of given types for given times; a job names it in
`ResourceConfig.TrainingPlanArn` and runs on that capacity, queued until the plan's instances are
free. So the plan must be for training jobs, not have expired or failed, and reserve the job's
instance type in a block of at least the job's instance count. The quota check does not apply.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

_log = logging.getLogger(__name__)

#: `TargetResources` of a plan training jobs can use.
TRAINING_JOB_TARGET = "training-job"
#: Statuses of a plan no job can run on any more.
ENDED_STATUSES = ("Expired", "Failed")


def check_training_plan(sagemaker: SageMakerClient, arn: str, instance_type: str, count: int, region: str) -> None:
    """Refuse a training plan that cannot hold this job; warn when the job will queue."""
    from botocore.exceptions import BotoCoreError, ClientError

    plan_region = arn.split(":")[3] if arn.count(":") >= 5 else ""
    if plan_region != region:
        raise ConfigError("training_plan_arn", arn, f"is a plan of {plan_region or 'no region'}; the job runs in "
                          f"{region}: use a plan of {region} or pass region='{plan_region}'")
    try:
        described: Any = sagemaker.describe_training_plan(TrainingPlanName=arn)  # the API takes the ARN as the name
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFound":
            raise ConfigError("training_plan_arn", arn, f"no such training plan in {region}; list yours with "
                              f"`aws sagemaker list-training-plans --region {region}`") from None
        _log.warning("training plan check skipped: could not describe %s (%s)", arn,
                     exc.response.get("Error", {}).get("Code"))
        return
    except BotoCoreError as exc:
        _log.warning("training plan check skipped: could not describe %s (%s)", arn, type(exc).__name__)
        return
    _check_described(described, arn, instance_type, count)


def _check_described(plan: Any, arn: str, instance_type: str, count: int) -> None:
    """The checks on DescribeTrainingPlan's answer (status, target, type, count)."""
    status = plan.get("Status")
    if status in ENDED_STATUSES:
        raise ConfigError("training_plan_arn", arn, f"is {status} ({plan.get('StatusMessage') or 'no message'}): "
                          "no job can run on it; reserve a new plan or leave training_plan_arn unset")
    targets = plan.get("TargetResources") or []
    if targets and TRAINING_JOB_TARGET not in targets:
        raise ConfigError("training_plan_arn", arn, f"reserves capacity for {', '.join(targets)}, not training jobs: "
                          "use a plan made for training-job")
    blocks = [b for b in plan.get("ReservedCapacitySummaries") or [] if b.get("InstanceType") == instance_type]
    if not blocks:
        reserved = sorted({f"{b.get('InstanceType')}" for b in plan.get("ReservedCapacitySummaries") or []})
        raise ConfigError("instance_type", instance_type, f"training plan {plan.get('TrainingPlanName')} reserves "
                          f"{', '.join(reserved) or 'no instances'}: pass one of those (--instance-type)")
    largest = max(b.get("TotalInstanceCount", 0) for b in blocks)
    if count > largest:
        raise ConfigError("instance_count", count, f"training plan {plan.get('TrainingPlanName')} reserves at most "
                          f"{largest} × {instance_type} at a time: pass instance_count={largest} or fewer")
    if status == "Pending":
        _log.warning("training plan %s is Pending (not yet paid): the job waits until it is Scheduled or Active", arn)
    available = plan.get("AvailableInstanceCount")
    if status == "Active" and available is not None and available < count:
        _log.warning("training plan %s has %d of its instances free now; this job needs %d and waits for the rest",
                     arn, available, count)


__all__ = ["check_training_plan"]
