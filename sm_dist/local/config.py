"""What local mode needs to know about a job: a frozen value built from a launch plan.

Local mode never reaches into the launch side's objects while it runs; `LocalJobConfig` is the
small, explicit subset it uses, so the host agents, the checkpoint sync and the chaos driver can
be tested with a hand-written config and a fake container command.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sm_dist.contract.container import CHECKPOINT_LOCAL_PATH, OPT_ML
from sm_dist.contract.sagemaker import check_channel_name, check_job_name
from sm_dist.errors import ConfigError, check_int


@dataclass(frozen=True, kw_only=True)
class LocalChannel:
    """One data channel as local mode lays it out: the files of `folder`, each host's share of them."""

    folder: Path
    mode: str = "File"
    """TrainingInputMode as inputdataconfig.json says it (File or FastFile: both are files here)."""
    distribution: str = "FullyReplicated"
    """S3DistributionType: FullyReplicated (every host gets every file) or ShardedByS3Key."""

    def keys(self) -> list[str]:
        """The channel's object keys (paths under the folder), in S3's listing order (sorted)."""
        return sorted(p.relative_to(self.folder).as_posix() for p in self.folder.rglob("*") if p.is_file())

    def share(self, host_index: int, host_count: int) -> list[str]:
        """The keys a host gets: all of them, or under ShardedByS3Key the host's round-robin share of the
        sorted keys (AWS documents "about 1/N of the objects" per instance, not which: docs/PLATFORM.md §1.9)."""
        keys = self.keys()
        return keys if self.distribution != "ShardedByS3Key" else keys[host_index::host_count]


@dataclass(frozen=True, kw_only=True)
class LocalJobConfig:
    """One SageMaker training job, as local mode runs it."""

    job_name: str
    """TrainingJobName; also names the job root folder and the checkpoint prefix."""
    container_command: tuple[str, ...]
    """The argv the cloud job runs as PID 1 (`Plan.container_command`); paths under /opt/ml."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """`Plan.environment`: extra variables of the container (paths under /opt/ml remapped)."""
    code_dir: Path | None = None
    """A folder holding the unpacked code bundle; becomes input/data/code on every host."""
    channels: Mapping[str, LocalChannel] = field(default_factory=dict)
    """Data channels: name -> the folder standing in for its source, laid out at input/data/<name>
    on every host as SageMaker delivers it (its mode and distribution)."""
    hyperparameters: Mapping[str, str] = field(default_factory=dict)
    """HyperParameters as SageMaker stores them: every value a string."""
    instance_type: str = "ml.m5.xlarge"
    """The instance type the cloud job would use (cost comparison, resourceconfig.json)."""
    instance_count: int = 1
    """Number of emulated hosts (algo-1 ... algo-N)."""
    checkpoint_uri: str | None = None
    """CheckpointConfig.S3Uri: s3://bucket/prefix (local endpoint), a local folder, or None (no sync)."""
    checkpoint_local_path: str = CHECKPOINT_LOCAL_PATH
    """CheckpointConfig.LocalPath inside the container."""
    tensorboard_uri: str | None = None
    """TensorBoardOutputConfig.S3OutputPath on the local endpoint (None: no TensorBoard folder synced)."""
    network_isolation: bool = False
    """EnableNetworkIsolation: the container gets no S3 endpoint and no credentials, only its peers
    (`sm_dist.local.hostenv`); the emulated CheckpointConfig sync is the platform's and goes on."""
    warm_pool: Path | None = None
    """The warm pool the job runs on (`sm_dist.local.warm_pool`): each host's persistent cache is
    `<warm_pool>/<host>`, seen at /opt/ml/sagemaker/warmpoolcache; None: no warm pool."""

    def __post_init__(self) -> None:
        check_job_name(self.job_name)
        if not self.container_command:
            raise ConfigError("container_command", self.container_command, "give the argv the job runs as PID 1")
        check_int("instance_count", self.instance_count, 1, "use a whole number >= 1")
        for name in self.channels:
            check_channel_name(name, f"channels[{name!r}]")
        for key, value in self.hyperparameters.items():
            if not isinstance(value, str):
                raise ConfigError(f"hyperparameters[{key!r}]", value, "SageMaker stores every value as a string")
        if not self.checkpoint_local_path.startswith(OPT_ML + "/"):
            raise ConfigError("checkpoint_local_path", self.checkpoint_local_path, f"use a path under {OPT_ML}/")

    @property
    def hosts(self) -> tuple[str, ...]:
        """The host names SageMaker gives the instances: algo-1 ... algo-N."""
        return tuple(f"algo-{i}" for i in range(1, self.instance_count + 1))
