"""The cloud supervisor of a run: when one of its jobs ends, decide and create the next.

The chain stack (`infra/sm-dist-chain.yaml`) runs this as a Lambda function on EventBridge's
"SageMaker Training Job State Change" events, so a run goes on without the user's machine. Its
code is this module and `sm_dist.contract.chain` inlined (`sm_dist.provision.chain_stack`): both
import only the standard library at module level, and boto3 (in the Lambda runtime) inside
`handler`. `handle` takes the SageMaker client, so tests give it moto's or a stubbed one.

For a job tagged `sm-dist:run`, it reads the job (DescribeTrainingJob: events may repeat or come
late) and its tags (the run's policy and state); after a MaxRuntime stop it lists the checkpoint
URI for an object written since the job's TrainingStartTime (none: the next link would repeat this
one, so the decision ends the run; a refused listing changes nothing); it takes `decide`'s decision, creates the next job
as a copy of this one's request under the next name (MaxRuntime what the budget leaves, on demand
when decided), and writes the decision on the ended job (`sm-dist:chain-decision`), which also
makes a repeated event a no-op (docs/PLATFORM.md §1.12).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sm_dist.contract.chain import (
    TAG_DECISION,
    TAG_LINK,
    TAG_POLICY,
    TAG_RUN,
    TAG_STATE,
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


def wrote_checkpoint(s3: Any, desc: Mapping[str, Any]) -> bool | None:
    """Whether an object under the job's CheckpointConfig.S3Uri was written (LastModified) at or after
    its TrainingStartTime; None when there is no URI or start time, or the listing fails (the
    supervisor's role reaches the base stack's bucket only: docs/PLATFORM.md §1.12)."""
    uri, start = (desc.get("CheckpointConfig") or {}).get("S3Uri"), desc.get("TrainingStartTime")
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
    request lets SageMaker choose), without what SageMaker answered (Selected*)."""
    out = {k: v for k, v in config.items() if k not in _SELECTED}
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
            if code == "ResourceInUse":  # the name exists: this decision was carried out already
                return None
            if code not in RETRY_CODES or tries > policy.capacity_retries:
                return f"CreateTrainingJob {request['TrainingJobName']} refused: {exc}"
            wait = capacity_wait(policy, tries)
            if time_left() - wait < _MARGIN_S:
                raise  # Lambda retries the event later; the decision is taken again then
            sleep(wait)
    return None  # unreachable: the last try returns or raises


def handle(event: Mapping[str, Any], sagemaker: Any, *, s3: Any = None, sleep: Callable[[float], None] = time.sleep,
           time_left: Callable[[], float] = lambda: 900.0) -> dict[str, Any]:
    """Act on one state-change event (the decision taken, or why nothing was done); `s3`: the client
    that lists the checkpoint URI after a MaxRuntime stop (None: not asked)."""
    name = (event.get("detail") or {}).get("TrainingJobName")
    if not name:
        return {"action": "ignored", "reason": "the event names no training job"}
    desc = sagemaker.describe_training_job(TrainingJobName=name)
    tags = _tags(sagemaker, desc["TrainingJobArn"])
    if TAG_RUN not in tags or TAG_POLICY not in tags:
        return {"action": "ignored", "reason": f"{name} is not a job of an sm_dist run"}
    if TAG_DECISION in tags:
        return {"action": "ignored", "reason": f"{name} was decided already: {tags[TAG_DECISION]}"}
    policy, state = ChainPolicy.from_tag(tags[TAG_POLICY]), RunState.from_tag(tags.get(TAG_STATE, ""))
    outcome = LinkOutcome.from_description(desc)
    if outcome.ending is Ending.MAX_RUNTIME and s3 is not None:
        outcome = replace(outcome, wrote_checkpoint=wrote_checkpoint(s3, desc))
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


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda function's entry point (`index.handler`)."""
    import boto3

    return handle(event, boto3.client("sagemaker"), s3=boto3.client("s3"),
                  time_left=lambda: context.get_remaining_time_in_millis() / 1000)


__all__ = ["COPIED", "RETRY_CODES", "handle", "handler", "next_request", "wrote_checkpoint"]
