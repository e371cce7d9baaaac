"""Where a job's role and S3 locations come from: explicit arguments, the infra stack, the SDK.

Precedence: explicit `role=` / `output_s3_uri=` / `checkpoint_s3_uri=`, then the stack made by
`sm-dist infra deploy` (`infra_stack=`; "" or no role at all means the one recorded last), then the SageMaker
SDK (the caller's own execution role; the SDK's default bucket `sagemaker-<region>-<account>`,
which `fit` creates if missing, as ModelTrainer would). Only the fallbacks call AWS, read-only.

A local plan (`local=True`) makes no AWS call at all: `local_locations` fills what was not given
with labels (`LOCAL_ROLE_ARN`, the `LOCAL_BUCKET` of local mode's own S3 endpoint).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from boto3.session import Session

    from sm_dist.planning.config import LaunchConfig

_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::(\d{12}):role/.+")
#: Prefix under the SDK's default bucket, like ModelTrainer's `<bucket>/<base_job_name>/`.
DEFAULT_PREFIX = "sm-dist"
#: A well-formed role ARN that labels a local plan; never sent to AWS.
LOCAL_ROLE_ARN = "arn:aws:iam::000000000000:role/sm-dist-local"
#: The bucket local mode creates on its own S3 endpoint (127.0.0.1), never on AWS.
LOCAL_BUCKET = "sm-dist-local"


@dataclass(frozen=True)
class Locations:
    """Role and S3 locations of one job."""

    role_arn: str
    output_s3_uri: str
    """S3OutputPath; the code bundle goes under <this>/<job>/input/code/."""
    checkpoint_base: str | None
    """Checkpoint prefix from the infra stack (the job name is appended), if any."""
    default_bucket: str | None
    """Set when output_s3_uri is the SDK's default bucket, which fit creates if missing."""
    source: str
    infra_stack: str | None = None
    """The infra stack the role comes from (None: the role is not a stack's)."""
    image_repository_arns: tuple[str, ...] | None = None
    """ECR repositories that stack's role may pull from (None: the stack does not say)."""
    reach: Mapping[str, str] | None = None
    """That stack's resolved outputs: what its role may reach (sm_dist.planning.reach)."""


def _infra(config: LaunchConfig, session_factory: Callable[[], Session]) -> dict[str, str] | None:
    from sm_dist.provision import config as infra_config
    from sm_dist.provision.outputs import resolve

    if config.infra_stack is None:
        # No stack named: use the one `sm-dist infra deploy` recorded, if any and if the caller
        # did not give a role, so a user who deployed the infra never pastes an ARN.
        if config.role or not infra_config.read().get("default"):
            return None
        return resolve(stack_name=None)
    return resolve(stack_name=config.infra_stack or None, session=session_factory())


def _sdk_role(role: str | None, session: Session) -> str:
    from sagemaker.core.helper.iam_role_resolver import resolve_and_validate_role
    from sagemaker.core.helper.session_helper import Session

    try:
        resolved: str = resolve_and_validate_role(provided_role=role, sagemaker_session=Session(boto_session=session),
                                                  validate_role=False)
        return resolved
    except Exception as exc:  # RoleValidationError, ValueError, botocore errors: all mean "no role"
        raise ConfigError(
            "role", role, f"could not resolve an execution role ({exc}); pass role='arn:aws:iam::<account>:role/<name>' "
            "or infra_stack= (see sm-dist infra deploy)",
        ) from None


def resolve_locations(config: LaunchConfig, session_factory: Callable[[], Session], region: str) -> Locations:
    """Role ARN and output prefix for `config`. `session_factory()` gives a boto3 Session."""
    infra = _infra(config, session_factory)
    role = config.role or (infra or {}).get("role_arn")
    source = "explicit" if config.role else ("infra stack" if role else "SageMaker SDK")
    if not role or not _ROLE_ARN.fullmatch(role):
        role = _sdk_role(role, session_factory())
    account = _ROLE_ARN.fullmatch(role)
    if account is None:
        raise ConfigError("role", role, "expected an IAM role ARN arn:aws:iam::<account>:role/<name>")
    output, bucket = config.output_s3_uri, None
    if output is None and infra:
        output = infra.get("artifact_uri") or f"s3://{infra['bucket']}"
    if output is None:
        bucket = f"sagemaker-{region}-{account.group(1)}"
        output = f"s3://{bucket}/{DEFAULT_PREFIX}"
    checkpoint_base = (infra or {}).get("checkpoint_uri")
    stack, pulls, reach = None, None, None
    if infra and role == infra.get("role_arn"):
        reach = MappingProxyType(dict(infra))
        from sm_dist.provision import config as infra_config

        stack = config.infra_stack or infra_config.read().get("default") or "?"
        if infra.get("image_repository_arns"):
            pulls = tuple(infra["image_repository_arns"].split(","))
    return Locations(role, output.rstrip("/"), checkpoint_base, bucket, source, stack, pulls, reach)


def local_locations(config: LaunchConfig) -> Locations:
    """Role and output prefix of a local plan: what was given, else labels. No AWS call."""
    role = config.role or LOCAL_ROLE_ARN
    if not _ROLE_ARN.fullmatch(role):
        raise ConfigError("role", role, "expected an IAM role ARN arn:aws:iam::<account>:role/<name> (or none locally)")
    output = (config.output_s3_uri or f"s3://{LOCAL_BUCKET}/{DEFAULT_PREFIX}").rstrip("/")
    return Locations(role, output, None, None, "local")


__all__ = ["LOCAL_BUCKET", "LOCAL_ROLE_ARN", "Locations", "local_locations", "resolve_locations"]
