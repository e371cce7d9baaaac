"""The cloud supervisor of a run: when one of its jobs ends, decide and create the next.

The chain stack (`infra/sm-dist-chain.yaml`) runs this as a Lambda function on EventBridge's
"SageMaker Training Job State Change" events, so a run goes on without the user's machine. Its
code is this module and `sm_dist.contract.chain` inlined (`sm_dist.provision.chain_stack`): both
import only the standard library at module level, and boto3 (in the Lambda runtime) inside
`handler`. `handle` takes the SageMaker client, so tests give it moto's or a stubbed one.

For a job tagged `sm-dist:run`, it reads the job (DescribeTrainingJob: events may repeat or come
late; a Describe that still says InProgress when the event says the job ended is asked again, then
left to Lambda's retry) and its tags (the run's policy and state); after a MaxRuntime stop it lists
the checkpoint URI (CheckpointConfig's, else the job's `sm-dist:checkpoint-uri` tag) for an object
written since the job's TrainingStartTime (none: the next link would repeat this one, so the decision
ends the run; a refused listing changes nothing); it takes `decide`'s decision, creates the next job
as a copy of this one's request under the next name (MaxRuntime what the budget leaves, on demand
when decided; without what Describe fills in that a request may not carry), and writes the decision
on the ended job (`sm-dist:chain-decision`), which also makes a repeated event a no-op. A name held
by a job that is not this run's next link ends the run, saying so (docs/PLATFORM.md §1.12, §1.17).

In the Lambda (`handler`) the SageMaker calls go through `WireJson`: the requests and answers are the
API's JSON as sent, so a runtime botocore older than a field the run uses neither drops it from the
next link nor refuses it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sm_dist.contract.chain import (
    TAG_CHECKPOINT,
    TAG_DECISION,
    TAG_LINK,
    TAG_POLICY,
    TAG_RUN,
    TAG_STATE,
    TENSORBOARD_DEFAULT_PATH,
    Action,
    ChainPolicy,
    Decision,
    Ending,
    LinkOutcome,
    RunState,
    capacity_wait,
    decide,
)

#: What a link's request copies from the job before it: the fields of CreateTrainingJob that
#: DescribeTrainingJob returns (names and tags are the next link's own).
COPIED = ("AlgorithmSpecification", "RoleArn", "HyperParameters", "InputDataConfig", "OutputDataConfig",
          "ResourceConfig", "VpcConfig", "StoppingCondition", "EnableNetworkIsolation",
          "EnableInterContainerTrafficEncryption", "EnableManagedSpotTraining", "CheckpointConfig", "Environment",
          "RetryStrategy", "DebugHookConfig", "TensorBoardOutputConfig", "ExperimentConfig", "RemoteDebugConfig",
          "InfraCheckConfig", "MlflowConfig")
#: ResourceConfig's answers about what SageMaker chose; not part of a request.
_SELECTED = ("SelectedInstanceType", "SelectedInstanceCount")
#: DescribeTrainingJob answers while the job still ends (the event may come first): asked again this often,
#: this many seconds apart, then the event is left to Lambda's retry (docs/PLATFORM.md §1.17).
DESCRIBE_TRIES, DESCRIBE_WAIT_S = 4, 10.0
#: An event's TrainingJobStatus that says the job ended.
_ENDED = ("Completed", "Failed", "Stopped")
#: CreateTrainingJob's refusals that mean "not now" (docs/PLATFORM.md §1.12): wait and try again.
RETRY_CODES = ("ResourceLimitExceeded", "ThrottlingException")
#: Seconds the function keeps for itself after a wait (its timeout is 900 s).
_MARGIN_S = 60.0


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _tags(sagemaker: Any, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    kwargs: dict[str, Any] = {"ResourceArn": arn}
    while True:
        page = sagemaker.list_tags(**kwargs)
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
        if not page.get("NextToken"):
            return tags
        kwargs["NextToken"] = page["NextToken"]


def checkpoint_uri(desc: Mapping[str, Any], tags: Mapping[str, str]) -> str | None:
    """The job's checkpoint URI: CheckpointConfig's (SageMaker syncs it), else the one its tag names (the
    runtime writes there itself; no CheckpointConfig in the request)."""
    return (desc.get("CheckpointConfig") or {}).get("S3Uri") or tags.get(TAG_CHECKPOINT)


def wrote_checkpoint(s3: Any, desc: Mapping[str, Any], tags: Mapping[str, str] | None = None) -> bool | None:
    """Whether an object under the job's checkpoint URI (`checkpoint_uri`) was written (LastModified) at or
    after its TrainingStartTime; None when there is no URI or start time, or the listing fails (the
    supervisor's role reaches the base stack's bucket only: docs/PLATFORM.md §1.12)."""
    uri, start = checkpoint_uri(desc, tags or {}), desc.get("TrainingStartTime")
    if not uri or not str(uri).startswith("s3://") or start is None:
        return None
    bucket, _, prefix = str(uri)[len("s3://"):].partition("/")
    prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            if any(obj["LastModified"] >= start for obj in page.get("Contents", [])):
                return True
    except Exception as exc:  # AccessDenied, a deleted bucket: the decision goes on without the answer
        print(json.dumps({"job": desc.get("TrainingJobName"), "cannot list": uri, "error": str(exc)[:300]}))
        return None
    return False


def next_request(desc: Mapping[str, Any], tags: Mapping[str, str], decision: Decision) -> dict[str, Any]:
    """CreateTrainingJob for the next link: this job's request, its name, limits, spot and tags."""
    assert decision.next_name is not None and decision.max_runtime_s
    request: dict[str, Any] = {key: desc[key] for key in COPIED if desc.get(key) not in (None, {}, [])}
    request["TrainingJobName"] = decision.next_name
    request["ResourceConfig"] = _resources(request["ResourceConfig"], decision.instance_type)
    tensorboard = request.get("TensorBoardOutputConfig")
    if tensorboard and tensorboard.get("LocalPath") == TENSORBOARD_DEFAULT_PATH:  # the default, echoed
        request["TensorBoardOutputConfig"] = {k: v for k, v in tensorboard.items() if k != "LocalPath"}
    stopping = {"MaxRuntimeInSeconds": decision.max_runtime_s}
    spot = bool(desc.get("EnableManagedSpotTraining")) and not decision.on_demand
    request["EnableManagedSpotTraining"] = spot
    if spot:
        wait = (desc.get("StoppingCondition") or {}).get("MaxWaitTimeInSeconds") or decision.max_runtime_s
        stopping["MaxWaitTimeInSeconds"] = max(int(wait), decision.max_runtime_s)
    request["StoppingCondition"] = stopping
    ours = {**{k: v for k, v in tags.items() if not k.startswith("aws:") and k != TAG_DECISION},
            TAG_LINK: decision.next_name.rsplit("-", 1)[1], TAG_STATE: decision.state.to_tag()}
    request["Tags"] = [{"Key": k, "Value": v} for k, v in ours.items()]
    return request


def _resources(config: Mapping[str, Any], instance_type: str | None) -> dict[str, Any]:
    """The next link's ResourceConfig: the type the decision names (first of InstancePreferences, when the
    request lets SageMaker choose), without what SageMaker answered (Selected*, and the InstanceType it may
    fill in beside InstancePreferences, which the API refuses in a request)."""
    out = {k: v for k, v in config.items() if k not in _SELECTED}
    if out.get("InstancePreferences"):
        out.pop("InstanceType", None)
    if instance_type is None:
        return out
    if out.get("InstancePreferences"):
        prefs = out["InstancePreferences"]
        first = [p for p in prefs if p.get("InstanceType") == instance_type]
        out["InstancePreferences"] = first + [p for p in prefs if p.get("InstanceType") != instance_type]
    else:
        out["InstanceType"] = instance_type
    return out


def _create(sagemaker: Any, request: Mapping[str, Any], policy: ChainPolicy, sleep: Callable[[float], None],
            time_left: Callable[[], float]) -> str | None:
    """Create the next link; a refusal that means "not now" waits and tries again while time is left.
    None when created (or created already, by an earlier delivery of the same event), else why not."""
    for tries in range(1, policy.capacity_retries + 2):
        try:
            sagemaker.create_training_job(**request)
            return None
        except Exception as exc:  # botocore's ClientError: its code decides
            code = _error_code(exc)
            if code == "ResourceInUse":  # the name exists: carried out already, if that job is this link
                return _held_by(sagemaker, request)
            if code not in RETRY_CODES or tries > policy.capacity_retries:
                return f"CreateTrainingJob {request['TrainingJobName']} refused: {exc}"
            wait = capacity_wait(policy, tries)
            if time_left() - wait < _MARGIN_S:
                raise  # Lambda retries the event later; the decision is taken again then
            sleep(wait)
    return None  # unreachable: the last try returns or raises


def _held_by(sagemaker: Any, request: Mapping[str, Any]) -> str | None:
    """None when the job of the next link's name is that link (its run's and link's tags: an earlier delivery
    of this event created it), else why the run cannot go on under that name."""
    name = request["TrainingJobName"]
    wanted = {t["Key"]: t["Value"] for t in request.get("Tags") or [] if t["Key"] in (TAG_RUN, TAG_LINK)}
    try:
        held = _tags(sagemaker, sagemaker.describe_training_job(TrainingJobName=name)["TrainingJobArn"])
    except Exception as exc:  # noqa: BLE001 - the name is taken either way; the run cannot use it
        return f"CreateTrainingJob {name}: the name is taken and its job cannot be read ({str(exc)[:200]})"
    if all(held.get(key) == value for key, value in wanted.items()):
        return None
    return (f"CreateTrainingJob {name}: the name is held by another job (not link {wanted.get(TAG_LINK)} of run "
            f"{wanted.get(TAG_RUN)}); start the run again under another job_name")


def _describe_ended(sagemaker: Any, name: str, event_status: str | None,
                    sleep: Callable[[float], None]) -> dict[str, Any]:
    """DescribeTrainingJob of a job the event says ended; asked again while it still says InProgress or
    Stopping (Describe may lag the event), and an error for Lambda to retry if it still does."""
    for tries in range(DESCRIBE_TRIES):
        desc: dict[str, Any] = sagemaker.describe_training_job(TrainingJobName=name)
        status = desc.get("TrainingJobStatus")
        if event_status not in _ENDED or status in _ENDED:
            return desc
        if tries + 1 < DESCRIBE_TRIES:
            sleep(DESCRIBE_WAIT_S)
    raise RuntimeError(f"{name}: the event says {event_status}, DescribeTrainingJob still says {status}; "
                       "left to Lambda's retry")


def handle(event: Mapping[str, Any], sagemaker: Any, *, s3: Any = None, sleep: Callable[[float], None] = time.sleep,
           time_left: Callable[[], float] = lambda: 900.0) -> dict[str, Any]:
    """Act on one state-change event (the decision taken, or why nothing was done); `s3`: the client
    that lists the checkpoint URI after a MaxRuntime stop (None: not asked)."""
    detail = event.get("detail") or {}
    name = detail.get("TrainingJobName")
    if not name:
        return {"action": "ignored", "reason": "the event names no training job"}
    desc = _describe_ended(sagemaker, name, detail.get("TrainingJobStatus"), sleep)
    tags = _tags(sagemaker, desc["TrainingJobArn"])
    if TAG_RUN not in tags or TAG_POLICY not in tags:
        return {"action": "ignored", "reason": f"{name} is not a job of an sm_dist run"}
    if TAG_DECISION in tags:
        return {"action": "ignored", "reason": f"{name} was decided already: {tags[TAG_DECISION]}"}
    policy, state = ChainPolicy.from_tag(tags[TAG_POLICY]), RunState.from_tag(tags.get(TAG_STATE, ""))
    outcome = LinkOutcome.from_description(desc)
    if outcome.ending is Ending.MAX_RUNTIME and s3 is not None:
        outcome = replace(outcome, wrote_checkpoint=wrote_checkpoint(s3, desc, tags))
    decision = decide(tags[TAG_RUN], outcome, state, policy)
    if decision.action is Action.NONE:
        return {"action": decision.action.value, "reason": decision.reason}
    reason = decision.reason
    if decision.action in (Action.NEXT, Action.RETRY):
        if decision.wait_s:
            sleep(min(decision.wait_s, max(0.0, time_left() - 2 * _MARGIN_S)))
        refused = _create(sagemaker, next_request(desc, tags, decision), policy, sleep, time_left)
        if refused is not None:
            decision, reason = Decision(Action.STOP, refused, decision.state), f"{reason}; {refused}: the run ends"
    text = f"{decision.action.value}: {reason}"
    sagemaker.add_tags(ResourceArn=desc["TrainingJobArn"], Tags=[{"Key": TAG_DECISION, "Value": _tag_value(text)}])
    result = {"action": decision.action.value, "next": decision.next_name, "reason": reason}
    print(json.dumps({"run": tags[TAG_RUN], "job": name, **result}))  # the function's log line
    return result


def _tag_value(text: str) -> str:
    """`text` as a tag value: the characters the API allows, at most 256 (docs/PLATFORM.md §1.5)."""
    kept = "".join(c if c.isalnum() or c in " _.:/=+-@" else " " for c in text)
    return " ".join(kept.split())[:256]


class WireJson:
    """The SageMaker calls the supervisor makes, through a boto3 client whose service model may be older than
    the run's fields (the Lambda runtime's bundled botocore): DescribeTrainingJob answers the JSON SageMaker
    sent (the model's parser drops a field it does not know), and CreateTrainingJob sends the request as
    built (the model's validator refuses such a field, its serializer drops it). botocore still signs and
    sends both; its model sees only the fields it knows. Give it a client made with
    `parameter_validation=False`: an older model may also require what a newer request leaves out
    (ResourceConfig.InstanceType beside InstancePreferences); SageMaker validates the request it gets
    (docs/PLATFORM.md §1.17)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._answer: bytes | None = None
        self._body: bytes | None = None
        client.meta.events.register("after-call.sagemaker.DescribeTrainingJob", self._keep_answer)
        client.meta.events.register("before-sign.sagemaker.CreateTrainingJob", self._send_body)

    def _keep_answer(self, http_response: Any = None, **_: Any) -> None:
        try:
            self._answer = http_response.content if http_response is not None else None
        except Exception:  # noqa: BLE001 - an answer with no body (a stub): the parsed one stands
            self._answer = None

    def _send_body(self, request: Any, **_: Any) -> None:
        if self._body is not None:
            request.data = self._body

    def describe_training_job(self, **params: Any) -> dict[str, Any]:
        self._answer = None
        parsed: dict[str, Any] = self.client.describe_training_job(**params)
        if not self._answer:
            return parsed
        wire: dict[str, Any] = json.loads(self._answer)
        for key, value in parsed.items():  # timestamps as the parser reads them; what it dropped, as sent
            if key in wire and not isinstance(value, (dict, list)):
                wire[key] = value
        return wire

    def create_training_job(self, **request: Any) -> Any:
        self._body = json.dumps(request).encode()
        try:
            return self.client.create_training_job(**_known(request, self.client.meta.service_model.operation_model(
                "CreateTrainingJob").input_shape))
        finally:
            self._body = None

    def __getattr__(self, name: str) -> Any:  # list_tags, add_tags: as the client has them
        return getattr(self.client, name)


def _known(value: Any, shape: Any) -> Any:
    """`value` with only what `shape` (botocore's) has members for: what its validator and serializer take."""
    kind = getattr(shape, "type_name", "")
    if kind == "structure" and isinstance(value, Mapping):
        return {k: _known(v, shape.members[k]) for k, v in value.items() if k in shape.members}
    if kind == "list" and isinstance(value, list):
        return [_known(v, shape.member) for v in value]
    return value


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda function's entry point (`index.handler`)."""
    import boto3
    from botocore.config import Config

    sagemaker = boto3.client("sagemaker", config=Config(parameter_validation=False))
    return handle(event, WireJson(sagemaker), s3=boto3.client("s3"),
                  time_left=lambda: context.get_remaining_time_in_millis() / 1000)


__all__ = ["COPIED", "RETRY_CODES", "WireJson", "checkpoint_uri", "handle", "handler", "next_request",
           "wrote_checkpoint"]
