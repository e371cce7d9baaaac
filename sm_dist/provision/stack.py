"""Deploy and show the sm_dist infra stack with boto3 CloudFormation.

`deploy()` checks the stack name and parameters against the template first (nothing is sent
to AWS when they are wrong), then creates the stack or updates it (an update with no changes
is not an error), follows it to the end with progress lines, explains a failure with the
stack's own event reasons, and records the outputs in the config file `fit` reads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sm_dist.errors import ConfigError, InfraError
from sm_dist.provision import aws, config, events, outputs, params, template

if TYPE_CHECKING:
    from boto3.session import Session
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_cloudformation.literals import CapabilityType
    from mypy_boto3_cloudformation.type_defs import ParameterTypeDef, StackTypeDef

_log = logging.getLogger(__name__)

# The template creates an IAM role without a fixed name.
CAPABILITIES: tuple[CapabilityType, ...] = ("CAPABILITY_IAM",)


@dataclass(frozen=True, kw_only=True)
class StackInfo:
    """What a deploy or show found out about one stack."""

    name: str
    """Stack name."""
    region: str
    """Region the stack lives in."""
    status: str
    """CloudFormation stack status, e.g. CREATE_COMPLETE."""
    outputs: dict[str, str]
    """resolve()-style outputs: role_arn, bucket, checkpoint_uri (+ artifact_uri)."""
    parameters: dict[str, str] = field(default_factory=dict)
    """Parameter values the stack was deployed with."""
    changed: bool = True
    """False when deploy found nothing to update."""


def _info(stack: Mapping[str, Any], region: str, *, changed: bool = True) -> StackInfo:
    return StackInfo(
        name=stack["StackName"],
        region=region,
        status=stack["StackStatus"],
        outputs=outputs.present(stack),
        parameters={p["ParameterKey"]: p.get("ParameterValue", "") for p in stack.get("Parameters") or []},
        changed=changed,
    )


def _check_updatable(stack: Mapping[str, Any]) -> None:
    outputs.require_ours(stack)
    name, status = stack["StackName"], stack["StackStatus"]
    if status == "ROLLBACK_COMPLETE":
        raise InfraError(
            f"stack {name} is ROLLBACK_COMPLETE (its creation failed) and cannot be updated; "
            f"run `sm-dist infra delete {name}` and deploy again"
        )
    if not events.is_final(status):
        raise InfraError(f"stack {name} is {status}; wait for it to finish, then deploy again")


def _update_parameters(stack: StackTypeDef, values: Mapping[str, str], declared: Mapping[str, Any]) -> list[ParameterTypeDef]:
    """Given values win; other parameters keep their previous value.

    A previous value equal to the template default is left out (CloudFormation then applies
    the default, the same value) rather than sent as UsePreviousValue, which moto mishandles.
    """
    result: list[ParameterTypeDef] = [{"ParameterKey": k, "ParameterValue": v} for k, v in values.items()]
    for previous in stack.get("Parameters") or []:
        key = previous["ParameterKey"]
        if key in values or key not in declared:
            continue
        if str(previous.get("ParameterValue")) != str(declared[key].get("Default")):
            result.append({"ParameterKey": key, "UsePreviousValue": True})
    return result


def _submit(cfn: CloudFormationClient, name: str, body: str, values: Mapping[str, str], existing: StackTypeDef | None, template_name: str) -> str | None:
    """Send CreateStack or UpdateStack; returns the stack id, or None when there is nothing to update."""
    with aws.aws_errors(f"deploy stack {name}"):
        if existing is None:
            plist: list[ParameterTypeDef] = [{"ParameterKey": k, "ParameterValue": v} for k, v in values.items()]
            created = cfn.create_stack(StackName=name, TemplateBody=body, Parameters=plist, Capabilities=list(CAPABILITIES))
            return str(created["StackId"])
        declared = template.load(template_name).get("Parameters", {})
        plist = _update_parameters(existing, values, declared)
        try:
            cfn.update_stack(StackName=name, TemplateBody=body, Parameters=plist, Capabilities=list(CAPABILITIES))
        except Exception as exc:
            if aws.error_code(exc) == "ValidationError" and "No updates are to be performed" in aws.error_message(exc):
                return None
            raise
        return str(existing["StackId"])


def deploy(
    stack_name: str,
    parameters: Mapping[str, str] | None = None,
    *,
    session: Session | None = None,
    template_name: str = template.DEFAULT_TEMPLATE,
    on_event: events.EventSink | None = None,
    poll_seconds: float = events.POLL_SECONDS,
    environ: Mapping[str, str] | None = None,
) -> StackInfo:
    """Create or update `stack_name` from the shipped template, wait, record its outputs.

    The ECR pull permission follows sm_dist's image table for the client's region
    (`params.image_parameters`) unless `parameters` set it. Bad name or parameters -> ConfigError
    before any AWS call. A failed operation -> InfraError
    with the failing resources' reasons. On success the outputs are written to the config file
    (see `sm_dist.provision.config`) and returned.
    """
    name = params.check_stack_name(stack_name)
    params.check_parameters(dict(parameters or {}), template_name)
    body = template.template_text(template_name)
    cfn = aws.cloudformation(session)
    # the role may pull the image table's images in this region, unless told otherwise
    declared = template.load(template_name).get("Parameters", {})
    defaults = {k: v for k, v in params.image_parameters(aws.region_of(cfn)).items() if k in declared}
    values = params.check_parameters({**defaults, **dict(parameters or {})}, template_name)
    existing = outputs.describe_stack(cfn, name)
    if existing is not None:
        _check_updatable(existing)
    else:
        region = aws.region_of(cfn)
        values = {**_base_role(declared, values, region, environ, on_event),
                  **_base_bucket(declared, values, region, environ, on_event), **values}
    after = events.latest_event_id(cfn, name) if existing is not None else None
    operation = "create" if existing is None else "update"
    stack_id = _submit(cfn, name, body, values, existing, template_name)
    region = aws.region_of(cfn)
    if stack_id is None:
        _log.info("stack %s is up to date; nothing to change", name)
        final, changed = existing, False
    else:
        _log.info("%s of stack %s started (%s)", operation, name, region)
        status, seen = events.watch(cfn, stack_id, after=after, on_event=on_event, poll_seconds=poll_seconds)
        if status not in events.SUCCEEDED:
            raise InfraError(events.failure_summary(name, operation, status, seen))
        final, changed = outputs.describe_stack(cfn, stack_id), True
    if final is None:
        raise InfraError(f"stack {name} vanished during its {operation}; deploy again")
    if records_outputs(template_name):
        resolved = outputs.from_stack(final)
        path = config.record(name, {**resolved, "region": region, "stack_name": name}, environ)
        _log.debug("recorded stack %s in %s", name, path)
    elif ROLE_PARAMETER in declared:  # the chain stack: fit(chain=True) of this region checks it (cloud.supervision)
        config.record_chain(region, name, environ)
    return _info(final, region, changed=changed)


#: The chain stack's parameter naming the role its supervisor may pass: the base stack's RoleArn output.
ROLE_PARAMETER = "ExecutionRoleArn"


def _base_role(declared: Mapping[str, Any], given: Mapping[str, str], region: str,
               environ: Mapping[str, str] | None, on_event: events.EventSink | None) -> dict[str, str]:
    """A new chain stack's ExecutionRoleArn when not given: the role of the base stack deploy recorded
    (its RoleArn output, in this region), so the two stacks need no copy-paste between them."""
    if ROLE_PARAMETER not in declared or ROLE_PARAMETER in given:
        return {}
    data = config.read(environ)
    base = data.get("default")
    entry = data["stacks"].get(base) if base else None
    fix = (f"deploy the base stack first (sm-dist infra deploy --region {region}) or pass --param "
           f"{ROLE_PARAMETER}=arn:aws:iam::ACCOUNT:role/NAME")
    if not entry or not entry.get("role_arn"):
        raise ConfigError(f"--param {ROLE_PARAMETER}", None, f"no sm_dist base stack recorded in "
                          f"{config.config_path(environ)} to take the role from: {fix}")
    if entry.get("region") != region:
        raise ConfigError(f"--param {ROLE_PARAMETER}", None, f"the recorded base stack {base} is in "
                          f"{entry.get('region')}, not {region}: {fix}")
    role = str(entry["role_arn"])
    params.check_value(ROLE_PARAMETER, role, declared[ROLE_PARAMETER])
    if on_event is not None:
        on_event(f"{ROLE_PARAMETER}={role}: the role of base stack {base} (its RoleArn output)")
    return {ROLE_PARAMETER: role}


#: The chain stack's parameter naming the bucket its supervisor may list: the base stack's BucketName output.
BUCKET_PARAMETER = "CheckpointBucket"


def _base_bucket(declared: Mapping[str, Any], given: Mapping[str, str], region: str,
                 environ: Mapping[str, str] | None, on_event: events.EventSink | None) -> dict[str, str]:
    """A new chain stack's CheckpointBucket when not given: the bucket of the base stack deploy recorded in
    this region; none recorded leaves the parameter empty (it is optional: the supervisor then never lists)."""
    if BUCKET_PARAMETER not in declared or BUCKET_PARAMETER in given:
        return {}
    data = config.read(environ)
    entry = data["stacks"].get(data.get("default") or "") or {}
    if entry.get("region") != region or not entry.get("bucket"):
        return {}
    bucket = str(entry["bucket"])
    params.check_value(BUCKET_PARAMETER, bucket, declared[BUCKET_PARAMETER])
    if on_event is not None:
        on_event(f"{BUCKET_PARAMETER}={bucket}: the bucket of base stack {data.get('default')} (its BucketName output)")
    return {BUCKET_PARAMETER: bucket}


def records_outputs(template_name: str) -> bool:
    """Whether a stack of `template_name` has what `fit --infra-stack` reads (role, bucket), so deploy
    records it as the default; the chain stack (its supervisor only) does not."""
    declared = template.load(template_name).get("Outputs", {})
    return all(key in declared for key, ours in outputs.OUTPUT_KEYS.items() if ours in outputs.RESOLVED_KEYS)


def show(stack_name: str, *, session: Session | None = None) -> StackInfo:
    """Status, outputs and parameters of a deployed stack; unknown stack -> ConfigError."""
    name = params.check_stack_name(stack_name)
    cfn = aws.cloudformation(session)
    stack = outputs.describe_stack(cfn, name)
    if stack is None:
        raise ConfigError("stack", name, f"no such stack in region {aws.region_of(cfn)}; check the name, AWS_REGION and AWS_PROFILE")
    return _info(stack, aws.region_of(cfn))
