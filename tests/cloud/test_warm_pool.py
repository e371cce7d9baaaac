"""Warm pools (docs/PLATFORM.md §1.13): whether a plan starts on the last pool, what a pool cost, and its release.

moto 5.2.5 keeps no WarmPoolStatus, ignores ListTrainingJobs' WarmPoolStatusEquals and lacks UpdateTrainingJob:
those answers come from botocore's Stubber or `_answers.answer`, checked against the service model's shapes.
"""

from __future__ import annotations

import copy
import json
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from _answers import answer, error, sagemaker_quota
from _project import CKPT_BUCKET, ROLE_ARN
from botocore.stub import Stubber

import sm_dist
from sm_dist.cloud.job import Job
from sm_dist.cloud.quotas import warn_warm_pool_quota
from sm_dist.cloud.warm_pool import available_pool, base_name
from sm_dist.errors import ConfigError
from sm_dist.planning.warm_pool import MATCH_FIELDS, pool_differences

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

G5 = "ml.g5.xlarge"
OLD = "sm-dist-20261126-100000-000"
NOW = datetime(2026, 11, 26, tzinfo=timezone.utc)
REQUEST = {"RoleArn": ROLE_ARN, "ResourceConfig": {"InstanceType": G5, "InstanceCount": 2, "VolumeSizeInGB": 30,
                                                   "KeepAlivePeriodInSeconds": 1800},
           "VpcConfig": {"Subnets": ["subnet-1", "subnet-2"], "SecurityGroupIds": ["sg-1"]},
           "EnableNetworkIsolation": True}


def described(name: str = OLD, status: str = "Available", retained: int | None = 600, **resources: Any) -> dict[str, Any]:
    """DescribeTrainingJob's answer for a finished job that kept a pool (the `WarmPoolStatus` shape)."""
    pool: dict[str, Any] = {"Status": status}
    if retained is not None:
        pool["ResourceRetainedBillableTimeInSeconds"] = retained
    if status == "Reused":
        pool["ReusedByJob"] = "sm-dist-20261126-110000-000"
    return {"TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
            "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed", "RoleArn": ROLE_ARN,
            "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
            "ResourceConfig": {"InstanceType": G5, "InstanceCount": 2, "VolumeSizeInGB": 30,
                               "KeepAlivePeriodInSeconds": 1800, **resources},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": NOW,
            "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"}, "BillableTimeInSeconds": 1200,
            "TrainingTimeInSeconds": 1200, "WarmPoolStatus": pool}


def listed(*names: str) -> dict[str, Any]:
    return {"TrainingJobSummaries": [{"TrainingJobName": n, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:"
                                      f"training-job/{n}", "CreationTime": NOW, "TrainingJobStatus": "Completed",
                                      "WarmPoolStatus": {"Status": "Available"}} for n in names]}


# --- the comparison: pure ---------------------------------------------------------------------------

def test_the_same_values_match_and_order_of_subnets_does_not_matter() -> None:
    previous = copy.deepcopy(REQUEST)
    previous["VpcConfig"]["Subnets"].reverse()
    previous["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 60  # not a matching value
    previous["HyperParameters"] = {"lr": "0.1"}  # nor this
    assert pool_differences(REQUEST, previous) == ()


@pytest.mark.parametrize(("setting", "path"), MATCH_FIELDS, ids=[s for s, _ in MATCH_FIELDS])
def test_each_documented_value_that_differs_is_named(setting: str, path: tuple[str, ...]) -> None:
    previous = copy.deepcopy(REQUEST)
    node = previous
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = {"EnableNetworkIsolation": False, "EnableInterContainerTrafficEncryption": True}.get(
        path[-1], ["other"] if path[0] == "VpcConfig" else 7 if "Count" in path[-1] or "Size" in path[-1] else "other")
    found = pool_differences(REQUEST, previous)
    assert len(found) == 1 and found[0].startswith(f"{setting} ") and "in the pool" in found[0]


def test_a_spot_job_and_a_chosen_preferred_type() -> None:
    previous = copy.deepcopy(REQUEST)
    del previous["ResourceConfig"]["InstanceType"]
    previous["ResourceConfig"]["SelectedInstanceType"] = G5  # a job given preferred types: the one it ran on
    assert pool_differences(REQUEST, previous) == ()
    assert pool_differences({**REQUEST, "EnableManagedSpotTraining": True}, previous) == (
        "spot: a warm pool serves no spot job",)
    assert pool_differences({**REQUEST, "ResourceConfig": {**REQUEST["ResourceConfig"], "InstanceCount": 4}}, previous) == (
        "instance_count 4 here, 2 in the pool",)
    preferring = {**REQUEST, "ResourceConfig": {"InstanceCount": 2, "VolumeSizeInGB": 30, "InstancePreferences": [
        {"InstanceType": G5}, {"InstanceType": "ml.g5.2xlarge"}]}}  # a chain's fallback types, on demand
    assert pool_differences(preferring, previous) == (
        f"instance_type one of {G5} then ml.g5.2xlarge here, {G5} in the pool",)


def test_base_name() -> None:
    assert base_name("sm-dist-20261126-193555-361") == "sm-dist"
    assert base_name("exp-a-20261126-193555-361-3") == "exp-a"  # a chain's link
    assert base_name("my-job") == "my-job"


# --- finding the pool: ListTrainingJobs + DescribeTrainingJob (Stubber) ----------------------------------

def test_the_newest_available_pool_of_the_base_name_is_found(aws_credentials: str) -> None:
    import boto3

    client = boto3.client("sagemaker", region_name=aws_credentials)
    query = {"WarmPoolStatusEquals": "Available", "NameContains": "sm-dist", "SortBy": "CreationTime",
             "SortOrder": "Descending", "MaxResults": 10}
    newer = "sm-dist-20261126-110000-000"
    with Stubber(client) as stub:
        stub.add_response("list_training_jobs", listed("sm-dist-extra-20261126-120000-000", newer, OLD), query)
        stub.add_response("describe_training_job", described(newer, status="Reused"), {"TrainingJobName": newer})
        stub.add_response("describe_training_job", described(), {"TrainingJobName": OLD})
        found = available_pool(client, "sm-dist")
        stub.assert_no_pending_responses()
    assert found is not None and found["TrainingJobName"] == OLD  # another base's job is not described


# --- the plan a fit launches: moto for the rest --------------------------------------------------------

def _fit(source_dir: Path, previous: dict[str, Any] | None, **settings: Any) -> sm_dist.Job:
    import boto3

    session = boto3.Session(region_name="us-east-1")
    answer(session, "sagemaker", "ListTrainingJobs", listed(*([previous["TrainingJobName"]] if previous else [])))
    if previous is not None:
        answer(session, "sagemaker", "DescribeTrainingJob", previous)
    return sm_dist.fit("train.py", session=session, source_dir=str(source_dir), instance_type=G5, instance_count=2,
                       strategy="ddp", role=ROLE_ARN, checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/run", max_runtime_s=3600,
                       **{"keep_alive_s": 1800, **settings})


def test_a_matching_job_says_it_starts_on_the_pool(aws: str, source_dir: Path) -> None:
    job = _fit(source_dir, described())
    assert job.plan is not None and job.plan.warm_pool is not None and job.plan.warm_pool.reusable
    text = str(job.plan)
    assert f"warm pool    starts on the warm pool of {OLD} (Available" in text
    assert "warm pool    kept 1800 s after the job ends" in text and f"sm-dist release {job.name}" in text
    assert job.plan.to_dict()["warm_pool"] == {"job_name": OLD, "reusable": True, "differences": [], "retained_s": 600}
    assert "starts on the warm pool" in job.plan._repr_html_()


def test_a_job_that_differs_names_the_field(aws: str, source_dir: Path) -> None:
    job = _fit(source_dir, described(InstanceCount=4))
    assert job.plan is not None and job.plan.warm_pool is not None
    assert job.plan.warm_pool.differences == ("instance_count 2 here, 4 in the pool",)
    assert (f"warm pool    the warm pool of {OLD} is not reused: instance_count 2 here, 4 in the pool. Match it, or "
            f"end it: sm-dist release {OLD}") in str(job.plan)


def test_no_pool_and_no_keep_alive_say_nothing(aws: str, source_dir: Path) -> None:
    assert _fit(source_dir, None).plan.warm_pool is None  # type: ignore[union-attr]
    plain = _fit(source_dir, described(), keep_alive_s=None)
    assert plain.plan is not None and plain.plan.warm_pool is None and "warm pool" not in str(plain.plan)


def test_a_lookup_that_fails_is_a_warning(aws: str, source_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    import boto3

    session = boto3.Session(region_name="us-east-1")
    answer(session, "sagemaker", "ListTrainingJobs", error("AccessDeniedException"))
    with caplog.at_level(logging.WARNING):
        job = sm_dist.fit("train.py", session=session, source_dir=str(source_dir), instance_type=G5, role=ROLE_ARN,
                          checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/run", max_runtime_s=3600, keep_alive_s=600)
    assert job.plan is not None and job.plan.warm_pool is None
    assert "warm pool: could not look for an Available pool of sm-dist (AccessDeniedException)" in caplog.text


@pytest.mark.parametrize(("applied", "warned"), [(None, True), (2.0, False)], ids=["default 0", "raised to 2"])
def test_a_warm_pool_quota_below_the_count_is_a_warning(aws_credentials: str, caplog: pytest.LogCaptureFixture,
                                                        applied: float | None, warned: bool) -> None:
    import boto3

    quotas = boto3.client("service-quotas", region_name=aws_credentials)
    name, code = f"{G5} for training warm pool usage", "L-TESTWARM"  # names and codes in tests are made up
    query = {"ServiceCode": "sagemaker", "MaxResults": 100}
    with Stubber(quotas) as stub, caplog.at_level(logging.WARNING):
        stub.add_response("list_aws_default_service_quotas", {"Quotas": [
            sagemaker_quota(f"{G5}2 for training warm pool usage", "L-TESTOTHER", 0.0),  # a name that only begins with the type
            sagemaker_quota(f"{G5} for training job usage", "L-TESTJOB", 0.0)], "NextToken": "p2"}, query)
        stub.add_response("list_aws_default_service_quotas", {"Quotas": [sagemaker_quota(name, code, 0.0)]},
                          {**query, "NextToken": "p2"})
        if applied is None:
            stub.add_client_error("get_service_quota", "NoSuchResourceException", "never changed",
                                  expected_params={"ServiceCode": "sagemaker", "QuotaCode": code})
        else:
            stub.add_response("get_service_quota", {"Quota": sagemaker_quota(name, code, applied)},
                              {"ServiceCode": "sagemaker", "QuotaCode": code})
        quota = warn_warm_pool_quota(quotas, G5, 2, aws_credentials)
        stub.assert_no_pending_responses()
    assert quota is not None and quota.name == name
    said = f'warm pool: the account\'s quota "{name}" in us-east-1 is 0, this job has 2 instances: it runs, but SageMaker'
    assert (said in caplog.text) is warned


# --- cost and release -------------------------------------------------------------------------------------

@pytest.fixture
def sagemaker() -> Any:
    import boto3

    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_the_cost_includes_the_retained_time(sagemaker: Any) -> None:
    client, stub = sagemaker
    for _ in range(2):  # the description, then the tags' ARN
        stub.add_response("describe_training_job", described(retained=1800), {"TrainingJobName": OLD})
    stub.add_response("list_tags", {"Tags": []}, None)
    cost = Job(OLD, clients={"sagemaker": client}, region="us-east-1").cost()
    price = cost.usd_per_hour
    assert price is not None and cost.retained_s == 1800
    assert cost.training_usd == pytest.approx(1200 / 3600 * 2 * price)
    assert cost.retained_usd == pytest.approx(1800 / 3600 * 2 * price)
    assert cost.usd == pytest.approx(3000 / 3600 * 2 * price)
    text = str(cost)
    assert f"warm pool    1800 s retained × 2 instances = ${cost.retained_usd:,.2f}" in text
    assert f"(job ${cost.training_usd:,.2f} + warm pool ${cost.retained_usd:,.2f})" in text
    assert json.loads(json.dumps(cost.to_dict()))["retained_usd"] == pytest.approx(cost.retained_usd)


def test_release_sets_the_keep_alive_to_zero(sagemaker: Any) -> None:
    client, stub = sagemaker
    stub.add_response("describe_training_job", described(), {"TrainingJobName": OLD})
    stub.add_response("update_training_job", {"TrainingJobArn": described()["TrainingJobArn"]},
                      {"TrainingJobName": OLD, "ResourceConfig": {"KeepAlivePeriodInSeconds": 0}})
    assert Job(OLD, clients={"sagemaker": client}).release() == 600


@pytest.mark.parametrize(("answer_", "expected"), [
    (described(status="Reused"), f"job='{OLD}': nothing to release: its warm pool is Reused (by sm-dist-20261126-110000-000)"),
    (described(status="Terminated"), f"job='{OLD}': nothing to release: its warm pool is Terminated"),
    ({k: v for k, v in described().items() if k != "WarmPoolStatus"},
     f"job='{OLD}': nothing to release: SageMaker reports no warm pool for it (still running, or none kept"),
    ({**{k: v for k, v in described().items() if k != "WarmPoolStatus"}, "ResourceConfig": {
        "InstanceType": G5, "InstanceCount": 2, "VolumeSizeInGB": 30}},
     f"job='{OLD}': nothing to release: it keeps no warm pool (launched without keep_alive_s)"),
    (None, f"job='{OLD}': no such training job in this region"),
], ids=["reused", "terminated", "none reported", "none asked", "unknown job"])
def test_release_without_a_pool_is_one_line(sagemaker: Any, answer_: dict[str, Any] | None, expected: str) -> None:
    client, stub = sagemaker
    if answer_ is None:
        stub.add_client_error("describe_training_job", "ValidationException", "Requested resource not found.")
    else:
        stub.add_response("describe_training_job", answer_, {"TrainingJobName": OLD})
    with pytest.raises(ConfigError) as caught:
        Job(OLD, clients={"sagemaker": client}).release()
    assert str(caught.value).startswith(expected) and "\n" not in str(caught.value)
