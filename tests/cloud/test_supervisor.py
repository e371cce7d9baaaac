"""The run supervisor's handler, fed each documented job outcome (botocore's Stubber, the API's shapes).

moto's training jobs complete at once, so every other outcome is answered by a Stubber with
DescribeTrainingJob's real response shape (docs/PLATFORM.md §1.12); tests/infra/test_chain_stack.py
runs the template's inlined code against moto.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from sm_dist.cloud import supervisor
from sm_dist.contract.chain import TENSORBOARD_DEFAULT_PATH, ChainPolicy, RunState

boto3 = pytest.importorskip("boto3")
from botocore.stub import ANY, Stubber  # noqa: E402

T0 = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.timezone.utc)
ROLE = "arn:aws:iam::123456789012:role/sm-dist-training"
CAPACITY = ("CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML "
            "instance type.")
POLICY = ChainPolicy(max_links=5, link_runtime_s=86_400, budget_usd=1000.0, usd_per_hour=10.0, on_demand_after=2)


def arn(name: str) -> str:
    return f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}"


def description(name: str, status: str, secondary: str, reason: str | None = None, *, spot: bool = True,
                interrupted: int = 0, billable: int = 3600) -> dict[str, Any]:
    """DescribeTrainingJob's answer for a link sm_dist planned (the service model's required fields and
    what the next link copies)."""
    desc: dict[str, Any] = {
        "TrainingJobName": name, "TrainingJobArn": arn(name), "ModelArtifacts": {"S3ModelArtifacts": ""},
        "TrainingJobStatus": status, "SecondaryStatus": secondary,
        "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13",
                                   "TrainingInputMode": "File",
                                   "ContainerEntrypoint": ["python3", "-m", "sm_dist.container.pid1"]},
        "RoleArn": ROLE, "HyperParameters": {"steps": "1000000"},
        "InputDataConfig": [{"ChannelName": "code", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": "s3://team-bucket/run-1/input/code/",
            "S3DataDistributionType": "FullyReplicated"}}}],
        "OutputDataConfig": {"S3OutputPath": "s3://team-bucket/out"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86_400, **({"MaxWaitTimeInSeconds": 172_800} if spot else {})},
        "EnableManagedSpotTraining": spot,
        "CheckpointConfig": {"S3Uri": "s3://team-bucket/ckpt/run", "LocalPath": "/opt/ml/checkpoints"},
        "Environment": {"PYTHONPATH": "/opt/ml/input/data/code"},
        "CreationTime": T0,
        "SecondaryStatusTransitions": [{"Status": s, "StartTime": T0} for s in
                                       ("Starting", "Training", *(["Interrupted", "Starting", "Training"] * interrupted),
                                        secondary)],
    }
    if reason is not None:
        desc["FailureReason"] = reason
    if billable:  # (the model's minimum is 1: a job that never ran has none)
        desc.update(BillableTimeInSeconds=billable, TrainingTimeInSeconds=billable)
    return desc


def link_tags(number: int, state: RunState | None = None, policy: ChainPolicy = POLICY) -> list[dict[str, str]]:
    state = state or RunState()
    return [{"Key": "sm-dist:run", "Value": "run"}, {"Key": "sm-dist:link", "Value": str(number)},
            {"Key": "sm-dist:chain", "Value": policy.to_tag()}, {"Key": "sm-dist:chain-state", "Value": state.to_tag()},
            {"Key": "team", "Value": "llm"}]


def event(name: str) -> dict[str, Any]:
    return {"source": "aws.sagemaker", "detail-type": "SageMaker Training Job State Change",
            "detail": {"TrainingJobName": name, "TrainingJobStatus": "Stopped", "Tags": {}}}


@pytest.fixture
def stubbed(aws_credentials: str) -> Any:
    client = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def _ended(stub: Stubber, desc: dict[str, Any], tags: list[dict[str, str]]) -> None:
    stub.add_response("describe_training_job", desc, {"TrainingJobName": desc["TrainingJobName"]})
    stub.add_response("list_tags", {"Tags": tags}, {"ResourceArn": desc["TrainingJobArn"]})


def _decision_tag(stub: Stubber, name: str) -> None:
    stub.add_response("add_tags", {"Tags": []}, {"ResourceArn": arn(name), "Tags": [{"Key": "sm-dist:chain-decision",
                                                                                      "Value": ANY}]})


NEXT = [  # (case, description, the next job's name, its MaxRuntime, spot, wait)
    ("max runtime", description("run-1", "Stopped", "MaxRuntimeExceeded"), "run-2", 4 * 3600 - 180, True, 0),
    ("max wait", description("run-1", "Stopped", "MaxWaitTimeExceeded", interrupted=1), "run-2", 4 * 3600 - 180,
     False, 0),
    ("internal error", description("run-1", "Failed", "Failed", "InternalServerError: We encountered an internal "
                                   "error. Please try again."), "run-2", 4 * 3600 - 180, True, 0),
    ("capacity", description("run-1", "Failed", "Failed", CAPACITY, billable=0), "run-2", 86_400, True, 60),
]


@pytest.mark.parametrize(("desc", "name", "runtime", "spot", "wait"), [row[1:] for row in NEXT],
                         ids=[row[0] for row in NEXT])
def test_a_link_that_should_go_on_gets_its_next_job(stubbed: Any, desc: dict[str, Any], name: str, runtime: int,
                                                    spot: bool, wait: float) -> None:
    client, stub = stubbed
    # $950 of the $1000 billed before this link, which bills 1 h at $10/h: 4 h are left for the next;
    # a link refused capacity billed nothing (its run had spent nothing yet: the next gets its 24 h)
    billed = 950.0 if desc.get("BillableTimeInSeconds") else 0.0
    _ended(stub, desc, link_tags(1, RunState(spent_usd=billed)))
    expected: dict[str, Any] = {key: ANY for key in ("AlgorithmSpecification", "RoleArn", "HyperParameters",
                                                     "InputDataConfig", "OutputDataConfig", "CheckpointConfig",
                                                     "Environment")}
    stop = {"MaxRuntimeInSeconds": runtime, **({"MaxWaitTimeInSeconds": 172_800} if spot else {})}
    expected.update(TrainingJobName=name, ResourceConfig=desc["ResourceConfig"], StoppingCondition=stop,
                    EnableManagedSpotTraining=spot, Tags=ANY)
    stub.add_response("create_training_job", {"TrainingJobArn": arn(name)}, expected)
    _decision_tag(stub, "run-1")
    waits: list[float] = []
    result = supervisor.handle(event("run-1"), client, sleep=waits.append)
    assert result["next"] == name and result["action"] == ("retry" if wait else "next")
    assert waits == ([wait] if wait else [])


def test_the_next_job_copies_the_request_and_carries_the_runs_state() -> None:
    desc = description("run-3", "Stopped", "MaxRuntimeExceeded", interrupted=2)
    tags = {t["Key"]: t["Value"] for t in link_tags(3, RunState(links=2, jobs=2, spent_usd=100.0))}
    tags["aws:cloudformation:stack-name"] = "x"  # a tag the API reserves: never copied
    from sm_dist.contract.chain import LinkOutcome, decide

    decision = decide("run", LinkOutcome.from_description(desc), RunState(links=2, jobs=2, spent_usd=100.0), POLICY)
    request = supervisor.next_request(desc, tags, decision)
    assert request["TrainingJobName"] == "run-4" and request["RoleArn"] == ROLE
    assert request["CheckpointConfig"] == desc["CheckpointConfig"] and request["Environment"] == desc["Environment"]
    assert request["EnableManagedSpotTraining"] is False and "MaxWaitTimeInSeconds" not in request["StoppingCondition"]
    new_tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    assert new_tags["sm-dist:link"] == "4" and new_tags["team"] == "llm" and "aws:cloudformation:stack-name" not in new_tags
    state = RunState.from_tag(new_tags["sm-dist:chain-state"])
    assert state == RunState(links=3, jobs=3, interruptions=2, spent_usd=110.0, on_demand=True)


def test_the_next_job_keeps_mlflowconfig_not_its_answers() -> None:
    """mlflow=: every link logs to the same tracking server (MlflowConfig, which DescribeTrainingJob returns);
    MlflowDetails (the experiment and run ids SageMaker reports for a job) is an answer, never sent."""
    from sm_dist.contract.chain import LinkOutcome, decide

    mlflow = {"MlflowResourceArn": "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team",
              "MlflowExperimentName": "sm-dist", "MlflowRunName": "run"}
    desc = {**description("run-1", "Stopped", "MaxRuntimeExceeded"), "MlflowConfig": mlflow,
            "MlflowDetails": {"MlflowExperimentId": "1", "MlflowRunId": "abc"}}
    decision = decide("run", LinkOutcome.from_description(desc), RunState(), POLICY)
    request = supervisor.next_request(desc, {t["Key"]: t["Value"] for t in link_tags(1)}, decision)
    assert request["MlflowConfig"] == mlflow and "MlflowDetails" not in request


def test_after_a_capacity_error_the_next_job_asks_for_the_next_type() -> None:
    """The decision's type: the next request's InstanceType, or the first of its InstancePreferences (an
    on-demand plan with fallbacks lets SageMaker choose; SelectedInstanceType is an answer, never sent)."""
    from sm_dist.contract.chain import LinkOutcome, decide

    policy = ChainPolicy(usd_per_hour=10.0, types="ml.p4d.24xlarge/ml.p4de.24xlarge@14/ml.p5.48xlarge@30")
    desc = description("run-1", "Failed", "Failed", CAPACITY, spot=True, billable=0)
    decision = decide("run", LinkOutcome.from_description(desc), RunState(), policy)
    request = supervisor.next_request(desc, {t["Key"]: t["Value"] for t in link_tags(1, policy=policy)}, decision)
    assert request["ResourceConfig"]["InstanceType"] == "ml.p4de.24xlarge" and request["EnableManagedSpotTraining"]
    assert RunState.from_tag({t["Key"]: t["Value"] for t in request["Tags"]}["sm-dist:chain-state"]).type_index == 1
    prefs = [{"InstanceType": t} for t in policy.instance_types()]
    on_demand = {**description("run-1", "Stopped", "MaxRuntimeExceeded", spot=False),
                 "ResourceConfig": {"InstanceCount": 2, "VolumeSizeInGB": 30, "InstancePreferences": prefs,
                                    "SelectedInstanceType": "ml.p4d.24xlarge", "SelectedInstanceCount": 2}}
    moved = decide("run", LinkOutcome("run-1", "Failed", "Failed", CAPACITY), RunState(type_index=1), policy)
    resources = supervisor.next_request(on_demand, {}, moved)["ResourceConfig"]
    assert [p["InstanceType"] for p in resources["InstancePreferences"]] == [
        "ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"]
    assert "InstanceType" not in resources and "SelectedInstanceType" not in resources
    shape = boto3.client("sagemaker", region_name="us-east-1").meta.service_model.operation_model(
        "CreateTrainingJob").input_shape
    from botocore.validate import ParamValidator

    report = ParamValidator().validate(supervisor.next_request(on_demand, {}, moved), shape)
    assert not report.has_errors(), report.generate_report()  # botocore's own check of the request


@pytest.mark.parametrize(("desc", "action", "words"), [
    (description("run-2", "Completed", "Completed"), "done", "the run is done"),
    (description("run-2", "Failed", "Failed", "AlgorithmError: ExecuteUserScriptError: ValueError: nan loss"),
     "stop", "ValueError: nan loss"),
    (description("run-2", "Stopped", "Stopped"), "stop", "was stopped"),
], ids=["completed", "the user's code", "stopped by a user"])
def test_a_link_that_ends_the_run_creates_nothing(stubbed: Any, desc: dict[str, Any], action: str, words: str) -> None:
    client, stub = stubbed
    _ended(stub, desc, link_tags(2, RunState(links=1, jobs=1)))
    _decision_tag(stub, "run-2")
    result = supervisor.handle(event("run-2"), client)
    assert result["action"] == action and words in result["reason"] and result["next"] is None


def test_a_repeated_event_creates_the_next_job_once(stubbed: Any) -> None:
    client, stub = stubbed
    desc = description("run-1", "Stopped", "MaxRuntimeExceeded")
    # a second delivery racing the first: the name is taken, the decision stands
    _ended(stub, desc, link_tags(1))
    stub.add_client_error("create_training_job", "ResourceInUse", "Training job names must be unique")
    _ended(stub, description("run-2", "InProgress", "Starting"), link_tags(2))  # the job of that name is run-2
    _decision_tag(stub, "run-1")
    assert supervisor.handle(event("run-1"), client)["action"] == "next"
    # a later one finds the decision on the job and does nothing
    _ended(stub, desc, [*link_tags(1), {"Key": "sm-dist:chain-decision", "Value": "next: run-2"}])
    assert supervisor.handle(event("run-1"), client)["action"] == "ignored"


def test_a_refused_create_waits_and_tries_again(stubbed: Any) -> None:
    client, stub = stubbed
    _ended(stub, description("run-1", "Stopped", "MaxRuntimeExceeded"), link_tags(1))
    stub.add_client_error("create_training_job", "ResourceLimitExceeded",
                          "The account-level service limit 'ml.p4d.24xlarge for spot training job usage' is 2 Instances")
    stub.add_client_error("create_training_job", "ThrottlingException", "Rate exceeded")
    stub.add_response("create_training_job", {"TrainingJobArn": arn("run-2")})
    _decision_tag(stub, "run-1")
    waits: list[float] = []
    assert supervisor.handle(event("run-1"), client, sleep=waits.append)["next"] == "run-2"
    assert waits == [60, 120]


def test_a_create_refused_for_good_ends_the_run_and_says_why(stubbed: Any) -> None:
    client, stub = stubbed
    _ended(stub, description("run-1", "Stopped", "MaxRuntimeExceeded"), link_tags(1))
    stub.add_client_error("create_training_job", "ValidationException", "Role is not authorized")
    _decision_tag(stub, "run-1")
    result = supervisor.handle(event("run-1"), client)
    assert result["action"] == "stop" and "ValidationException" in result["reason"]


def test_no_time_left_to_wait_leaves_the_event_to_lambdas_retry(stubbed: Any) -> None:
    client, stub = stubbed
    _ended(stub, description("run-1", "Stopped", "MaxRuntimeExceeded"), link_tags(1))
    stub.add_client_error("create_training_job", "ThrottlingException", "Rate exceeded")
    with pytest.raises(Exception, match="ThrottlingException"):
        supervisor.handle(event("run-1"), client, time_left=lambda: 30.0)


def test_jobs_of_no_run_and_running_jobs_are_left_alone(stubbed: Any) -> None:
    client, stub = stubbed
    _ended(stub, description("someone-elses", "Completed", "Completed"), [{"Key": "team", "Value": "x"}])
    assert supervisor.handle(event("someone-elses"), client)["action"] == "ignored"
    _ended(stub, description("run-1", "InProgress", "Interrupted"), link_tags(1))
    running = {**event("run-1"), "detail": {"TrainingJobName": "run-1", "TrainingJobStatus": "InProgress"}}
    assert supervisor.handle(running, client)["action"] == "none"
    assert supervisor.handle({"detail": {}}, client)["action"] == "ignored"


@pytest.fixture
def checkpoint_bucket(aws_credentials: str) -> Any:
    """moto's S3 (the listing's real shapes: LastModified is the time moto stored the object)."""
    from moto import mock_aws

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="team-bucket")
        yield s3


def test_a_max_runtime_stop_that_wrote_no_checkpoint_ends_the_run(stubbed: Any, checkpoint_bucket: Any) -> None:
    """A link whose MaxRuntime ran out before anything reached its checkpoint URI: the next would start where it
    did (a start-up longer than MaxRuntime, a checkpoint interval longer than a link), so the run ends there
    instead of repeating it max_links times. An object written before the link started does not count."""
    client, stub = stubbed
    s3 = checkpoint_bucket
    s3.put_object(Bucket="team-bucket", Key="ckpt/run/step-10/manifest.json", Body=b"{}")
    started = s3.list_objects_v2(Bucket="team-bucket")["Contents"][0]["LastModified"] + dt.timedelta(seconds=5)
    desc = {**description("run-2", "Stopped", "MaxRuntimeExceeded"), "TrainingStartTime": started}
    _ended(stub, desc, link_tags(2, RunState(links=1, jobs=1)))
    _decision_tag(stub, "run-2")
    result = supervisor.handle(event("run-2"), client, s3=s3)
    assert result["action"] == "stop" and "wrote no checkpoint" in result["reason"], result
    assert "longer max_runtime_s" in result["reason"]
    # an object written since the start: the run goes on
    assert supervisor.wrote_checkpoint(s3, {**desc, "TrainingStartTime": started - dt.timedelta(seconds=10)}) is True
    # not asked (s3=None), no URI, or a bucket the supervisor may not list: the decision is today's
    assert supervisor.wrote_checkpoint(s3, {**desc, "CheckpointConfig": {}}) is None
    assert supervisor.wrote_checkpoint(s3, {**desc, "CheckpointConfig": {"S3Uri": "s3://no-such-bucket/x"}}) is None


# --- issue 39: the chain faults found in the second review ----------------------------------------------------


def test_a_name_held_by_another_job_ends_the_run_saying_so(stubbed: Any) -> None:
    """Finding 8: any ResourceInUse was read as "the next link exists already", also when an unrelated job held
    the name: the run then stopped with a decision saying it went on. Ownership is now read from the tags."""
    client, stub = stubbed
    _ended(stub, description("run-1", "Stopped", "MaxRuntimeExceeded"), link_tags(1))
    stub.add_client_error("create_training_job", "ResourceInUse", "Training job names must be unique")
    _ended(stub, description("run-2", "Completed", "Completed"), [{"Key": "team", "Value": "an older job"}])
    _decision_tag(stub, "run-1")
    result = supervisor.handle(event("run-1"), client)
    assert result["action"] == "stop" and "the name is held by another job (not link 2 of run run)" in result["reason"]


def test_a_max_runtime_stop_without_checkpointconfig_reads_the_jobs_checkpoint_tag(
        stubbed: Any, checkpoint_bucket: Any) -> None:
    """Finding 6: in sm_dist's default mode the runtime writes S3 itself and the request has no CheckpointConfig;
    the no-progress guard read only CheckpointConfig, so a link that never checkpointed repeated up to max_links.
    Every link carries its checkpoint URI as a tag (sm-dist:checkpoint-uri): the guard lists that."""
    client, stub = stubbed
    s3 = checkpoint_bucket
    s3.put_object(Bucket="team-bucket", Key="ckpt/run/step-10/manifest.json", Body=b"{}")
    started = s3.list_objects_v2(Bucket="team-bucket")["Contents"][0]["LastModified"] + dt.timedelta(seconds=5)
    desc = {**description("run-2", "Stopped", "MaxRuntimeExceeded"), "TrainingStartTime": started}
    del desc["CheckpointConfig"]
    tags = [*link_tags(2, RunState(links=1, jobs=1)), {"Key": "sm-dist:checkpoint-uri", "Value": "s3://team-bucket/ckpt/run"}]
    _ended(stub, desc, tags)
    _decision_tag(stub, "run-2")
    result = supervisor.handle(event("run-2"), client, s3=s3)
    assert result["action"] == "stop" and "wrote no checkpoint" in result["reason"], result
    as_tags = {t["Key"]: t["Value"] for t in tags}
    assert supervisor.wrote_checkpoint(s3, {**desc, "TrainingStartTime": started - dt.timedelta(seconds=10)},
                                       as_tags) is True


def test_a_describe_that_lags_the_event_is_asked_again_then_left_to_lambdas_retry(stubbed: Any) -> None:
    """Finding 10: the event may come before DescribeTrainingJob says the job ended; the supervisor decided
    "none" and the only event was lost. It now asks again, and raises (Lambda retries the event, then keeps it
    in the stack's queue) when Describe still lags."""
    client, stub = stubbed
    lagging = description("run-1", "InProgress", "Training")
    stub.add_response("describe_training_job", lagging, {"TrainingJobName": "run-1"})
    _ended(stub, description("run-1", "Stopped", "MaxRuntimeExceeded"), link_tags(1))
    stub.add_response("create_training_job", {"TrainingJobArn": arn("run-2")})
    _decision_tag(stub, "run-1")
    waits: list[float] = []
    assert supervisor.handle(event("run-1"), client, sleep=waits.append)["next"] == "run-2"
    assert waits == [supervisor.DESCRIBE_WAIT_S]
    for _ in range(supervisor.DESCRIBE_TRIES):
        stub.add_response("describe_training_job", lagging, {"TrainingJobName": "run-1"})
    with pytest.raises(RuntimeError, match="the event says Stopped, DescribeTrainingJob still says InProgress"):
        supervisor.handle(event("run-1"), client, sleep=waits.append)


def test_what_describe_fills_in_is_not_sent_back() -> None:
    """Finding 10: Describe may echo TensorBoardOutputConfig.LocalPath's default, which sm_dist's request never
    sends, and fill ResourceConfig.InstanceType beside InstancePreferences, which a request may not carry."""
    from botocore.validate import ParamValidator

    from sm_dist.contract.chain import LinkOutcome, decide

    prefs = [{"InstanceType": "ml.p4d.24xlarge"}, {"InstanceType": "ml.p5.48xlarge"}]
    desc = {**description("run-1", "Stopped", "MaxRuntimeExceeded", spot=False),
            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30,
                               "InstancePreferences": prefs, "SelectedInstanceType": "ml.p4d.24xlarge"},
            "TensorBoardOutputConfig": {"S3OutputPath": "s3://team-bucket/out/run/tensorboard",
                                        "LocalPath": TENSORBOARD_DEFAULT_PATH}}
    decision = decide("run", LinkOutcome.from_description(desc), RunState(), POLICY)
    request = supervisor.next_request(desc, {t["Key"]: t["Value"] for t in link_tags(1)}, decision)
    assert request["TensorBoardOutputConfig"] == {"S3OutputPath": "s3://team-bucket/out/run/tensorboard"}
    assert request["ResourceConfig"] == {"InstanceCount": 2, "VolumeSizeInGB": 30, "InstancePreferences": prefs}
    shape = boto3.client("sagemaker", region_name="us-east-1").meta.service_model.operation_model(
        "CreateTrainingJob").input_shape
    assert not ParamValidator().validate(request, shape).has_errors()
    chosen = {**desc["TensorBoardOutputConfig"], "LocalPath": "/opt/ml/output/my-tb"}  # the user's own: kept
    assert supervisor.next_request({**desc, "TensorBoardOutputConfig": chosen}, {}, decision)[
        "TensorBoardOutputConfig"] == chosen


class _Raw:
    """An HTTP body as botocore reads it (`stream()`)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


def _older_botocore(client: Any) -> None:
    """`client`'s service model without InstancePreferences and MlflowConfig, as a botocore before them has it
    (ResourceConfig then required InstanceType, InstanceCount and VolumeSizeInGB). The client gets its own copy
    of the shape map: the one it holds is the loader's, which other clients of the process read."""
    resolver = client.meta.service_model._shape_resolver
    resolver._shape_map = shapes = dict(resolver._shape_map)
    shapes["ResourceConfig"] = {**shapes["ResourceConfig"], "required": ["InstanceType", "InstanceCount",
                                                                          "VolumeSizeInGB"], "members": {
        k: v for k, v in shapes["ResourceConfig"]["members"].items() if k != "InstancePreferences"}}
    for name in ("CreateTrainingJobRequest", "DescribeTrainingJobResponse"):
        shapes[name] = {**shapes[name], "members": {k: v for k, v in shapes[name]["members"].items()
                                                    if k != "MlflowConfig"}}


def test_the_lambdas_calls_keep_the_fields_its_botocore_does_not_know(aws_credentials: str) -> None:
    """Finding 10: the supervisor round-tripped jobs through the Lambda runtime's bundled botocore; one older than
    InstancePreferences or MlflowConfig dropped them from Describe's answer, and its validator would refuse them
    in CreateTrainingJob. Through WireJson, Describe's JSON and the next request go as SageMaker wrote them; the
    older model sees only what it knows. (The HTTP answers are SageMaker's JSON, as the service sends it.)"""
    import json

    from botocore.awsrequest import AWSResponse
    from botocore.config import Config

    from sm_dist.contract.chain import LinkOutcome, decide

    client = boto3.client("sagemaker", region_name="us-east-1", config=Config(parameter_validation=False))
    _older_botocore(client)  # the handler's client: no client-side validation
    validating = boto3.client("sagemaker", region_name="us-east-1")
    _older_botocore(validating)
    mlflow = {"MlflowResourceArn": "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-team"}
    prefs = [{"InstanceType": "ml.p4d.24xlarge"}, {"InstanceType": "ml.p5.48xlarge"}]
    desc = {**description("run-1", "Stopped", "MaxRuntimeExceeded", spot=False), "MlflowConfig": mlflow,
            "ResourceConfig": {"InstanceCount": 2, "VolumeSizeInGB": 30, "InstancePreferences": prefs}}
    wire = json.dumps(desc, default=lambda t: t.timestamp()).encode()
    sent: list[dict[str, Any]] = []

    def answer(request: Any, **_: Any) -> AWSResponse:
        target = request.headers["X-Amz-Target"].decode()
        if target.endswith("DescribeTrainingJob"):
            return AWSResponse(request.url, 200, {}, _Raw(wire))
        sent.append(json.loads(request.body))
        return AWSResponse(request.url, 200, {}, _Raw(json.dumps({"TrainingJobArn": arn("run-2")}).encode()))

    client.meta.events.register("before-send.sagemaker", answer)
    assert "InstancePreferences" not in client.describe_training_job(TrainingJobName="run-1")["ResourceConfig"]
    wired = supervisor.WireJson(client)
    read = wired.describe_training_job(TrainingJobName="run-1")
    assert read["MlflowConfig"] == mlflow and read["ResourceConfig"]["InstancePreferences"] == prefs
    assert read["CreationTime"] == T0  # a timestamp as the parser reads it
    decision = decide("run", LinkOutcome.from_description(read), RunState(), POLICY)
    request = supervisor.next_request(read, {t["Key"]: t["Value"] for t in link_tags(1)}, decision)
    with pytest.raises(Exception, match="Unknown parameter in ResourceConfig: \"InstancePreferences\""):
        validating.create_training_job(**request)  # what the runtime's botocore alone does
    assert wired.create_training_job(**request)["TrainingJobArn"] == arn("run-2")
    assert sent[-1]["MlflowConfig"] == mlflow and sent[-1]["ResourceConfig"]["InstancePreferences"] == prefs
    assert sent[-1] == json.loads(json.dumps(request))
