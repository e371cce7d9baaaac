"""Follow a CloudFormation stack operation to its end, and explain how it ended.

`watch()` polls the stack's events and status, hands each new event (oldest first) to a
callback as one readable line, and returns the final status. When an operation fails, the
events with a `ResourceStatusReason` are what the user needs; `failure_summary()` puts the
first of them into one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sm_dist.provision import aws

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_cloudformation.type_defs import StackEventTypeDef

_log = logging.getLogger(__name__)

#: Final statuses that mean the operation did what was asked.
SUCCEEDED = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "DELETE_COMPLETE", "IMPORT_COMPLETE"})
#: How long to wait between polls of a real CloudFormation (tests pass 0).
POLL_SECONDS = 5.0

EventSink = Callable[[str], None]


def is_final(status: str) -> bool:
    """True when a stack status will not change without a new request."""
    return not status.endswith("_IN_PROGRESS")


def format_event(event: Mapping[str, Any]) -> str:
    """One line: time, logical id, resource type, status and (if any) the reason."""
    stamp: Any = event.get("Timestamp")
    when = stamp.strftime("%H:%M:%S") if hasattr(stamp, "strftime") else str(stamp or "")
    line = f"{when} {event.get('LogicalResourceId', '?')} ({event.get('ResourceType', '?')}) {event.get('ResourceStatus', '?')}"
    reason = event.get("ResourceStatusReason")
    return f"{line}: {reason}" if reason else line


def latest_event_id(cfn: CloudFormationClient, stack: str) -> str | None:
    """Id of the newest event of `stack` now (so a later watch shows only newer events)."""
    with aws.aws_errors(f"events of stack {stack}"):
        found = cfn.describe_stack_events(StackName=stack)["StackEvents"]
    return found[0]["EventId"] if found else None


def new_events(cfn: CloudFormationClient, stack: str, after: str | None) -> list[StackEventTypeDef]:
    """Events of `stack` newer than event id `after`, oldest first (pages until `after`)."""
    fresh: list[StackEventTypeDef] = []
    with aws.aws_errors(f"events of stack {stack}"):
        for page in cfn.get_paginator("describe_stack_events").paginate(StackName=stack):
            for event in page["StackEvents"]:  # newest first
                if event["EventId"] == after:
                    return fresh[::-1]
                fresh.append(event)
    return fresh[::-1]


def watch(
    cfn: CloudFormationClient,
    stack_id: str,
    *,
    after: str | None = None,
    on_event: EventSink | None = None,
    poll_seconds: float = POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, list[StackEventTypeDef]]:
    """Poll `stack_id` until its status is final; returns (final status, events seen, oldest first).

    `stack_id` should be the stack's id (ARN), which still resolves after a delete.
    """
    seen: list[StackEventTypeDef] = []
    while True:
        with aws.aws_errors(f"describe stack {stack_id}"):
            status = cfn.describe_stacks(StackName=stack_id)["Stacks"][0]["StackStatus"]
        for event in new_events(cfn, stack_id, after):
            seen.append(event)
            after = event["EventId"]
            if on_event is not None:
                on_event(format_event(event))
        if is_final(status):
            _log.debug("stack %s reached %s", stack_id, status)
            return status, seen
        sleep(poll_seconds)


def failure_reasons(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """"LogicalId (Type): reason" for every failed event with a reason, oldest first, no repeats."""
    reasons: list[str] = []
    for event in events:
        status = str(event.get("ResourceStatus", ""))
        reason = event.get("ResourceStatusReason")
        if reason and (status.endswith("FAILED") or status.startswith("ROLLBACK")):
            text = f"{event.get('LogicalResourceId')} ({event.get('ResourceType')}): {reason}"
            if text not in reasons:
                reasons.append(text)
    return reasons


def failure_summary(stack_name: str, operation: str, status: str, events: Iterable[Mapping[str, Any]]) -> str:
    """One line saying that `operation` on `stack_name` ended in `status`, and why."""
    reasons = failure_reasons(events)
    why = "; ".join(reasons[:3]) if reasons else "no reason reported; see the stack's events in the console"
    return f"{operation} of stack {stack_name} ended in {status}: {why}"
