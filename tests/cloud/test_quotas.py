"""The account's SageMaker training quota, read before anything is uploaded (docs/PLATFORM.md §1.10).

moto answers Service Quotas for `vpc` only, so the quota calls are answered with botocore's Stubber
(the unit tests) or `_answers.answer` (the fits), both checked against the service model's shapes;
moto's own ListTrainingJobs/DescribeTrainingJob count the running jobs in the fits.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from _answers import answer, sagemaker_quota
from _project import CKPT_BUCKET, ROLE_ARN, aws_state

import sm_dist
from sm_dist.cloud.quotas import check_training_quota, instances_in_use, quota_name, total_quota_name
from sm_dist.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

P4D = "ml.p4d.24xlarge"
ON_DEMAND = quota_name(P4D, spot=False)
#: Quota codes are made up: the tests find a quota by its name, as sm_dist does.
CODE = "L-TESTP4D1"


def test_quota_names_are_the_consoles() -> None:
    assert quota_name(P4D, spot=False) == "ml.p4d.24xlarge for training job usage"
    assert quota_name("ml.g5.xlarge", spot=True) == "ml.g5.xlarge for spot training job usage"
    assert total_quota_name(spot=False) == "Number of instances across all training jobs"
    assert total_quota_name(spot=True) == "Number of instances across all spot training jobs"


# --- the check on its own: botocore's Stubber on real clients ----------------------------------------

def _clients(aws_credentials: str) -> tuple[Any, Any]:
    import boto3

    return (boto3.client("service-quotas", region_name=aws_credentials),
            boto3.client("sagemaker", region_name=aws_credentials))


def _job(name: str, instance_type: str, count: int, *, spot: bool = False, status: str = "InProgress",
         **extra: Any) -> dict[str, Any]:
    """DescribeTrainingJob's answer for a job (the members the check reads, and the required ones)."""
    from datetime import datetime, timezone

    return {"TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
            "ModelArtifacts": {"S3ModelArtifacts": ""}, "TrainingJobStatus": status, "SecondaryStatus": "Training",
            "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
            "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 30,
                               **extra.pop("resource", {})},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": datetime(2026, 11, 26, tzinfo=timezone.utc),
            "EnableManagedSpotTraining": spot, **extra}


def _summaries(*names: str, token: str | None = None) -> dict[str, Any]:
    from datetime import datetime, timezone

    when = datetime(2026, 11, 26, tzinfo=timezone.utc)
    page: dict[str, Any] = {"TrainingJobSummaries": [
        {"TrainingJobName": n, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{n}",
         "CreationTime": when, "TrainingJobStatus": "InProgress"} for n in names]}
    return {**page, "NextToken": token} if token else page


def _stub_quota(stub: Any, value: float | None, *, default: float = 0.0, name: str = ON_DEMAND) -> None:
    """The quota found on the second page of defaults; `value` the applied one (None: never changed)."""
    other = sagemaker_quota("ml.p4d.24xlarge for endpoint usage", "L-TESTOTHER", 0.0)
    stub.add_response("list_aws_default_service_quotas", {"Quotas": [other], "NextToken": "page-2"},
                      {"ServiceCode": "sagemaker", "MaxResults": 100})
    stub.add_response("list_aws_default_service_quotas", {"Quotas": [sagemaker_quota(name, CODE, default)]},
                      {"ServiceCode": "sagemaker", "MaxResults": 100, "NextToken": "page-2"})
    if value is None:
        stub.add_client_error("get_service_quota", "NoSuchResourceException", "no applied value",
                              expected_params={"ServiceCode": "sagemaker", "QuotaCode": CODE})
    else:
        stub.add_response("get_service_quota", {"Quota": sagemaker_quota(name, CODE, value)},
                          {"ServiceCode": "sagemaker", "QuotaCode": CODE})


def _stub_running(stub: Any, *jobs: dict[str, Any]) -> None:
    """Two pages of running jobs, then no warm pool."""
    names = [j["TrainingJobName"] for j in jobs]
    half = len(names) // 2
    stub.add_response("list_training_jobs", _summaries(*names[:half], token="more"),
                      {"MaxResults": 100, "StatusEquals": "InProgress"})
    stub.add_response("list_training_jobs", _summaries(*names[half:]),
                      {"MaxResults": 100, "StatusEquals": "InProgress", "NextToken": "more"})
    stub.add_response("list_training_jobs", _summaries(), {"MaxResults": 100, "WarmPoolStatusEquals": "Available"})
    for job in jobs:
        stub.add_response("describe_training_job", job, {"TrainingJobName": job["TrainingJobName"]})


def test_a_quota_of_zero_refuses_naming_the_quota_its_value_the_need_and_where_to_ask(aws_credentials: str) -> None:
    from botocore.stub import Stubber

    quotas, sagemaker = _clients(aws_credentials)
    with Stubber(quotas) as sq, Stubber(sagemaker) as sm:
        _stub_quota(sq, None, default=0.0)  # never raised: the default, 0, applies
        _stub_running(sm)
        with pytest.raises(ConfigError) as refused:
            check_training_quota(quotas, sagemaker, P4D, 2, spot=False, region="us-east-1")
        sq.assert_no_pending_responses()
    message = str(refused.value)
    assert message.startswith("instance_count=2: this job needs 2 × ml.p4d.24xlarge")
    assert '"ml.p4d.24xlarge for training job usage" in us-east-1 is 0, 0 in use by 0 running job(s)' in message
    assert f"https://us-east-1.console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas/{CODE}" in message
    assert "training_plan_arn=" in message and "\n" not in message


RUNNING = (
    _job("big", P4D, 3),                                       # counts: 3
    _job("spot-one", P4D, 2, spot=True),                       # another quota
    _job("other-type", "ml.g5.48xlarge", 8),                   # another type
    _job("groups", "ml.g5.2xlarge", 1, resource={"InstanceGroups": [
        {"InstanceType": P4D, "InstanceCount": 1, "InstanceGroupName": "gpu"}]}),  # counts: 1
    _job("reserved", P4D, 4, resource={
        "TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/reserved-plan"}),  # the plan's
    _job("ended", P4D, 2, status="Completed"),                 # listed, then ended: not held
)


@pytest.mark.parametrize(("need", "refused"), [(2, False), (3, True)])
def test_running_jobs_of_the_same_type_and_kind_use_the_quota(aws_credentials: str, need: int, refused: bool) -> None:
    from botocore.stub import Stubber

    quotas, sagemaker = _clients(aws_credentials)
    with Stubber(quotas) as sq, Stubber(sagemaker) as sm:
        _stub_quota(sq, 6.0)  # raised from 0 to 6: 4 held by "big" and "groups", 2 free
        _stub_running(sm, *RUNNING)
        if refused:
            with pytest.raises(ConfigError, match=r"is 6, 4 in use by 2 running job\(s\), so 2 free: request at least 7"):
                check_training_quota(quotas, sagemaker, P4D, need, spot=False, region="us-east-1")
        else:
            check_training_quota(quotas, sagemaker, P4D, need, spot=False, region="us-east-1")
        sm.assert_no_pending_responses()


def test_a_warm_pool_holds_its_instances(aws_credentials: str) -> None:
    from botocore.stub import Stubber

    _, sagemaker = _clients(aws_credentials)
    kept = _job("kept", P4D, 2, status="Completed", WarmPoolStatus={"Status": "Available"})
    with Stubber(sagemaker) as sm:
        sm.add_response("list_training_jobs", _summaries(), {"MaxResults": 100, "StatusEquals": "InProgress"})
        sm.add_response("list_training_jobs", _summaries("kept"), {"MaxResults": 100, "WarmPoolStatusEquals": "Available"})
        sm.add_response("describe_training_job", kept, {"TrainingJobName": "kept"})
        used = instances_in_use(sagemaker, P4D, spot=False)
    assert (used.of_type, used.jobs_of_type, used.total, used.jobs, used.counted) == (2, 1, 2, 1, True)


def test_spot_reads_the_spot_quota_and_names_the_on_demand_one(aws_credentials: str) -> None:
    from botocore.stub import Stubber

    quotas, sagemaker = _clients(aws_credentials)
    spot_name = quota_name(P4D, spot=True)
    with Stubber(quotas) as sq, Stubber(sagemaker) as sm:
        _stub_quota(sq, 1.0, name=spot_name)
        _stub_running(sm, _job("spot-one", P4D, 1, spot=True), _job("on-demand", P4D, 4))
        with pytest.raises(ConfigError, match=r'"ml.p4d.24xlarge for spot training job usage" in us-east-1 is 1, '
                                              r"1 in use .* the on-demand quotas are separate"):
            check_training_quota(quotas, sagemaker, P4D, 1, spot=True, region="us-east-1")


def test_the_account_wide_quota_counts_every_type(aws_credentials: str) -> None:
    """A new account's "Number of instances across all training jobs" is small whatever the type's quota."""
    from botocore.stub import Stubber

    quotas, sagemaker = _clients(aws_credentials)
    total = total_quota_name(spot=False)
    with Stubber(quotas) as sq, Stubber(sagemaker) as sm:
        sq.add_response("list_aws_default_service_quotas", {"Quotas": [
            sagemaker_quota(total, "L-TESTALL1", 4.0), sagemaker_quota(ON_DEMAND, CODE, 0.0)]},
            {"ServiceCode": "sagemaker", "MaxResults": 100})  # both found: no second page
        sq.add_response("get_service_quota", {"Quota": sagemaker_quota(ON_DEMAND, CODE, 8.0)},
                        {"ServiceCode": "sagemaker", "QuotaCode": CODE})
        sq.add_client_error("get_service_quota", "NoSuchResourceException", "never raised",
                            expected_params={"ServiceCode": "sagemaker", "QuotaCode": "L-TESTALL1"})
        _stub_running(sm, _job("cpu", "ml.c5.xlarge", 2), _job("small-gpu", "ml.g5.2xlarge", 1))
        with pytest.raises(ConfigError, match=r'quota "Number of instances across all training jobs" in us-east-1 is '
                                              r"4, 3 in use by 2 running job\(s\), so 1 free: request at least 5 at "
                                              r"https://us-east-1.console.aws.amazon.com/.*/quotas/L-TESTALL1"):
            check_training_quota(quotas, sagemaker, P4D, 2, spot=False, region="us-east-1")


@pytest.mark.parametrize(("code", "hint"), [
    ("AccessDeniedException", "allow servicequotas:ListAWSDefaultServiceQuotas and servicequotas:GetServiceQuota"),
    ("TooManyRequestsException", "CreateTrainingJob may still refuse the job"),
])
def test_a_quota_that_cannot_be_read_is_a_warning_not_a_refusal(aws_credentials: str, caplog: pytest.LogCaptureFixture,
                                                               code: str, hint: str) -> None:
    from botocore.stub import Stubber

    quotas, sagemaker = _clients(aws_credentials)
    with Stubber(quotas) as sq, Stubber(sagemaker):  # nothing queued for SageMaker: a call would fail the test
        sq.add_client_error("list_aws_default_service_quotas", code, "no")
        with caplog.at_level(logging.WARNING, logger="sm_dist.cloud.quotas"):
            check_training_quota(quotas, sagemaker, P4D, 64, spot=False, region="us-east-1")
    assert (f'quota check skipped: could not read "{ON_DEMAND}", "{total_quota_name(False)}" in us-east-1 ({code})'
            in caplog.text)
    assert hint in caplog.text


@pytest.mark.parametrize("listing", ["no such quota", "no quotas in the region"])
def test_no_quota_listed_is_a_warning(aws_credentials: str, caplog: pytest.LogCaptureFixture, listing: str) -> None:
    """An instance type or region Service Quotas lists nothing for: CreateTrainingJob decides."""
    from botocore.stub import Stubber

    quotas, sagemaker = _clients(aws_credentials)
    with Stubber(quotas) as sq, Stubber(sagemaker):
        if listing == "no such quota":
            sq.add_response("list_aws_default_service_quotas",
                            {"Quotas": [sagemaker_quota("ml.g5.xlarge for training job usage", "L-TESTG5X1", 4.0)]})
        else:
            sq.add_client_error("list_aws_default_service_quotas", "NoSuchResourceException", "not in this Region")
        with caplog.at_level(logging.WARNING, logger="sm_dist.cloud.quotas"):
            check_training_quota(quotas, sagemaker, P4D, 64, spot=False, region="us-east-1")
    assert (f'quota check skipped for "{ON_DEMAND}", "{total_quota_name(False)}": Service Quotas lists no such quota '
            "in us-east-1" in caplog.text)


# --- through fit: moto for everything but the quota ---------------------------------------------------

def _fit(source_dir: Path, session: Any, count: int) -> sm_dist.Job:
    return sm_dist.fit("train.py", session=session, source_dir=str(source_dir), instance_type=P4D,
                       instance_count=count, strategy="ddp", role=ROLE_ARN, max_runtime_s=3600,
                       checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/c")


def _session_with_quota(applied: float) -> Any:
    import boto3

    session = boto3.Session(region_name="us-east-1")
    answer(session, "service-quotas", "ListAWSDefaultServiceQuotas", {"Quotas": [sagemaker_quota(ON_DEMAND, CODE, 0.0)]})
    answer(session, "service-quotas", "GetServiceQuota", {"Quota": sagemaker_quota(ON_DEMAND, CODE, applied)})
    return session


def test_a_job_beyond_the_quota_is_refused_before_anything_is_uploaded(aws: str, source_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"instance_count=2: .* quota \"ml.p4d.24xlarge for training job usage\" "
                                          r"in us-east-1 is 1, 0 in use by 0 running job\(s\), so 1 free"):
        _fit(source_dir, _session_with_quota(1.0), 2)
    assert aws_state() == ([CKPT_BUCKET], [], 0)  # no default bucket, no object, no job


def test_a_job_within_the_quota_launches(aws: str, source_dir: Path) -> None:
    job = _fit(source_dir, _session_with_quota(2.0), 2)
    assert aws_state()[1] == [job.name]


def test_a_running_job_leaves_too_few_for_the_next(aws: str, source_dir: Path) -> None:
    """moto's jobs end at once; the first is made to run, as a job still training would."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sagemaker.models import sagemaker_backends

    first = _fit(source_dir, _session_with_quota(3.0), 2)
    sagemaker_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].training_jobs[first.name].training_job_status = "InProgress"
    with pytest.raises(ConfigError, match=r"is 3, 2 in use by 1 running job\(s\), so 1 free: request at least 4"):
        _fit(source_dir, _session_with_quota(3.0), 2)
    assert aws_state()[1] == [first.name]


# --- every type a chained run may ask for (issue 39, finding 3) ----------------------------------------

P5 = "ml.p5.48xlarge"


def _session_with_quotas(applied: dict[str, float]) -> Any:
    """A session whose Service Quotas answer lists `applied` (quota name -> value) and answers each
    GetServiceQuota by the code asked for (the model's shapes)."""
    import json

    import boto3
    from botocore.awsrequest import AWSResponse

    session = boto3.Session(region_name="us-east-1")
    codes = {name: f"L-TEST{i:04d}" for i, name in enumerate(applied)}
    listed = [sagemaker_quota(name, codes[name], 0.0) for name in applied]
    answer(session, "service-quotas", "ListAWSDefaultServiceQuotas", {"Quotas": listed})
    by_code = {code: sagemaker_quota(name, code, applied[name]) for name, code in codes.items()}

    def get(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return AWSResponse(None, 200, {}, None), {"Quota": by_code[json.loads(params["body"])["QuotaCode"]]}

    session.events.register("before-call.service-quotas.GetServiceQuota", get)
    return session


def _chain(source_dir: Path, session: Any, **extra: Any) -> sm_dist.Job:
    return sm_dist.fit("train.py", session=session, source_dir=str(source_dir), instance_type=P4D, instance_count=2,
                       strategy="ddp", role=ROLE_ARN, checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/c", chain=True,
                       job_name="pretrain", **extra)


def test_an_on_demand_chain_needs_the_quota_of_every_fallback_type(aws: str, source_dir: Path) -> None:
    """SageMaker checks the quota of every type in InstancePreferences and refuses the job if any falls short
    (PLATFORM §1.12); the check read instance_type's only, so a 0-quota fallback uploaded the code, was
    refused, and the supervisor retried it as a capacity error until the run ended."""
    from _project import deploy_chain_stack

    deploy_chain_stack()
    session = _session_with_quotas({quota_name(P4D, spot=False): 4.0, quota_name(P5, spot=False): 0.0})
    with pytest.raises(ConfigError) as refused:
        _chain(source_dir, session, fallback_instance_types=[P5])
    message = str(refused.value)
    assert message.startswith(f"fallback_instance_types='{P5}': SageMaker checks the quota of every type")
    assert f'"{P5} for training job usage" in us-east-1 is 0' in message and "\n" not in message
    assert aws_state() == ([CKPT_BUCKET], [], 0)  # nothing uploaded, no job
    job = _chain(source_dir, _session_with_quotas({quota_name(P4D, spot=False): 4.0, quota_name(P5, spot=False): 2.0}),
                 fallback_instance_types=[P5])
    assert [p["InstanceType"] for p in job.plan.request["ResourceConfig"]["InstancePreferences"]] == [P4D, P5]


def test_a_spot_chain_needs_the_quotas_its_later_jobs_ask_for(aws: str, source_dir: Path) -> None:
    """A spot run's later jobs may run on a fallback type (spot) and, after on_demand_after interruptions, on
    demand: quotas the first job's check never read. A quota below the job's count is refused up front."""
    from _project import deploy_chain_stack

    deploy_chain_stack()
    spot = {quota_name(P4D, spot=True): 4.0, quota_name(P5, spot=True): 4.0}
    with pytest.raises(ConfigError) as refused:
        _chain(source_dir, _session_with_quotas({**spot, quota_name(P4D, spot=False): 0.0}), spot=True,
               on_demand_after=2)
    message = str(refused.value)
    assert message.startswith(f"on_demand_after=2: a later job of this run may ask for 2 × {P4D} on-demand")
    assert f'"{P4D} for training job usage" in us-east-1 is 0' in message and "leave on_demand_after unset" in message
    with pytest.raises(ConfigError, match=rf"fallback_instance_types='{P5}': a later job .* 2 × {P5} spot"):
        _chain(source_dir, _session_with_quotas({quota_name(P4D, spot=True): 4.0, quota_name(P5, spot=True): 1.0}),
               spot=True, fallback_instance_types=[P5])
    assert aws_state() == ([CKPT_BUCKET], [], 0)
