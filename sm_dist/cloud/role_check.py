"""Can the execution role do what this job will do? Asked of IAM's policy simulator, before any upload.

The SageMaker SDK's own gate (`resolve_and_validate_role`) simulates a fixed list of actions on
resource `*` with no context: `ecr:GetAuthorizationToken`, `cloudwatch:PutMetricData` and nine EC2
network-interface actions. A least-privilege role fails it for the wrong reasons (EC2 actions a job
outside a VPC never needs; a PutMetricData limited to SageMaker's namespace, which a simulation
without context cannot match) and passes it while missing what the job really needs (its S3
prefixes, its KMS key). So sm_dist asks the same API (iam:SimulatePrincipalPolicy) the precise
question: each action the job's request implies, on the resource it names, with the context keys
the service sends (docs/PLATFORM.md §10). A denial is one line naming the actions, the resources and
the fix; a caller that may not simulate gets a warning, as with the SDK — never a silent pass.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from sm_dist.errors import ConfigError
from sm_dist.planning.reach import s3_parts

if TYPE_CHECKING:
    from boto3.session import Session

    from sm_dist.planning.plan import Plan

_log = logging.getLogger(__name__)

#: SageMaker's training jobs write their logs and metrics here (docs/PLATFORM.md §10).
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
METRICS_NAMESPACE = "/aws/sagemaker/TrainingJobs"
TRUSTED_SERVICE = "sagemaker.amazonaws.com"
#: The EC2 actions SageMaker takes with the role to place a job in a VPC (docs/PLATFORM.md §10).
VPC_DESCRIBE = ("ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions",
                "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups")
VPC_MANAGE = ("ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
              "ec2:DeleteNetworkInterfacePermission")
ECR_PULL = ("ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage")
#: What the SSM agent in a remote-debug job's container calls with the role (docs/PLATFORM.md §1.16).
SSM_AGENT = ("ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel",
             "ssmmessages:OpenDataChannel")
#: What sm_dist's runtime asks of the MlflowConfig tracking server with the role (sm_dist.runtime.mlflow_log:
#: find or create the experiment and the job's run, log the lines, end the run), as IAM names the MLflow
#: REST calls (service prefix sagemaker-mlflow, docs/PLATFORM.md §1.15).
MLFLOW_ACTIONS = ("sagemaker-mlflow:GetExperimentByName", "sagemaker-mlflow:CreateExperiment",
                  "sagemaker-mlflow:SearchRuns", "sagemaker-mlflow:CreateRun", "sagemaker-mlflow:GetRun",
                  "sagemaker-mlflow:LogBatch", "sagemaker-mlflow:UpdateRun")
#: An MLflow App (`mlflow-app/…`) is reached through one SageMaker action on the app; the sagemaker-mlflow
#: actions above define the tracking-server resource type only (docs/PLATFORM.md §1.15).
MLFLOW_APP_ACTIONS = ("sagemaker:CallMlflowAppApi",)
#: What sm_dist's runtime does at a checkpoint URI it writes itself (no CheckpointConfig; its S3 storage:
#: list, read, write, and delete a manifest and old checkpoints; docs/PLATFORM.md §4.5).
RUNTIME_CHECKPOINT_ACTIONS = ("s3:PutObject", "s3:GetObject", "s3:DeleteObject")


@dataclass(frozen=True)
class Need:
    """Actions the job takes on one resource, with the request context IAM evaluates them in."""

    actions: tuple[str, ...]
    resource: str
    why: str
    context: tuple[tuple[str, str], ...] = ()
    """(condition key, string value) pairs the service sends, e.g. ("s3:prefix", "team/")."""
    shown: str = ""
    """How a denial names the resource (default: the ARN); an S3 prefix as the user wrote it."""


def _s3(uri: str, partition: str, why: str, objects: tuple[str, ...], listed: bool = False) -> list[Need]:
    """`objects` actions on an example key under the prefix (policies grant prefixes: `bucket/prefix/*`),
    and with `listed` the ListBucket of that prefix (the service sends it as `s3:prefix`)."""
    bucket, key = s3_parts(uri)
    prefix = f"{key}/" if key else ""
    shown = f"s3://{bucket}/{prefix}"
    found = [Need(objects, f"arn:{partition}:s3:::{bucket}/{prefix}sm-dist-example", why, (), shown)]
    if listed:
        found.append(Need(("s3:ListBucket",), f"arn:{partition}:s3:::{bucket}", why, (("s3:prefix", prefix),), shown))
    return found


def needs(request: Mapping[str, Any], region: str, account: str, partition: str = "aws",
          runtime_checkpoint: str | None = None) -> list[Need]:
    """What a job started from `request` does with its role: code and data read, output and
    checkpoints written, logs and metrics sent, the image pulled, MLflow runs logged, network interfaces made.
    `runtime_checkpoint`: the S3 URI sm_dist's runtime writes checkpoints to itself (the job spec's, in the
    modes without CheckpointConfig), which the request does not name."""
    found: list[Need] = []
    for channel in request.get("InputDataConfig") or []:
        uri = ((channel.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri")
        if uri:
            found += _s3(uri, partition, f"channel {channel.get('ChannelName')}", ("s3:GetObject",), listed=True)
    output = request.get("OutputDataConfig") or {}
    found += _s3(output["S3OutputPath"], partition, "model output", ("s3:PutObject",))
    if output.get("KmsKeyId"):
        found.append(Need(("kms:Encrypt", "kms:GenerateDataKey"), _kms_arn(output["KmsKeyId"], region, account, partition),
                          "output_kms_key"))
    checkpoint = (request.get("CheckpointConfig") or {}).get("S3Uri")
    if checkpoint:
        found += _s3(checkpoint, partition, "checkpoints", ("s3:PutObject", "s3:GetObject"), listed=True)
    elif runtime_checkpoint:
        found += _s3(runtime_checkpoint, partition, "checkpoints", RUNTIME_CHECKPOINT_ACTIONS, listed=True)
    logs = f"arn:{partition}:logs:{region}:{account}:log-group:{LOG_GROUP}"
    found += [Need(("logs:CreateLogGroup", "logs:DescribeLogStreams"), f"{logs}:*", "logs"),
              Need(("logs:CreateLogStream", "logs:PutLogEvents"), f"{logs}:log-stream:sm-dist-example", "logs"),
              Need(("cloudwatch:PutMetricData",), "*", "metrics", (("cloudwatch:namespace", METRICS_NAMESPACE),))]
    image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage", "")
    repository = _ecr_repository_arn(image, partition)
    if repository:
        found += [Need(("ecr:GetAuthorizationToken",), "*", "image"), Need(ECR_PULL, repository, "image")]
    if (request.get("RemoteDebugConfig") or {}).get("EnableRemoteDebug"):
        found.append(Need(SSM_AGENT, "*", "remote_debug"))
    mlflow = (request.get("MlflowConfig") or {}).get("MlflowResourceArn")
    if mlflow:
        found.append(Need(MLFLOW_APP_ACTIONS if ":mlflow-app/" in mlflow else MLFLOW_ACTIONS, mlflow, "mlflow"))
    if request.get("VpcConfig"):
        found += [Need(VPC_DESCRIBE, "*", "VPC"),
                  Need(VPC_MANAGE, f"arn:{partition}:ec2:{region}:{account}:network-interface/sm-dist-example", "VPC")]
    return found


def _kms_arn(key: str, region: str, account: str, partition: str) -> str:
    return key if key.startswith("arn:") else f"arn:{partition}:kms:{region}:{account}:key/{key}"


def _ecr_repository_arn(image: str, partition: str) -> str | None:
    """arn:…:ecr:REGION:ACCOUNT:repository/NAME of an ECR image URI; None elsewhere."""
    host, _, path = image.partition("/")
    parts = host.split(".")
    if len(parts) < 6 or parts[1:3] != ["dkr", "ecr"] or not path:
        return None
    name = path.split("@", 1)[0].rsplit(":", 1)[0]
    return f"arn:{partition}:ecr:{parts[3]}:{parts[0]}:repository/{name}"


def check_role(plan: Plan, session: Session) -> list[str]:
    """Refuse (ConfigError) a role that does not exist, does not trust SageMaker, or is denied an
    action this job takes; return warnings for what the caller could not check."""
    from botocore.exceptions import ClientError

    role = plan.role_arn
    partition, account = role.split(":")[1], role.split(":")[4]
    iam = session.client("iam")
    warnings = _check_trust(iam, role)
    try:
        denied = _denied(iam, role, needs(plan.request, plan.region, account, partition, runtime_checkpoint_uri(plan)))
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code not in ("AccessDenied", "AccessDeniedException"):
            raise
        return [*warnings, f"could not check what role {role} may do (this caller may not iam:SimulatePrincipalPolicy); "
                           "a missing permission will fail the job on SageMaker instead"]
    if denied:
        raise ConfigError("role", role, _denial(denied))
    return warnings


def runtime_checkpoint_uri(plan: Plan) -> str | None:
    """The S3 URI the job's runtime writes checkpoints to itself: the job spec's, when the request has no
    CheckpointConfig (SageMaker syncs none) and the mode writes somewhere (not "off" or "local")."""
    settings = plan.job_spec.checkpoint
    if plan.request.get("CheckpointConfig") or str(settings.mode) in ("off", "local"):
        return None
    return settings.uri if settings.uri and settings.uri.startswith("s3://") else None


def _check_trust(iam: Any, role: str) -> list[str]:
    from botocore.exceptions import ClientError

    try:
        document = iam.get_role(RoleName=role.rsplit("/", 1)[-1])["Role"].get("AssumeRolePolicyDocument")
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchEntity", "NoSuchEntityException"):
            raise ConfigError("role", role, "no such IAM role in this account; deploy one with `sm-dist infra deploy` "
                              "or pass an existing role's ARN") from None
        if code in ("AccessDenied", "AccessDeniedException"):
            return [f"could not read the trust policy of role {role} (this caller may not iam:GetRole)"]
        raise
    if isinstance(document, str):
        document = json.loads(unquote(document))
    if document and TRUSTED_SERVICE not in _trusted_services(document):
        raise ConfigError("role", role, f"its trust policy does not let {TRUSTED_SERVICE} assume it (sts:AssumeRole), "
                          "so SageMaker cannot start the job; add that principal or use `sm-dist infra deploy`'s role")
    return []


def _trusted_services(document: Mapping[str, Any]) -> set[str]:
    services: set[str] = set()
    statements = document.get("Statement") or []
    for stmt in [statements] if isinstance(statements, dict) else statements:
        actions = stmt.get("Action") or []
        if stmt.get("Effect") != "Allow" or not {"sts:AssumeRole", "sts:*", "*"} & set(_listed(actions)):
            continue
        principal = stmt.get("Principal") or {}
        services.update(_listed(principal.get("Service") if isinstance(principal, dict) else None))
    return services


def _listed(value: Any) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _denied(iam: Any, role: str, wanted: Iterable[Need]) -> list[tuple[str, Need]]:
    """(action, need) pairs IAM's simulator does not allow, one SimulatePrincipalPolicy call per resource."""
    denied: list[tuple[str, Need]] = []
    for need in wanted:
        context = [{"ContextKeyName": key, "ContextKeyValues": [value], "ContextKeyType": "string"}
                   for key, value in need.context]
        pages = iam.get_paginator("simulate_principal_policy").paginate(
            PolicySourceArn=role, ActionNames=list(need.actions), ResourceArns=[need.resource], ContextEntries=context)
        for page in pages:
            for result in page.get("EvaluationResults", []):
                if result.get("EvalDecision") == "allowed":
                    continue
                if _unverifiable(result):
                    _log.warning("role %s: %s cannot be verified (an SCP or permissions boundary with conditions)",
                                 role, result.get("EvalActionName"))
                    continue
                denied.append((str(result.get("EvalActionName")), need))
    return denied


def _unverifiable(result: Mapping[str, Any]) -> bool:
    """An implicit deny the simulator itself cannot settle (SCPs, permissions boundaries): the SDK's rule."""
    if result.get("EvalDecision") == "explicitDeny":
        return False
    org = (result.get("OrganizationsDecisionDetail") or {}).get("AllowedByOrganizations")
    boundary = (result.get("PermissionsBoundaryDecisionDetail") or {}).get("AllowedByPermissionsBoundary")
    return org is False or boundary is False


def _denial(denied: list[tuple[str, Need]]) -> str:
    """One line: each denied action on what, for what; then how to fix it."""
    shown: dict[str, list[str]] = {}
    for action, need in denied:
        shown.setdefault(f"{need.shown or need.resource} ({need.why})", []).append(action)
    parts = [f"{', '.join(actions)} on {where}" for where, actions in shown.items()]
    return (f"may not {'; '.join(parts)}; grant that to the role (an sm_dist infra stack's role: keep the job's "
            "URIs inside what the stack grants, or widen it with sm-dist infra deploy --param DataBuckets=…, "
            "VpcMode=true or KmsKeyArn=…)")


__all__ = ["LOG_GROUP", "METRICS_NAMESPACE", "MLFLOW_ACTIONS", "MLFLOW_APP_ACTIONS", "RUNTIME_CHECKPOINT_ACTIONS", "Need",
           "check_role", "needs", "runtime_checkpoint_uri"]
