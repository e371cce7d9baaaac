"""The exact CreateTrainingJob request, built through SageMaker SDK v3's ModelTrainer.

ModelTrainer assembles Compute, StoppingCondition, OutputDataConfig, CheckpointConfig,
Networking, retry strategy, metric definitions, tags and the SageMaker config file's defaults
(admin-set VPC, KMS keys, tags) into a request. Two of its habits do not fit sm_dist:

* with a `SourceCode` it uploads the code and runs `bash -c … sm_train.sh` as PID 1, which drops
  SIGTERM (docs/PLATFORM.md §1.3). So no SourceCode is given: the code channel is an S3 prefix sm_dist
  uploads itself, and `AlgorithmSpecification.ContainerEntrypoint` is set to sm_dist's PID 1
  in the serialized request — the one field ModelTrainer leaves empty without SourceCode.
* in SAGEMAKER_TRAINING_JOB mode its constructor resolves and validates the role (IAM calls)
  and may create the default bucket. A plan must create nothing, so the trainer is built in
  LOCAL_CONTAINER mode, which skips exactly those steps; without SourceCode the request it
  serializes is the same (tests/planning/test_request.py pins this). The role is validated
  separately, through the SDK, just before `fit` submits.

The request is then checked with botocore's own parameter validation for CreateTrainingJob.

A local plan's request is kept per settings (the memo), so a rehearsal need not import the SDK:
`build_request` serializes the request through ModelTrainer; importing the SDK (pydantic shapes,
pandas, scipy) costs seconds of CPU, the largest part of `sm-dist fit --local`'s start-up. The
serializer is a function of the settings, of the SDK's version and of the SageMaker config files
it reads (docs/PLATFORM.md §1.2); its answer for a local plan is kept in
``$SM_DIST_CACHE_HOME/requests/<key>.json`` and read back for the same inputs. The job name is the
one setting that changes from run to run (a new name each time): it is kept as a placeholder of the
same length and put back. The request read back is still checked by botocore (`validate_request`)
and the plan's constraints, as a new one is. A config override (`SAGEMAKER_*_CONFIG_OVERRIDE`, which
may name an S3 object) or a short job name (a placeholder could change other settings) skips the memo.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sm_dist.contract.container import CHECKPOINT_LOCAL_PATH, CODE_CHANNEL
from sm_dist.contract.log_lines import metric_regex
from sm_dist.errors import ConfigError, LaunchError, SdkError
from sm_dist.estimator.prices_live import cache_dir
from sm_dist.planning.channels import Channel, ChannelSettings, SourceKind
from sm_dist.planning.config import OutputCompression
from sm_dist.planning.mlflow_setting import MlflowSettings, MlflowTarget
from sm_dist.planning.preflight import sagemaker_service_model

if TYPE_CHECKING:
    from sagemaker.core.helper.session_helper import Session as SageMakerSession
    from sagemaker.core.shapes import Channel as SdkChannel
    from sagemaker.train.model_trainer import Mode, ModelTrainer

    from sm_dist.catalog.hardware import Hardware
    from sm_dist.catalog.images import ImageRef
    from sm_dist.planning.config import LaunchConfig

_log = logging.getLogger(__name__)

#: PID 1 of the job (docs/ARCHITECTURE.md "container command"); the code channel is on PYTHONPATH.
PID1_COMMAND = ("python3", "-m", "sm_dist.container.pid1")


# The request's sections as a user gives them (`sm_dist.fit(..., compute=sm_dist.Compute(...))`, or a config
# file's `compute:` mapping), named as ModelTrainer names its own. Each field is the flat setting of the same
# name (LaunchConfig documents it); a field left None is not given. `sm_dist.planning.settings.flatten` maps them.

@dataclass(frozen=True, kw_only=True)
class Compute:
    """ResourceConfig and what runs on it: the instances, spot, the other types a chain may use, the volume, the
    warm pool, a training plan, the infrastructure check."""

    instance_type: str | None = None
    instance_count: int | None = None
    spot: bool | None = None
    fallback_instance_types: tuple[str, ...] | list[str] | None = None
    volume_size_gb: int | None = None
    volume_kms_key: str | None = None
    keep_alive_s: int | None = None
    training_plan_arn: str | None = None
    infra_check: bool | None = None


@dataclass(frozen=True, kw_only=True)
class Networking:
    """VpcConfig, EnableNetworkIsolation and EnableInterContainerTrafficEncryption."""

    subnets: tuple[str, ...] | list[str] | None = None
    security_group_ids: tuple[str, ...] | list[str] | None = None
    network_isolation: bool | None = None
    encrypt_inter_container_traffic: bool | None = None


@dataclass(frozen=True, kw_only=True)
class Observability:
    """What the job shows while it runs: MetricDefinitions, TensorBoardOutputConfig, MlflowConfig,
    RemoteDebugConfig."""

    metrics: tuple[str, ...] | list[str] | None = None
    tensorboard: bool | None = None
    mlflow: str | MlflowSettings | MlflowTarget | None = None
    remote_debug: bool | None = None


@dataclass(frozen=True, kw_only=True)
class Data:
    """InputDataConfig (the channels: a `Channel`, its source, or a config file's mapping) and OutputDataConfig."""

    inputs: Mapping[str, Channel | str | os.PathLike[str] | ChannelSettings] | None = None
    output_s3_uri: str | None = None
    output_kms_key: str | None = None
    output_compression: OutputCompression | None = None


def default_image(region: str, torch_version: str | None, py_version: str | None, instance_type: str) -> str:
    """AWS's SageMaker PyTorch training image for this torch version, region and instance type."""
    from sm_dist.catalog.hardware import hardware

    return choose_image(region, torch_version, py_version, instance_type, hardware(instance_type))[0].uri


def choose_image(region: str, torch_version: str | None, py_version: str | None,
                 instance_type: str, hw: Hardware | None) -> tuple[ImageRef, str | None]:
    """The image for this torch version, region and instance type (`hw`: its hardware, None for a family
    the catalog lacks), and a note when it is not the one asked for; or a ConfigError naming the
    hardware, the image and the fix.

    From sm_dist's image table, not the SageMaker SDK's: the SDK's table does not know the
    `pytorch` repository AWS publishes torch 2.11+ in (docs/PLATFORM.md §6.1). The image must run
    on the instance: its CPU architecture and its torch's GPU kernels (docs/PLATFORM.md §7).
    """
    from sm_dist.catalog.images import image_for, training_image

    if hw is not None:
        image, note = image_for(torch_version, region, hw)
    else:  # a family the catalog lacks: SageMaker's accelerated families are p and g
        image, note = training_image(torch_version, region, gpu=instance_type.removeprefix("ml.").startswith(("p", "g"))), None
    if py_version is not None and py_version != image.python:
        raise ConfigError("py_version", py_version,
                          f"the torch {image.torch_version} image has {image.python}; leave py_version unset or pass image_uri=")
    return image, note


def job_image(config: LaunchConfig, region: str, hw: Hardware | None) -> tuple[ImageRef | None, str | None]:
    """The image of sm_dist's table the job runs (None for image_uri=: the user's own) and its note, if any:
    chosen once per plan, and handed on (the request, the wheels' platform, the local torch check)."""
    if config.image_uri:
        return None, None
    return choose_image(region, config.torch_version, config.py_version, config.instance_type, hw)


#: From this size of weights, "auto" uploads the model uncompressed: gzip saves 7% of fp32 and 20% of
#: bf16 weights, at 30-50 MB/s on one core, billed (docs/PLATFORM.md §1.1): about 30 s per GiB.
UNCOMPRESSED_FROM_BYTES = 2**30
_WEIGHT_BYTES = {"fp32": 4, "amp": 4, "mixed": 2, "bf16": 2}  # per parameter, as the model is saved


#: SageMaker accepts at most 40 MetricDefinitions per job (API reference, AlgorithmSpecification).
MAX_METRIC_DEFINITIONS = 40


def metric_definitions(names: Iterable[str]) -> list[dict[str, str]]:
    """SageMaker MetricDefinitions ([{"Name", "Regex"}]) for the metric line's `names`, plus "step" if absent."""
    ordered = list(dict.fromkeys(["step", *names]))
    if len(ordered) > MAX_METRIC_DEFINITIONS:
        raise ConfigError(
            "metrics", len(ordered), f"SageMaker accepts at most {MAX_METRIC_DEFINITIONS} metric definitions; log fewer"
        )
    return [{"Name": name, "Regex": metric_regex(name)} for name in ordered]


def compression_type(setting: str, params: int | None, precision: str) -> str:
    """OutputDataConfig.CompressionType for output_compression=`setting` ("gzip", "none", "auto"): "auto"
    is NONE when the estimate's weights (`params` × the precision's bytes) reach UNCOMPRESSED_FROM_BYTES,
    else GZIP (the platform's default), also when the model size is not known."""
    if setting != "auto":
        return setting.upper()
    weights = (params or 0) * _WEIGHT_BYTES.get(str(precision), 4)
    return "NONE" if weights >= UNCOMPRESSED_FROM_BYTES else "GZIP"


@dataclass(frozen=True, kw_only=True)
class RequestSpec:
    """What the plan decided, in the terms ModelTrainer takes; `build_request` turns it into the request."""

    job_name: str
    role_arn: str
    instance_type: str
    instance_count: int
    image_uri: str
    output_s3_uri: str
    channels: Mapping[str, Channel]
    """Input channels in request order, the code channel first; every source S3 or a file system
    (a local folder is planned as the S3 prefix it is uploaded to)."""
    max_runtime_s: int
    max_wait_s: int | None = None
    volume_size_gb: int = 30
    volume_kms_key: str | None = None
    spot: bool = False
    training_plan_arn: str | None = None
    """ResourceConfig.TrainingPlanArn: the training plan whose reserved capacity the job runs on."""
    keep_alive_s: int | None = None
    """ResourceConfig.KeepAlivePeriodInSeconds: the warm pool kept after the job; None: none asked."""
    output_kms_key: str | None = None
    output_compression: str = "GZIP"
    """OutputDataConfig.CompressionType: GZIP or NONE (`compression_type`)."""
    checkpoint_config_uri: str | None = None
    """CheckpointConfig.S3Uri (its LocalPath is /opt/ml/checkpoints); None: no CheckpointConfig."""
    environment: Mapping[str, str] = field(default_factory=dict)
    hyperparameters: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    subnets: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()
    network_isolation: bool = False
    encrypt_inter_container_traffic: bool = False
    retry_attempts: int = 0
    metric_definitions: tuple[Mapping[str, str], ...] = ()
    """SageMaker MetricDefinitions: {"Name", "Regex"} each."""
    tensorboard_s3_uri: str | None = None
    """TensorBoardOutputConfig.S3OutputPath; its LocalPath is left to the service's default,
    /opt/ml/output/tensorboard (docs/PLATFORM.md §1.14); None: no TensorBoardOutputConfig."""
    remote_debug: bool = False
    """RemoteDebugConfig.EnableRemoteDebug (docs/PLATFORM.md §1.16)."""
    infra_check: bool = False
    """InfraCheckConfig.EnableInfraCheck, as the plan resolved infra_check (docs/PLATFORM.md §1.16)."""
    mlflow: Mapping[str, str] | None = None
    """MlflowConfig as the API spells it (`mlflow_setting.MlflowTarget.request`); ModelTrainer has no
    field for it, so it is set on the serialized request, as ContainerEntrypoint is."""


def _trainer(spec: RequestSpec, session: SageMakerSession | None, training_mode: Mode | None = None) -> ModelTrainer:
    from sagemaker.core.shapes import (
        InfraCheckConfig,
        MetricDefinition,
        RemoteDebugConfig,
        RetryStrategy,
        StoppingCondition,
    )
    from sagemaker.core.training.configs import (
        CheckpointConfig,
        Compute,
        Networking,
        OutputDataConfig,
    )
    from sagemaker.train.model_trainer import Mode, ModelTrainer

    networking = None
    if spec.subnets or spec.encrypt_inter_container_traffic or spec.network_isolation:
        networking = Networking(
            subnets=list(spec.subnets) or None, security_group_ids=list(spec.security_group_ids) or None,
            enable_network_isolation=spec.network_isolation or None,
            enable_inter_container_traffic_encryption=spec.encrypt_inter_container_traffic or None,
        )
    trainer = ModelTrainer(
        training_mode=training_mode or Mode.LOCAL_CONTAINER,  # see the module docstring
        sagemaker_session=session, role=spec.role_arn, base_job_name=spec.job_name,
        training_image=spec.image_uri,
        compute=Compute(
            instance_type=spec.instance_type, instance_count=spec.instance_count,
            volume_size_in_gb=spec.volume_size_gb, volume_kms_key_id=spec.volume_kms_key,
            enable_managed_spot_training=spec.spot or None, training_plan_arn=spec.training_plan_arn,
            keep_alive_period_in_seconds=spec.keep_alive_s,
        ),
        stopping_condition=StoppingCondition(
            max_runtime_in_seconds=spec.max_runtime_s, max_wait_time_in_seconds=spec.max_wait_s,
        ),
        output_data_config=OutputDataConfig(
            s3_output_path=spec.output_s3_uri, kms_key_id=spec.output_kms_key,
            compression_type=spec.output_compression,
        ),
        checkpoint_config=(CheckpointConfig(s3_uri=spec.checkpoint_config_uri, local_path=CHECKPOINT_LOCAL_PATH)
                           if spec.checkpoint_config_uri else None),
        input_data_config=[_input_channel(name, channel) for name, channel in spec.channels.items()],
        environment=dict(spec.environment), hyperparameters=dict(spec.hyperparameters),
        tags=[{"key": k, "value": v} for k, v in spec.tags.items()] or None,
        networking=networking,
    )
    if spec.retry_attempts:
        trainer = trainer.with_retry_strategy(RetryStrategy(maximum_retry_attempts=spec.retry_attempts))
    if spec.tensorboard_s3_uri:  # the shape, not configs.TensorBoardOutputConfig, whose LocalPath the API refuses
        from sagemaker.core.shapes import TensorBoardOutputConfig

        trainer = trainer.with_tensorboard_output_config(TensorBoardOutputConfig(s3_output_path=spec.tensorboard_s3_uri))
    if spec.remote_debug:
        trainer = trainer.with_remote_debug_config(RemoteDebugConfig(enable_remote_debug=True))
    if spec.infra_check:
        trainer = trainer.with_infra_check_config(InfraCheckConfig(enable_infra_check=True))
    metrics = [MetricDefinition(name=m["Name"], regex=m["Regex"]) for m in spec.metric_definitions]
    return trainer.with_metric_definitions(metrics) if metrics else trainer


# The memo: the SDK's request for a local plan, kept per settings (see the module's doc).

#: Below this length a job name may occur inside other settings by chance: no memo.
MEMO_MIN_NAME_CHARS = 12
#: Stands in for the job name (cut to its length): letters only, so a valid job name still.
_MEMO_PLACEHOLDER = "smdistmemojobname" * 4
#: What the SDK's answer depends on besides the settings: its packages, and this package's code.
_MEMO_PACKAGES = ("sagemaker-train", "sagemaker-core", "pydantic")
_MEMO_ENV_PREFIXES = ("SAGEMAKER_", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")


def _config_files() -> list[Path] | None:
    """The SageMaker config files the SDK reads (admin, user, local mode) where platformdirs puts them
    on Linux (the first XDG_CONFIG_DIRS entry, XDG_CONFIG_HOME); None elsewhere (no memo)."""
    if not sys.platform.startswith("linux"):
        return None
    site = (os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep)[0]
    user = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return [Path(site) / "sagemaker" / "config.yaml", Path(user) / "sagemaker" / "config.yaml",
            Path.home() / ".sagemaker" / "config.yaml"]


def _fingerprint(path: Path) -> str:
    """A config path's content (a folder: every file in it), or that it is absent."""
    if path.is_dir():
        return repr(sorted((str(p), p.read_bytes()) for p in path.rglob("*") if p.is_file()))
    return repr(path.read_bytes()) if path.is_file() else "absent"


def _memo_key(spec: RequestSpec) -> tuple[str, str] | None:
    """(memo key, placeholder) for `spec`, or None when its answer is not to be kept."""
    name = spec.job_name
    placeholder = _MEMO_PLACEHOLDER[:len(name)]
    text = repr(spec)
    if (len(name) < MEMO_MIN_NAME_CHARS or placeholder in text
            or any(os.environ.get(f"SAGEMAKER_{w}_CONFIG_OVERRIDE") for w in ("ADMIN", "USER"))):
        return None
    files = _config_files()
    if files is None:
        return None
    try:
        versions = [version(p) for p in _MEMO_PACKAGES]
        configs = [_fingerprint(p) for p in files]
    except (PackageNotFoundError, OSError):  # the SDK itself will say what is missing
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(_MEMO_ENV_PREFIXES))
    own = Path(__file__).read_bytes()  # this file: the trainer built from the settings
    parts = [text.replace(name, placeholder), versions, configs, env, hashlib.sha256(own).hexdigest()]
    return hashlib.sha256(repr(parts).encode()).hexdigest(), placeholder


def _memo_path(key: str) -> Path:
    return cache_dir() / "requests" / f"{key}.json"


def recall_request(spec: RequestSpec) -> dict[str, Any] | None:
    """The SDK's request for these settings when it was kept, with this job's name; else None."""
    found = _memo_key(spec)
    if found is None:
        return None
    key, placeholder = found
    try:
        text = _memo_path(key).read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        request = json.loads(text.replace(placeholder, spec.job_name))
    except ValueError:
        return None
    return request if isinstance(request, dict) else None


def keep_request(spec: RequestSpec, request: dict[str, Any]) -> None:
    """Keep the SDK's `request` for these settings (never fails the plan: a memo is optional)."""
    found = _memo_key(spec)
    if found is None:
        return
    key, placeholder = found
    text = json.dumps(request, sort_keys=False)
    if placeholder in text:  # the SDK wrote the placeholder's letters itself: it would be replaced back
        return
    path = _memo_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text.replace(spec.job_name, placeholder), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        _log.debug("cannot keep the request at %s: %s", path, exc)


def build_request(spec: RequestSpec, session: SageMakerSession | None = None, *, memo: bool = False) -> dict[str, Any]:
    """CreateTrainingJob parameters for `spec`; no AWS call. `memo=True` (local plans): the SDK's
    answer for the same settings is read back from the memo instead of importing the SDK."""
    request = recall_request(spec) if memo and session is None else None
    if request is None:
        try:
            trainer = _trainer(spec, session)
            request = trainer._create_training_job_args(boto3=True)  # the SDK's own serializer
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            raise SdkError(f"the SageMaker SDK rejected the launch settings ({type(exc).__name__}): {exc}") from None
        if memo and session is None:
            keep_request(spec, request)
    request["TrainingJobName"] = spec.job_name  # ModelTrainer appends a timestamp to a base name
    algo = request["AlgorithmSpecification"]
    algo["ContainerEntrypoint"] = list(PID1_COMMAND)
    algo.pop("ContainerArguments", None)
    if spec.mlflow:
        request["MlflowConfig"] = dict(spec.mlflow)
    validate_request(request)
    return request


def validate_request(request: Mapping[str, Any]) -> None:
    """botocore's own parameter validation for CreateTrainingJob (types, required, min/max)."""
    from botocore.validate import ParamValidator

    shape = sagemaker_service_model().operation_model("CreateTrainingJob").input_shape
    if shape is None:
        raise LaunchError("botocore's SageMaker model has no CreateTrainingJob input (reinstall botocore)")
    report = ParamValidator().validate(dict(request), shape)
    if report.has_errors():
        raise LaunchError(f"the built CreateTrainingJob request is invalid (a bug in sm_dist): {report.generate_report()}")


def _input_channel(name: str, channel: Channel) -> SdkChannel:
    """One InputDataConfig entry (docs/PLATFORM.md §1.9): an S3 prefix, or a file system mounted read-only."""
    from sagemaker.core.shapes import Channel as SdkChannel
    from sagemaker.core.shapes import DataSource, FileSystemDataSource, S3DataSource

    if channel.kind is SourceKind.S3:
        # a folder, as local mode reads it (channels.s3_prefix): S3Prefix takes every key starting with S3Uri
        source = DataSource(s3_data_source=S3DataSource(s3_data_type="S3Prefix", s3_uri=channel.s3_uri,
                                                        s3_data_distribution_type=channel.distribution.value))
    elif channel.kind in (SourceKind.FSX_LUSTRE, SourceKind.EFS):
        fs_id, path = channel.file_system
        source = DataSource(file_system_data_source=FileSystemDataSource(
            file_system_id=fs_id, file_system_access_mode="ro", directory_path=path,
            file_system_type="FSxLustre" if channel.kind is SourceKind.FSX_LUSTRE else "EFS"))
    else:  # the plan turns a local folder into the prefix it uploads it to
        raise LaunchError(f"channel {name}: {channel.source} is a local folder; the plan must give its S3 prefix")
    return SdkChannel(channel_name=name, data_source=source, input_mode=channel.mode.value)


def channel_sources(code_s3_uri: str, inputs: Mapping[str, Channel]) -> dict[str, Channel]:
    """Input channels in request order: the code bundle first (File, replicated), then the user's data."""
    return {CODE_CHANNEL: Channel(source=code_s3_uri), **dict(inputs)}


def s3_join(base: str, *parts: str) -> str:
    """`s3://bucket/prefix` joined with `parts`, single slashes."""
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts if p)])


__all__ = ["PID1_COMMAND", "UNCOMPRESSED_FROM_BYTES", "Compute", "Data", "Networking", "Observability", "RequestSpec", "compression_type", "build_request", "validate_request", "default_image",
           "choose_image", "job_image", "channel_sources", "s3_join", "MEMO_MIN_NAME_CHARS", "recall_request", "keep_request"]
