"""A job on a SageMaker training plan: `training_plan_arn=` reaches ResourceConfig.TrainingPlanArn and
DescribeTrainingPlan is checked before anything is uploaded, instead of the quota (docs/PLATFORM.md §1.10).

moto has no DescribeTrainingPlan: its answers come from botocore's Stubber or `_answers.answer`,
checked against the service model's output shape.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from _answers import answer, error, sagemaker_quota
from _project import CKPT_BUCKET, ROLE_ARN, aws_state

import sm_dist
from sm_dist.cloud.training_plans import check_training_plan
from sm_dist.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

P4D = "ml.p4d.24xlarge"
ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/team-p4d-week"


def _described(status: str = "Active", blocks: tuple[tuple[str, int], ...] = ((P4D, 4),), available: int | None = None,
               targets: tuple[str, ...] = ("training-job",)) -> dict[str, Any]:
    """DescribeTrainingPlan's answer: the plan and its reserved capacity blocks (all free by default)."""
    start = datetime(2026, 11, 26, tzinfo=timezone.utc)
    total = sum(n for _, n in blocks)
    free = total if available is None else available
    return {"TrainingPlanArn": ARN, "TrainingPlanName": "team-p4d-week", "Status": status, "DurationHours": 168,
            "StartTime": start, "TotalInstanceCount": total, "AvailableInstanceCount": free,
            "InUseInstanceCount": total - free, "TargetResources": list(targets),
            "ReservedCapacitySummaries": [
                {"ReservedCapacityArn": f"arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc-{i}",
                 "InstanceType": kind, "TotalInstanceCount": n, "Status": status, "AvailabilityZone": "us-east-1a",
                 "StartTime": start, "DurationHours": 168} for i, (kind, n) in enumerate(blocks)]}


def _check(aws_credentials: str, described: dict[str, Any] | None, instance_type: str = P4D, count: int = 2,
           code: str | None = None) -> None:
    import boto3
    from botocore.stub import Stubber

    sagemaker = boto3.client("sagemaker", region_name=aws_credentials)
    with Stubber(sagemaker) as stub:
        if code:
            stub.add_client_error("describe_training_plan", code, "no", expected_params={"TrainingPlanName": ARN})
        elif described is not None:
            stub.add_response("describe_training_plan", described, {"TrainingPlanName": ARN})
        check_training_plan(sagemaker, ARN, instance_type, count, aws_credentials)


def test_a_plan_that_reserves_the_type_and_count_passes(aws_credentials: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        _check(aws_credentials, _described(), count=4)
    assert caplog.text == ""


@pytest.mark.parametrize(("described", "instance_type", "count", "expected"), [
    (_described("Expired"), P4D, 2, r"training_plan_arn=.*: is Expired .* no job can run on it"),
    (_described(targets=("hyperpod-cluster",)), P4D, 2, r"reserves capacity for hyperpod-cluster, not training jobs"),
    (_described(blocks=(("ml.p5.48xlarge", 2),)), P4D, 2,
     r"instance_type='ml.p4d.24xlarge': training plan team-p4d-week reserves ml.p5.48xlarge: pass one of those"),
    (_described(blocks=((P4D, 4), (P4D, 2))), P4D, 6,
     r"instance_count=6: training plan team-p4d-week reserves at most 4 × ml.p4d.24xlarge at a time"),
], ids=["expired", "not for training jobs", "another type", "more than a block"])
def test_a_plan_that_cannot_hold_the_job_is_refused(aws_credentials: str, described: dict[str, Any],
                                                    instance_type: str, count: int, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        _check(aws_credentials, described, instance_type, count)


def test_an_unknown_plan_is_refused_and_another_regions_without_a_call(aws_credentials: str) -> None:
    with pytest.raises(ConfigError, match=r"no such training plan in us-east-1; list yours with"):
        _check(aws_credentials, None, code="ResourceNotFound")
    import boto3
    from botocore.stub import Stubber

    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(sagemaker), pytest.raises(ConfigError, match=r"is a plan of us-west-2; the job runs in us-east-1"):
        check_training_plan(sagemaker, ARN.replace("us-east-1", "us-west-2"), P4D, 2, "us-east-1")  # no call queued


def test_a_busy_plan_queues_the_job_with_a_warning(aws_credentials: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sm_dist.cloud.training_plans"):
        _check(aws_credentials, _described(available=1), count=2)
    assert "has 1 of its instances free now; this job needs 2 and waits for the rest" in caplog.text


def test_a_plan_that_cannot_be_described_is_a_warning(aws_credentials: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sm_dist.cloud.training_plans"):
        _check(aws_credentials, None, code="AccessDeniedException")
    assert "training plan check skipped: could not describe" in caplog.text


def test_a_malformed_arn_is_refused_when_the_settings_are_read(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"training_plan_arn='team-p4d-week': expected the plan's ARN"):
        sm_dist.plan("train.py", source_dir=str(source_dir), instance_type=P4D, training_plan_arn="team-p4d-week",
                     local=True)


# --- through fit and the CLI -------------------------------------------------------------------------

def _session(described: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """A session whose DescribeTrainingPlan is answered; the quota calls are recorded (none expected)."""
    import boto3

    session = boto3.Session(region_name="us-east-1")
    answer(session, "sagemaker", "DescribeTrainingPlan", described)
    quota_calls = answer(session, "service-quotas", "ListAWSDefaultServiceQuotas", error("AccessDeniedException"))
    return session, quota_calls


def _fit(source_dir: Path, session: Any, count: int) -> sm_dist.Job:
    return sm_dist.fit("train.py", session=session, source_dir=str(source_dir), instance_type=P4D,
                       instance_count=count, strategy="ddp", role=ROLE_ARN, max_runtime_s=3600,
                       checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/c", training_plan_arn=ARN)


def test_a_job_on_a_plan_names_it_and_skips_the_quota(aws: str, source_dir: Path) -> None:
    session, quota_calls = _session(_described())
    job = _fit(source_dir, session, 4)
    assert job.plan.request["ResourceConfig"]["TrainingPlanArn"] == ARN
    assert quota_calls == []  # reserved capacity: the quota is not read
    assert aws_state()[1] == [job.name]


def test_a_plan_that_cannot_hold_the_job_creates_nothing(aws: str, source_dir: Path) -> None:
    session, _ = _session(_described(blocks=((P4D, 2),)))
    with pytest.raises(ConfigError, match=r"instance_count=4: training plan team-p4d-week reserves at most 2"):
        _fit(source_dir, session, 4)
    assert aws_state() == ([CKPT_BUCKET], [], 0)


def test_the_cli_flag_reaches_the_request(aws: str, source_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sm_dist.cli import main

    code = main(["fit", "train.py", "--source-dir", str(source_dir), "--instance-type", P4D, "--role", ROLE_ARN,
                 "--max-runtime-s", "3600", "--training-plan-arn", ARN, "--dry-run", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["request"]["ResourceConfig"]["TrainingPlanArn"] == ARN


def test_a_plan_with_fallback_types_goes_on_its_own_types_preference(aws: str, source_dir: Path) -> None:
    """Issue 39, finding 2: a job-level TrainingPlanArn beside InstancePreferences is refused by the API (the
    model: per-preference TrainingPlanArns are mutually exclusive with it, and the plan's type must match the
    preference's); the plan now goes on instance_type's preference, the fallbacks run on demand, the plan is
    checked and the fallbacks' quotas are read."""
    import boto3
    from _project import deploy_chain_stack

    from sm_dist.cloud.quotas import quota_name
    from sm_dist.planning.request import validate_request

    deploy_chain_stack()
    session = boto3.Session(region_name="us-east-1")
    plans = answer(session, "sagemaker", "DescribeTrainingPlan", _described())
    answer(session, "service-quotas", "ListAWSDefaultServiceQuotas",
           {"Quotas": [sagemaker_quota(quota_name("ml.p5.48xlarge", spot=False), "L-TESTP5", 0.0)]})
    answer(session, "service-quotas", "GetServiceQuota",
           {"Quota": sagemaker_quota(quota_name("ml.p5.48xlarge", spot=False), "L-TESTP5", 4.0)})
    job = sm_dist.fit("train.py", session=session, source_dir=str(source_dir), instance_type=P4D, instance_count=2,
                      strategy="ddp", role=ROLE_ARN, checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/c", chain=True,
                      job_name="planned", training_plan_arn=ARN, fallback_instance_types=["ml.p5.48xlarge"])
    resources = job.plan.request["ResourceConfig"]
    assert "TrainingPlanArn" not in resources and "InstanceType" not in resources
    assert resources["InstancePreferences"] == [{"InstanceType": P4D, "TrainingPlanArns": [ARN]},
                                                {"InstanceType": "ml.p5.48xlarge"}]
    validate_request(job.plan.request)
    assert plans == [{"TrainingPlanName": ARN}]
    sent = boto3.client("sagemaker").describe_training_job(TrainingJobName="planned-1")
    assert sent["ResourceConfig"].get("InstancePreferences", resources["InstancePreferences"]) == \
        resources["InstancePreferences"]
