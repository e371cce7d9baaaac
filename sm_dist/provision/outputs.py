"""`resolve()`: the role ARN, bucket and checkpoint URI of a deployed sm_dist infra stack.

This is what `fit(infra_stack=...)` calls. With a stack name it asks CloudFormation (through
`session`, so profile, region and endpoint follow the standard boto3 configuration); without
one it reads the config file `sm-dist infra deploy` wrote (no AWS call). Either way the result
is a plain dict with the keys in `RESOLVED_KEYS` (plus `artifact_uri` when the stack has it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sm_dist.errors import ConfigError
from sm_dist.provision import aws, config

if TYPE_CHECKING:
    from boto3.session import Session
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_cloudformation.type_defs import StackTypeDef

_log = logging.getLogger(__name__)

#: CloudFormation output key -> key in the dict `resolve()` returns.
OUTPUT_KEYS: dict[str, str] = {
    "RoleArn": "role_arn",
    "BucketName": "bucket",
    "CheckpointUri": "checkpoint_uri",
    "ArtifactUri": "artifact_uri",
    "ImageRepositoryArns": "image_repository_arns",
    "KmsKeyArn": "kms_key_arn",
    "VpcMode": "vpc_mode",
    "DataBuckets": "data_buckets",
    "CallerPolicyArn": "caller_policy_arn",
}
#: Keys of what the stack's role may reach (absent from stacks deployed by an older sm_dist).
REACH_KEYS = ("artifact_uri", "image_repository_arns", "kms_key_arn", "vpc_mode", "data_buckets")
#: Keys every resolved result has.
RESOLVED_KEYS = ("role_arn", "bucket", "checkpoint_uri")

#: Every sm_dist template's Description starts with this; deploy and delete touch no other stack.
DESCRIPTION_MARKER = "sm_dist:"

# Statuses in which a stack has no trustworthy outputs.
_UNUSABLE = ("CREATE_IN_PROGRESS", "CREATE_FAILED", "ROLLBACK_", "DELETE_", "REVIEW_IN_PROGRESS")


def describe_stack(cfn: CloudFormationClient, stack_name: str) -> StackTypeDef | None:
    """DescribeStacks for one stack; None when no such (live) stack exists in the client's region."""
    with aws.aws_errors(f"describe stack {stack_name}"):
        try:
            stacks = cfn.describe_stacks(StackName=stack_name)["Stacks"]
        except Exception as exc:
            if aws.error_code(exc) == "ValidationError" and "does not exist" in aws.error_message(exc):
                return None
            raise
    return stacks[0] if stacks else None


def require_ours(stack: Mapping[str, Any]) -> None:
    """Refuse (ConfigError) a stack that was not made from an sm_dist template."""
    if not str(stack.get("Description") or "").startswith(DESCRIPTION_MARKER):
        name = stack.get("StackName", "?")
        raise ConfigError(
            "stack", name,
            "exists but was not deployed from an sm_dist template, so sm-dist infra leaves it alone; choose another stack name",
        )


def present(stack: Mapping[str, Any]) -> dict[str, str]:
    """The stack's outputs that resolve() knows, under resolve()'s keys, without any checks."""
    found = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
    result = {ours: found[theirs] for theirs, ours in OUTPUT_KEYS.items() if theirs in found}
    if "image_repository_arns" in result:  # an absent (AWS::NoValue) entry comes as "None" from moto (PLATFORM §5)
        result["image_repository_arns"] = ",".join(a for a in result["image_repository_arns"].split(",") if a.startswith("arn:"))
    return result


def from_stack(stack: Mapping[str, Any]) -> dict[str, str]:
    """Map a described stack's Outputs to resolve()'s keys; missing ones are a ConfigError."""
    name = stack.get("StackName", "?")
    status = str(stack.get("StackStatus", ""))
    if status.startswith(_UNUSABLE):
        raise ConfigError("infra_stack", name, f"stack is {status}; fix or redeploy it with `sm-dist infra deploy --stack-name {name}`")
    result = present(stack)
    missing = [k for k in RESOLVED_KEYS if k not in result]
    if missing:
        raise ConfigError("infra_stack", name, f"stack lacks outputs {missing}; is it an sm_dist infra stack (sm-dist infra template)?")
    return result


def from_config(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The default stack's outputs from the config file that deploy wrote."""
    data = config.read(environ)
    name = data.get("default")
    entry = data["stacks"].get(name) if name else None
    if not entry:
        raise ConfigError(
            "infra_stack", None,
            f"no deployed infra recorded in {config.config_path(environ)}; run "
            "`sm-dist infra deploy --stack-name NAME` or pass infra_stack=NAME",
        )
    missing = [k for k in RESOLVED_KEYS if not entry.get(k)]
    if missing:
        raise ConfigError(str(config.config_path(environ)), name, f"entry lacks {missing}; redeploy with `sm-dist infra deploy --stack-name {name}`")
    return {k: str(entry[k]) for k in (*RESOLVED_KEYS, *REACH_KEYS, "caller_policy_arn") if entry.get(k)}


def resolve(stack_name: str | None = None, session: Session | None = None, *, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Role ARN, bucket and checkpoint URI of an sm_dist infra stack.

    `stack_name` given: read that stack's outputs from CloudFormation (unknown stack ->
    ConfigError naming the region). None: the stack `sm-dist infra deploy` recorded last in the
    config file, without any AWS call. Returns {"role_arn", "bucket", "checkpoint_uri"} and,
    when known, "artifact_uri" (the S3 prefix the role may use for code and outputs),
    "image_repository_arns" (the ECR repositories the role may pull from, comma-separated),
    "kms_key_arn", "vpc_mode" and "data_buckets" (what else the role may reach; "none" for none).
    """
    if stack_name is None:
        return from_config(environ)
    if not isinstance(stack_name, str) or not stack_name:
        raise ConfigError("infra_stack", stack_name, "a CloudFormation stack name, e.g. 'sm-dist'")
    cfn = aws.cloudformation(session)
    stack = describe_stack(cfn, stack_name)
    if stack is None:
        raise ConfigError(
            "infra_stack", stack_name,
            f"no such stack in region {aws.region_of(cfn)}; deploy it with `sm-dist infra deploy --stack-name {stack_name}` "
            "or check AWS_REGION / AWS_PROFILE",
        )
    result = from_stack(stack)
    _log.debug("infra stack %s resolved to %s", stack_name, result)
    return result
