"""`LaunchSettings`: the keyword arguments of `sm_dist.plan`/`sm_dist.fit`, as a type checker sees them.

`fit("train.py", **settings)` builds a `LaunchConfig` from them, which refuses an unknown key at
run time; typed as `**settings: Unpack[LaunchSettings]`, a misspelled keyword (`instance_cout=2`)
or a wrong type is also an error in the user's editor and mypy, before anything runs. The keys are
LaunchConfig's fields except `entry` (fit's first argument); each type is the field's, or what the
field's check accepts and normalizes (a list for a tuple, "bf16" for `Precision.BF16`, a source
string for a `Channel`). tests/test_public_types.py keeps the two equal.

    settings: sm_dist.planning.settings.LaunchSettings = {"instance_type": "ml.g5.xlarge", "instance_count": 2}
    sm_dist.plan("train.py", **settings)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from sm_dist.contract.checkpoint import CheckpointMode, CheckpointModeName
from sm_dist.errors import ConfigError
from sm_dist.planning.channels import Channel, DistributionName, InputModeName
from sm_dist.planning.config import OutputCompression
from sm_dist.planning.mlflow_setting import MlflowSettings, MlflowTarget
from sm_dist.vocab import Precision, PrecisionName, Strategy, StrategyName, did_you_mean


class ChannelSettings(TypedDict, total=False):
    """A data channel as a mapping (a config file's `inputs:` entry): its source, mode and distribution."""

    source: str
    mode: InputModeName
    distribution: DistributionName


@dataclass(frozen=True, kw_only=True)
class Checkpointing:
    """The checkpoint settings as one section: `sm_dist.fit(..., checkpoint=sm_dist.Checkpointing(interval_steps=100))`,
    or a config file's `checkpoint: {interval_steps: 100}`. Each field is a flat setting by another spelling
    (`SECTIONS` maps them, in one place: `flatten`); a field left None is not given. The same record the job
    spec carries and the runtime's Checkpointer takes is `sm_dist.contract.checkpoint.CheckpointSettings`."""

    s3_uri: str | None = None
    """checkpoint_s3_uri: s3://bucket/prefix for checkpoints; required with spot."""
    mode: CheckpointMode | CheckpointModeName | None = None
    """checkpoint_mode: auto, local, s3, sagemaker-sync or off."""
    interval_steps: int | None = None
    """checkpoint_interval_steps: steps between checkpoints."""
    keep: int | None = None
    """checkpoint_keep: committed checkpoints kept (at least 2)."""
    async_checkpoint: bool | None = None
    """async_checkpoint (the same name flat): write checkpoints in the background."""


#: Each section keyword: its record, and each of its fields' flat setting (LaunchConfig's field).
SECTIONS: dict[str, tuple[type[Checkpointing], dict[str, str]]] = {
    "checkpoint": (Checkpointing, {"s3_uri": "checkpoint_s3_uri", "mode": "checkpoint_mode",
                                   "interval_steps": "checkpoint_interval_steps", "keep": "checkpoint_keep",
                                   "async_checkpoint": "async_checkpoint"}),
}


def flatten(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` with each section (a record, or a mapping of its fields) replaced by the flat settings it stands
    for: the one place a section meets LaunchConfig. A setting given both ways is refused in one line."""
    flat = {key: value for key, value in settings.items() if key not in SECTIONS}
    for key, (record_type, names) in SECTIONS.items():
        if key not in settings or settings[key] is None:
            continue
        section = settings[key]
        if isinstance(section, Mapping):
            unknown = sorted(set(section) - set(names))
            if unknown:
                raise ConfigError(f"{key}.{unknown[0]}", section[unknown[0]],
                                  f"not a field of {key}{did_you_mean(str(unknown[0]), list(names))}; fields: "
                                  f"{', '.join(names)}")
            section = record_type(**section)
        if not isinstance(section, record_type):
            raise ConfigError(key, type(section).__name__, f"expected sm_dist.{record_type.__name__}(...) or a mapping "
                              f"of its fields ({', '.join(names)})")
        for name, setting in names.items():
            value = getattr(section, name)
            if value is None:
                continue
            if setting in flat:
                raise ConfigError(f"{key}.{name}", value, f"also given as {setting}={flat[setting]!r}: give it once")
            flat[setting] = value
    return flat


class LaunchSettings(TypedDict, total=False):
    """Every setting of `sm_dist.fit`/`plan` (LaunchConfig's fields but `entry`); see LaunchConfig's docs."""

    instance_type: str
    source_dir: str
    instance_count: int
    strategy: Strategy | StrategyName | Literal["auto"]
    precision: Precision | PrecisionName  # "bf16"
    params: float | None
    model: str | None
    hf_config: str | None
    tokens: float | None
    seq_len: int | None
    micro_batch: int
    seed: int
    nproc_per_node: int | None
    max_restarts: int
    hang_timeout_s: int | None
    checkpoint_s3_uri: str | None
    checkpoint_mode: CheckpointMode | CheckpointModeName
    checkpoint_interval_steps: int | None
    checkpoint_keep: int | None
    async_checkpoint: bool
    spot: bool
    max_cost_usd: float | None
    max_runtime_s: int | None
    max_wait_s: int | None
    retry_attempts: int | None
    chain: bool
    max_links: int | None
    on_demand_after: int | None
    fallback_instance_types: tuple[str, ...] | list[str]
    hyperparameters: Mapping[str, Any]
    args: tuple[str, ...] | list[str]  # a list where the config holds a tuple (a bare str is refused)
    environment: Mapping[str, str]
    # a Channel, its source (s3://..., a local folder, fsx-lustre://..., efs://...) or a config
    # file's {source:, mode:, distribution:} (channels_from)
    inputs: Mapping[str, Channel | str | os.PathLike[str] | ChannelSettings]
    metrics: tuple[str, ...] | list[str]
    role: str | None
    infra_stack: str | None
    output_s3_uri: str | None
    region: str | None
    image_uri: str | None
    torch_version: str | None
    py_version: str | None
    job_name: str | None
    base_job_name: str
    volume_size_gb: int
    volume_kms_key: str | None
    output_kms_key: str | None
    output_compression: OutputCompression
    subnets: tuple[str, ...] | list[str]
    security_group_ids: tuple[str, ...] | list[str]
    network_isolation: bool
    training_plan_arn: str | None
    encrypt_inter_container_traffic: bool
    keep_alive_s: int | None
    tags: Mapping[str, str]
    ignore_patterns: tuple[str, ...] | list[str]
    tensorboard: bool
    remote_debug: bool
    infra_check: bool | None
    mlflow: str | MlflowSettings | MlflowTarget | None  # a tracking server ARN, or {"arn":, "experiment":, "run":}
    checkpoint: Checkpointing | None  # a section: its fields are the checkpoint_* settings above (flatten)


__all__ = ["SECTIONS", "ChannelSettings", "Checkpointing", "LaunchSettings", "flatten"]
