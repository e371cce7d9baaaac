"""The field checks of a `LaunchConfig`, each refusal one line naming the field, the value and the fix.

`LaunchConfig.__post_init__` (`sm_dist.planning.config`) runs them in order; a check may also
normalise a field it accepted (a list to a tuple, a channel's source to a `Channel`). Checks that
need the catalog, the estimator or the source dir live in `preflight`.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sm_dist.contract.checkpoint import CheckpointMode, check_interval, check_keep
from sm_dist.errors import ConfigError, check_int
from sm_dist.planning.channels import SourceKind, channels_from

if TYPE_CHECKING:
    from sm_dist.planning.config import LaunchConfig

_ENV_KEY_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_TAG_KEY_RE = re.compile(r"[\w\s.:/=+\-@]{1,128}")
#: ResourceConfig.KeepAlivePeriodInSeconds's range in the service model (docs/PLATFORM.md §1.13).
KEEP_ALIVE_MAX_S = 21_600
#: ResourceConfig.TrainingPlanArn as the service model writes it, with a plan name (docs/PLATFORM.md §1.10).
_TRAINING_PLAN_ARN_RE = re.compile(r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:[0-9]{12}:training-plan/[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}")


def check_text(name: str, value: object) -> None:
    """A non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(name, value, "expected a non-empty string")


def check_whole(name: str, value: object, low: int, high: int | None = None) -> None:
    """A whole number in low..high (no upper bound: high=None); a bool is refused."""
    check_int(name, value, low, f"expected a whole number {f'>= {low}' if high is None else f'in {low}..{high}'}", maximum=high)


def check_training_plan_arn(value: object) -> None:
    """ResourceConfig.TrainingPlanArn: the service model's pattern, with a plan name."""
    if value is not None and not _TRAINING_PLAN_ARN_RE.fullmatch(str(value)):
        raise ConfigError("training_plan_arn", value, "expected the plan's ARN, "
                          "arn:aws:sagemaker:<region>:<account>:training-plan/<name> (aws sagemaker list-training-plans)")


def check_numbers(config: LaunchConfig) -> None:
    """The whole numbers and amounts: counts, seeds, limits, checkpoint period and keep."""
    check_whole("instance_count", config.instance_count, 1)
    check_whole("seed", config.seed, 0)
    check_whole("max_restarts", config.max_restarts, 0)
    if config.hang_timeout_s is not None:
        check_whole("hang_timeout_s", config.hang_timeout_s, 0)
    check_whole("volume_size_gb", config.volume_size_gb, 1)
    check_whole("micro_batch", config.micro_batch, 1)
    if config.seq_len is not None:
        check_whole("seq_len", config.seq_len, 1)
    if config.tokens is not None and not (isinstance(config.tokens, (int, float)) and config.tokens > 0):
        raise ConfigError("tokens", config.tokens, "expected a positive number of training tokens, e.g. 2e12")
    check_keep(config.checkpoint_keep, "checkpoint_keep")  # the contract's rule, as in the spec and runtime
    check_interval(config.checkpoint_interval_steps, "checkpoint_interval_steps")
    for name in ("nproc_per_node", "max_runtime_s", "max_wait_s"):
        if getattr(config, name) is not None:
            check_whole(name, getattr(config, name), 1)
    if config.keep_alive_s is not None:
        check_whole("keep_alive_s", config.keep_alive_s, 0, KEEP_ALIVE_MAX_S)
    if config.retry_attempts is not None:
        check_whole("retry_attempts", config.retry_attempts, 1, 30)
    if config.max_cost_usd is not None and not (isinstance(config.max_cost_usd, (int, float)) and config.max_cost_usd > 0):
        raise ConfigError("max_cost_usd", config.max_cost_usd, "expected a positive number of dollars")
    if config.params is not None and not (isinstance(config.params, (int, float)) and config.params > 0):
        raise ConfigError("params", config.params, "expected a positive parameter count, e.g. 7e9")


def check_chain(config: LaunchConfig) -> None:
    """The settings of a chain of jobs (chain=True): links, on-demand switch, fallback types."""
    for name in ("max_links", "on_demand_after"):
        value = getattr(config, name)
        if value is not None:
            check_whole(name, value, 1, 99 if name == "max_links" else None)
            if not config.chain:
                raise ConfigError(name, value, "applies to a chain of jobs: add chain=True (--chain)")
    if config.on_demand_after is not None and not config.spot:
        raise ConfigError("on_demand_after", config.on_demand_after, "counts spot interruptions: add spot=True (--spot)")
    _check_fallbacks(config)
    if config.chain and str(config.checkpoint_mode).lower() == CheckpointMode.OFF:
        raise ConfigError("checkpoint_mode", "off", "each job of a chain resumes from the checkpoints: "
                          "use another mode")


def _check_fallbacks(config: LaunchConfig) -> None:
    kinds: Any = config.fallback_instance_types  # what the caller gave: a list, a tuple, or a wrong type
    if isinstance(kinds, str) or not all(isinstance(k, str) and k.strip() for k in kinds):
        raise ConfigError("fallback_instance_types", kinds, "expected a list of instance types, e.g. "
                          "['ml.p4de.24xlarge'] (--fallback-instance-type, repeatable)")
    object.__setattr__(config, "fallback_instance_types", kinds := tuple(kinds))
    if kinds and not config.chain:
        raise ConfigError("fallback_instance_types", list(kinds), "applies to a chain of jobs: add chain=True "
                          "(--chain)")
    if len(kinds) > 4 or len(set(kinds)) != len(kinds) or config.instance_type in kinds:
        raise ConfigError("fallback_instance_types", list(kinds), "give at most 4 types, each once, other than "
                          "instance_type (InstancePreferences holds 5 in all)")


def check_s3(config: LaunchConfig) -> None:
    """The S3 URIs, and the data channels (a file system needs the job's VPC)."""
    for name in ("checkpoint_s3_uri", "output_s3_uri"):
        value = getattr(config, name)
        if value is not None and not re.fullmatch(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?", str(value)):
            raise ConfigError(name, value, "expected s3://bucket/prefix")
    object.__setattr__(config, "inputs", MappingProxyType(channels_from(config.inputs)))
    for name, channel in config.inputs.items():
        if channel.kind in (SourceKind.FSX_LUSTRE, SourceKind.EFS) and not config.subnets:
            raise ConfigError(f"inputs.{name}", channel.source, "a file system is reached through the job's VPC: "
                              "pass subnets= and security_group_ids= (--subnet, --security-group-id)")


def check_mappings(config: LaunchConfig) -> None:
    """environment and tags (keys and values), the lists of strings, the VPC pair."""
    for key, value in config.environment.items():
        if not _ENV_KEY_RE.fullmatch(str(key)) or not isinstance(value, str):
            raise ConfigError(f"environment.{key}", value, "names: letters, digits, _; values: strings")
    for key, value in config.tags.items():
        if not _TAG_KEY_RE.fullmatch(str(key)) or not isinstance(value, str):
            raise ConfigError(f"tags.{key}", value, "tag keys ≤128 chars, values strings")
    for name in ("metrics", "subnets", "security_group_ids", "ignore_patterns", "args"):
        value = getattr(config, name)
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise ConfigError(name, value, "expected a list of strings")
        object.__setattr__(config, name, tuple(value))
    if bool(config.subnets) != bool(config.security_group_ids):
        raise ConfigError("subnets", config.subnets, "a VPC needs both subnets and security_group_ids")


__all__ = ["KEEP_ALIVE_MAX_S", "check_chain", "check_mappings", "check_numbers", "check_s3", "check_text",
           "check_training_plan_arn", "check_whole"]
