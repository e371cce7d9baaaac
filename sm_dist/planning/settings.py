"""`LaunchSettings`: the keyword arguments of `sm_dist.plan`/`sm_dist.fit`, as a type checker sees them.

`fit("train.py", **settings)` builds a `LaunchConfig` from them, which refuses an unknown key at
run time; typed as `**settings: Unpack[LaunchSettings]`, a misspelled keyword (`instance_cout=2`)
or a wrong type is also an error in the user's editor and mypy, before anything runs. The keys are
LaunchConfig's fields except `entry` (fit's first argument); each type is the field's, or what the
field's check accepts and normalizes (a list for a tuple, "bf16" for `Precision.BF16`, a source
string for a `Channel`). tests/test_public_types.py keeps the two equal. Besides them, the sections: a record
(or a config file's mapping) that stands for a group of those keys, as ModelTrainer groups its own
(`compute=sm_dist.Compute(instance_type=..., instance_count=2)`, `stopping=`, `data=`, `networking=`,
`observability=`, `chaining=`, `checkpoint=`), mapped to the flat keys in one place: `flatten`.

    settings: sm_dist.planning.settings.LaunchSettings = {"instance_type": "ml.g5.xlarge", "instance_count": 2}
    sm_dist.plan("train.py", **settings)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, TypedDict

from sm_dist.contract.checkpoint import CheckpointMode, CheckpointModeName
from sm_dist.errors import ConfigError
from sm_dist.planning.budget import Chaining, StoppingCondition
from sm_dist.planning.channels import Channel, ChannelSettings
from sm_dist.planning.config import OutputCompression
from sm_dist.planning.mlflow_setting import MlflowSettings, MlflowTarget
from sm_dist.planning.request import Compute, Data, Networking, Observability
from sm_dist.vocab import Precision, PrecisionName, Strategy, StrategyName, did_you_mean


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


def _same_names(record: type[Any]) -> dict[str, str]:
    """A section whose every field is the flat setting of its own name."""
    return {f.name: f.name for f in fields(record)}


#: Each section keyword: its record, and each of its fields' flat setting (LaunchConfig's field). The records
#: live beside the code that owns them (Compute, Networking, Observability, Data: the request's; StoppingCondition,
#: Chaining: the budget's); only the checkpoint section names its fields without their `checkpoint_` prefix.
SECTIONS: dict[str, tuple[type[Any], dict[str, str]]] = {
    "checkpoint": (Checkpointing, {"s3_uri": "checkpoint_s3_uri", "mode": "checkpoint_mode",
                                   "interval_steps": "checkpoint_interval_steps", "keep": "checkpoint_keep",
                                   "async_checkpoint": "async_checkpoint"}),
    "compute": (Compute, _same_names(Compute)),
    "stopping": (StoppingCondition, _same_names(StoppingCondition)),
    "data": (Data, _same_names(Data)),
    "networking": (Networking, _same_names(Networking)),
    "observability": (Observability, _same_names(Observability)),
    "chaining": (Chaining, _same_names(Chaining)),
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
    # the sections: each stands for some of the settings above (SECTIONS, flatten); one given both ways is refused
    checkpoint: Checkpointing | None
    compute: Compute | None
    stopping: StoppingCondition | None
    data: Data | None
    networking: Networking | None
    observability: Observability | None
    chaining: Chaining | None


__all__ = ["SECTIONS", "Checkpointing", "LaunchSettings", "flatten"]
