"""Who supervises a run: the chain stack of the job's region, as `fit` and `sm-dist status` see it.

A chained run's next jobs are created by the chain stack's supervisor (`infra/sm-dist-chain.yaml`,
`sm_dist.cloud.supervisor`). Without that stack in the job's region, or with one whose supervisor may not
pass the job's role to SageMaker, the run stops after its first job with nothing said. So `fit(chain=True)`
reads the stack before anything is uploaded (`check_chain_stack`), and a run's status reports an event the
supervisor failed on, or that EventBridge could not hand to it, which the stack keeps in its queue
(`failed_event`; docs/PLATFORM.md §1.17).

The stack is found by name: the one `sm-dist infra deploy` recorded for the region, else the name the
guide deploys it under, `sm-dist-chain`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from boto3.session import Session

_log = logging.getLogger(__name__)

#: The chain stack's name when none was recorded for the region (docs/guides/chains.md deploys it so).
DEFAULT_STACK_NAME = "sm-dist-chain"
#: The chain stack's outputs read here (infra/sm-dist-chain.yaml).
ROLE_OUTPUT, QUEUE_OUTPUT = "ExecutionRoleArn", "FailedEventsQueueUrl"
#: A stack in one of these states has a working supervisor (or is being updated to another).
_READY = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "UPDATE_IN_PROGRESS",
          "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS")
#: ReceiveMessage calls made while looking for a job's failed event (10 messages each).
MAX_RECEIVES = 10


def stack_name(region: str, environ: Mapping[str, str] | None = None) -> str:
    """The chain stack of `region`: the one deploy recorded, else DEFAULT_STACK_NAME."""
    from sm_dist.provision import config

    return str(config.read(environ).get("chain_stacks", {}).get(region) or DEFAULT_STACK_NAME)


def _deploy_fix(name: str, region: str) -> str:
    return f"sm-dist infra deploy --region {region} --template sm-dist-chain.yaml --stack-name {name}"


def _describe(session: Session, region: str, name: str) -> Mapping[str, Any] | None:
    """The described stack; None when there is none of that name."""
    from botocore.exceptions import ClientError

    try:
        stacks = session.client("cloudformation", region_name=region).describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message")):
            return None
        raise
    return stacks[0] if stacks else None


def _outputs(stack: Mapping[str, Any]) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}


def check_chain_stack(session: Session, region: str, role_arn: str,
                      environ: Mapping[str, str] | None = None) -> list[str]:
    """Refuse (ConfigError) a chained run whose region has no chain stack, or one whose supervisor may not
    pass `role_arn`; a warning when the stack cannot be read (this caller may not DescribeStacks)."""
    from botocore.exceptions import BotoCoreError, ClientError

    name = stack_name(region, environ)
    try:
        stack = _describe(session, region, name)
    except (ClientError, BotoCoreError) as exc:
        return [f"could not read the chain stack {name} in {region} ({exc}): if it is missing, or may not pass role "
                f"{role_arn}, the run stops after its first job"]
    if stack is None:
        raise ConfigError("chain", name, f"no chain stack {name} in {region}: without its supervisor the run stops "
                          f"after its first job; deploy it: {_deploy_fix(name, region)}")
    if stack.get("StackStatus") not in _READY:
        raise ConfigError("chain", name, f"the chain stack {name} in {region} is {stack.get('StackStatus')}: deploy it "
                          f"again: {_deploy_fix(name, region)}")
    passes = _outputs(stack).get(ROLE_OUTPUT)
    if passes is not None and passes != role_arn:
        raise ConfigError("role", role_arn, f"the supervisor of chain stack {name} may pass only {passes} to SageMaker, "
                          "so it could not create this run's next job: run with that role, or deploy a chain stack "
                          f"for this one: {_deploy_fix(name, region)} --param ExecutionRoleArn={role_arn}")
    return []


def failed_event(session: Session, region: str, job_name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """What the supervisor's last failure on `job_name`'s event said, from the chain stack's queue of events
    it failed on (read without taking them); None when there is none, or it cannot be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    name = stack_name(region, environ)
    try:
        stack = _describe(session, region, name)
        url = _outputs(stack or {}).get(QUEUE_OUTPUT)
        if not url:
            return None
        sqs = session.client("sqs", region_name=region)
        for _ in range(MAX_RECEIVES):
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                                           MessageAttributeNames=["All"]).get("Messages", [])
            for message in messages:
                if _job_of(message.get("Body", "")) == job_name:
                    attributes = message.get("MessageAttributes") or {}  # Lambda's names, else EventBridge's
                    error = next((attributes[key].get("StringValue") for key in ("ErrorMessage", "ERROR_MESSAGE")
                                  if key in attributes), None) or "no error message"
                    return (f"the supervisor failed on its event ({error[:200]}; its log: /aws/lambda/{name}-supervisor); "
                            f"the event is kept in {url}: once the cause is fixed, hand it (the message's body, in "
                            f"event.json) to the function again: aws lambda invoke --function-name {name}-supervisor "
                            "--invocation-type Event --cli-binary-format raw-in-base64-out --payload file://event.json "
                            "/dev/null")
            if len(messages) < 10:
                return None
    except (ClientError, BotoCoreError) as exc:
        _log.debug("could not read the chain stack's failed events: %s", exc)
    return None


def _job_of(body: str) -> str | None:
    """The training job an EventBridge state-change event names (the message body is the event)."""
    try:
        event = json.loads(body)
    except ValueError:
        return None
    detail = event.get("detail") if isinstance(event, dict) else None
    return str(detail.get("TrainingJobName")) if isinstance(detail, dict) and detail.get("TrainingJobName") else None


__all__ = ["DEFAULT_STACK_NAME", "check_chain_stack", "failed_event", "stack_name"]
