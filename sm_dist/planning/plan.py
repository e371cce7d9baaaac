"""Plan a job: a pure step from a LaunchConfig to a frozen `Plan`, creating nothing.

The plan holds the exact CreateTrainingJob request, the code bundle's manifest, the job spec,
the cost limits and estimate, and every warning. `fit` submits exactly this request; a dry run
prints it. Making a plan reads local files and, only for what was not given explicitly (role,
infra stack outputs), makes read-only AWS calls — never an upload or a create.

A local plan (`local=True`, for `sm_dist.local.run`) makes no AWS call at all: what it does not
need is filled here, once, with labels (`LOCAL_DEFAULTS`, `locations.local_locations`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sm_dist.catalog.hardware import hardware
from sm_dist.contract.chain import DEFAULT_MAX_LINKS, ChainPolicy, RunState, check_run_name, link_name
from sm_dist.contract.checkpoint import DEFAULT_KEEP, CheckpointSettings, parse_mode
from sm_dist.contract.torch_support import parse
from sm_dist.errors import ConfigError
from sm_dist.estimator.cost import infra_check_on
from sm_dist.jobspec import JobSpec
from sm_dist.metric_format import metric_definitions
from sm_dist.planning import bundle as bundle_mod
from sm_dist.planning import fallbacks, preflight, wheels
from sm_dist.planning import request as request_mod
from sm_dist.planning.budget import Limits, chain_policy, stopping_limits
from sm_dist.planning.channels import Channel, DataUpload, channel_warnings, plan_uploads
from sm_dist.planning.config import LaunchConfig
from sm_dist.planning.constraints import check_image_pull, check_mlflow_region, check_request
from sm_dist.planning.locations import LOCAL_BUCKET, local_locations, resolve_locations
from sm_dist.planning.profile import profile_error, without_missing_profile
from sm_dist.planning.reach import check_reach
from sm_dist.planning.report import render_plan
from sm_dist.planning.sizing import Sizing, choose_strategy
from sm_dist.planning.tags import chain_tags, sm_dist_tags
from sm_dist.planning.warm_pool import PoolReuse
from sm_dist.vocab import Strategy

if TYPE_CHECKING:
    from boto3.session import Session
    from IPython.lib.pretty import RepresentationPrinter

    from sm_dist.catalog import Instance

#: Where local channels are uploaded, under the job's output location: one prefix per content, shared by jobs.
DATA_PREFIX = "sm-dist-data"
#: Variables the job always gets: the code channel on PYTHONPATH, unbuffered logs.
BASE_ENVIRONMENT = {"PYTHONPATH": request_mod.CODE_DIR, "PYTHONUNBUFFERED": "1"}
#: What a local plan needs and its user need not give: labels, never sent to AWS (the region's
#: catalog prices price the run; "on SageMaker $x" is for this instance type). The role label
#: and the output bucket come from `locations.local_locations`.
LOCAL_DEFAULTS: Mapping[str, str] = MappingProxyType({"region": "us-east-1", "instance_type": "ml.g5.xlarge"})


@dataclass(frozen=True, repr=False)
class Plan:
    """Everything `fit` will do, as a value. Build it with `sm_dist.plan(...)`."""

    job_name: str
    region: str
    request_json: str
    """The CreateTrainingJob parameters (JSON; see `request`)."""
    job_spec: JobSpec
    bundle: bundle_mod.Bundle
    code_s3_uri: str
    role_arn: str
    instance_type: str
    instance_count: int
    checkpoint_uri: str | None
    checkpoint_local_path: str
    limits: Limits
    sizing: Sizing
    default_bucket: str | None
    """The SDK default bucket fit creates if missing (None: an explicit or infra bucket)."""
    container_command: tuple[str, ...] = request_mod.PID1_COMMAND
    environment: Mapping[str, str] = field(default_factory=dict)
    hyperparameters: Mapping[str, str] = field(default_factory=dict)
    channels: Mapping[str, Channel] = field(default_factory=dict)
    """Data channels as the user gave them (a local folder stays a folder), without the code channel."""
    uploads: tuple[DataUpload, ...] = ()
    """Local channels the cloud backend uploads before CreateTrainingJob (to the prefixes the request names)."""
    warnings: tuple[str, ...] = ()
    local: bool = False
    """A plan for local mode: region, role and S3 URIs only label the request."""
    run: str | None = None
    """A chain's run name (`chain=True`): `job_name` is its first link, `<run>-1` (contract.chain)."""
    chain: ChainPolicy | None = None
    """A chain's policy: links, each link's MaxRuntime cap, the run's budget."""
    warm_pool: PoolReuse | None = None
    """The last warm pool of this base job name and whether this job starts on it (set by the cloud
    backend's read-only checks when keep_alive_s is set; planning.warm_pool)."""

    @property
    def request(self) -> dict[str, Any]:
        """A fresh copy of the CreateTrainingJob parameters."""
        request: dict[str, Any] = json.loads(self.request_json)
        return request

    @property
    def tensorboard_uri(self) -> str | None:
        """TensorBoardOutputConfig.S3OutputPath (None: tensorboard off): `tensorboard --logdir` it."""
        config = self.request.get("TensorBoardOutputConfig") or {}
        return str(config["S3OutputPath"]) if config.get("S3OutputPath") else None

    @property
    def strategy(self) -> Strategy:
        return self.job_spec.strategy

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what `sm-dist fit --dry-run --json` prints)."""
        return {
            "job_name": self.job_name, "region": self.region, "request": self.request,
            "container_command": list(self.container_command), "environment": dict(self.environment),
            "job_spec": self.job_spec.to_dict(), "code_s3_uri": self.code_s3_uri,
            "bundle": {"files": self.bundle.manifest(), "total_bytes": self.bundle.total_bytes},
            "cost": {**self.limits.to_dict(), "estimate": None if self.sizing.row is None else self.sizing.row.to_dict(),
                     "strategy_reason": self.sizing.reason},
            "channels": {name: c.to_dict() for name, c in self.channels.items()},
            "uploads": [u.to_dict() for u in self.uploads],
            "default_bucket": self.default_bucket, "warnings": list(self.warnings), "local": self.local,
            "chain": None if self.chain is None else {"run": self.run, **dataclasses.asdict(self.chain)},
            "warm_pool": None if self.warm_pool is None else self.warm_pool.to_dict(),
        }

    def __str__(self) -> str:
        return render_plan(self)

    def __repr__(self) -> str:
        return (f"Plan({self.job_name!r}, {self.instance_count} × {self.instance_type}, "
                f"strategy={self.strategy.value!r}, {len(self.bundle.files)} files, {len(self.warnings)} warnings)")

    def _repr_pretty_(self, printer: RepresentationPrinter, cycle: bool) -> None:
        """IPython/Jupyter: show the rendered plan, not the field dump."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        """Jupyter: the rendered plan as a table, the exact request one click away."""
        from sm_dist.notebook.markup import details, text_table

        return text_table(str(self), title=False,
                          extra=details("CreateTrainingJob request", json.dumps(self.request, indent=2)))


def new_job_name(base: str, now: float | None = None) -> str:
    """<base>-YYYYmmdd-HHMMSS-mmm (≤63 chars, unique per millisecond)."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    return f"{base}-{stamp}"


def _region(config: LaunchConfig, session_factory: Callable[[], Session]) -> str:
    region = config.region or session_factory().region_name
    if not region:
        raise ConfigError("region", None, "pass region='us-east-1' (--region) or set AWS_REGION")
    return region


def _checkpointing(config: LaunchConfig, infra_base: str | None, job_name: str,
                   default_base: str | None) -> tuple[CheckpointSettings, list[str]]:
    """The job's checkpoint settings, built from the LaunchConfig here only (checkpoint_keep=None: DEFAULT_KEEP). A multi-instance job without a URI (none given, no infra
    stack) checkpoints under `default_base` (the job's output location): every host's shards
    must meet in one place for a restart to resume."""
    uri = config.checkpoint_s3_uri or (request_mod.s3_join(infra_base, job_name) if infra_base else None)
    warnings = []
    # (spot without a URI is refused below with the fix, on one instance or many, as documented)
    if uri is None and default_base and config.instance_count > 1 and config.checkpoint_mode == "auto" and not config.spot:
        uri = request_mod.s3_join(default_base, job_name, "checkpoints")
        warnings.append(f"no checkpoint_s3_uri: a job on {config.instance_count} instances checkpoints to {uri} "
                        "(pass checkpoint_s3_uri= to choose, or checkpoint_mode='off')")
    # Without default_base (a local plan, a bundle) hosts' folders are not refused: local mode
    # syncs each emulated host's folder to its own S3 endpoint, so they do resume there.
    mode, mode_warnings = preflight.check_checkpointing(
        config.spot, config.checkpoint_mode, uri, instance_count=config.instance_count if default_base else 1,
        network_isolation=config.network_isolation, vpc=bool(config.subnets), own_script=_own_script(config))
    return CheckpointSettings(
        mode=parse_mode(mode), uri=uri if mode != "off" else None,
        local_path=request_mod.CHECKPOINT_LOCAL_PATH if mode in ("local", "sagemaker-sync") else None,
        interval_steps=config.checkpoint_interval_steps, async_save=config.async_checkpoint,
        keep=DEFAULT_KEEP if config.checkpoint_keep is None else config.checkpoint_keep,
    ), warnings + mode_warnings


_IMPORTS_SM_DIST = re.compile(rb"^\s*(?:from|import)\s+sm_dist\b", re.MULTILINE)


def _own_script(config: LaunchConfig) -> bool:
    """A script that checkpoints by itself: from the user's source dir and never importing sm_dist
    (a function entry, sm_dist's entrypoints and scripts using sm_dist's checkpointer write to S3
    directly)."""
    if config.entry_is_function:
        return False
    resolved = bundle_mod.resolve_entry(config.entry, _source(config), False)
    if resolved.startswith(bundle_mod.ENTRYPOINTS_IN_BUNDLE + "/"):
        return False
    try:
        return _IMPORTS_SM_DIST.search((_source(config) / resolved).read_bytes()) is None
    except OSError:
        return True


@dataclass(frozen=True)
class CodePlan:
    """The part of a plan that needs no AWS: strategy, job spec, bundle."""

    sizing: Sizing
    spec: JobSpec
    bundle: bundle_mod.Bundle
    instance: Instance | None
    warnings: tuple[str, ...]


def plan_code(config: LaunchConfig, region: str, job_name: str, checkpoint_base: str | None = None,
              default_checkpoint_base: str | None = None, checkpoint_name: str | None = None) -> CodePlan:
    """Check the config (catalog, estimator, hyperparameters) and list the bundle. No AWS call.

    `checkpoint_base`: the infra stack's checkpoint prefix; `default_checkpoint_base`: where a
    multi-instance job without one checkpoints (the output location; None: not planned here);
    `checkpoint_name`: the folder under either (default: the job's name; a chain's: the run's)."""
    inst = preflight.check_instance(config.instance_type, region)
    warnings = [] if inst else [f"{config.instance_type} is not in sm_dist's catalog: no price, no memory check"]
    sizing = choose_strategy(config, region) if inst else _unchecked(config)
    warnings += preflight.check_topology(sizing.strategy, config.instance_count, config.nproc_per_node)
    preflight.check_hyperparameters(config.hyperparameters)
    preflight.check_environment(config.environment, len(BASE_ENVIRONMENT) + config.network_isolation)
    for arg in config.args:
        preflight.check_exec_text("args", arg)
    checkpoint, ckpt_warnings = _checkpointing(config, checkpoint_base, checkpoint_name or job_name,
                                               default_checkpoint_base)
    spec = JobSpec(
        entry=bundle_mod.resolve_entry(config.entry, _source(config), config.entry_is_function),
        strategy=sizing.strategy, precision=config.precision, seed=config.seed,
        nproc_per_node=1 if sizing.strategy is Strategy.DP else config.nproc_per_node,
        max_restarts=config.max_restarts, hang_timeout_s=config.hang_timeout_s, checkpoint=checkpoint, job_name=job_name,
        hyperparameters=dict(config.hyperparameters), args=tuple(config.args),
    )
    bundle = bundle_mod.collect_bundle(config.source_dir, spec.to_json(), config.ignore_patterns)
    platform = wheels.image_platform(config, region) if bundle.requirements is not None or bundle.wheels else None
    if bundle.requirements is not None and not bundle.wheels and config.network_isolation:
        raise ConfigError("network_isolation", True, "the container cannot pip-install requirements.txt without "
                          f"network; vendor the wheels into source_dir: {wheels.download_command(platform)}")
    wheels.check_wheels(bundle, platform)
    warnings += preflight.check_isolated_restarts(config.network_isolation, config.instance_count,
                                                  config.max_restarts, checkpoint.mode)
    if inst and inst.region != region:
        warnings.append(f"prices are {inst.region}'s ({inst.price_date}); {region} may differ")
    return CodePlan(sizing, spec, bundle, inst, (*warnings, *sizing.warnings, *ckpt_warnings, *bundle.warnings))


def launch_config(entry: str, settings: Mapping[str, Any], *, local: bool = False) -> LaunchConfig:
    """The LaunchConfig of `sm_dist.plan(entry, **settings)`; a local one gets `LOCAL_DEFAULTS`."""
    data = dict(settings)
    if local:
        data.setdefault("instance_type", LOCAL_DEFAULTS["instance_type"])
    if "instance_type" not in data:
        raise ConfigError("instance_type", None, "name the SageMaker instance type, e.g. instance_type='ml.g5.xlarge' "
                          "(--instance-type)")
    return LaunchConfig.from_mapping({"entry": entry, **data})


def make_plan(config: LaunchConfig, session: Session | None = None, *, local: bool = False) -> Plan:
    """Check `config` and build the plan. `session`: a boto3 Session, created only if needed.

    `local=True`: the plan `sm_dist.local.run` takes; no AWS call, no AWS setting needed.
    """
    if local:
        config = dataclasses.replace(config, region=config.region or LOCAL_DEFAULTS["region"])
    session_factory = _session_factory(config, session)
    region = _region(config, session_factory)
    # the checks that need nothing from AWS run before any lookup (plan_code repeats them)
    preflight.check_instance(config.instance_type, region)
    preflight.check_hyperparameters(config.hyperparameters)
    preflight.check_environment(config.environment, len(BASE_ENVIRONMENT) + config.network_isolation)
    preflight.check_channel_count(config.inputs)
    image_uri, image_torch, image_notes = _image(config, region)
    job_name = config.job_name or new_job_name(config.base_job_name)
    run = _run_name(config, job_name)
    job_name = link_name(run, 1) if run else job_name
    where = local_locations(config) if local else resolve_locations(config, session_factory, region)
    pull_warnings = (check_image_pull(image_uri, where.image_repository_arns, where.infra_stack)
                     if where.infra_stack else [])
    code = plan_code(config, region, job_name, where.checkpoint_base, None if local else where.output_s3_uri, run)
    usd_per_hour = code.instance.sagemaker_usd_per_hour * config.instance_count if code.instance else None
    limits, limit_warnings = stopping_limits(config, usd_per_hour, code.sizing.expected_hours)
    fallback_prices = fallbacks.check_fallbacks(config, region, code.sizing.strategy, code.sizing.row is not None)
    policy = chain_policy(config, usd_per_hour, fallbacks.types_text(config.instance_type, fallback_prices)) if run else None
    if run and not local and code.spec.checkpoint.uri is None:
        raise ConfigError("checkpoint_s3_uri", None, "each job of a chain resumes from the checkpoints at a URI: pass "
                          "checkpoint_s3_uri= (--checkpoint-s3-uri) or infra_stack=")
    code_uri = request_mod.s3_join(where.output_s3_uri, job_name, "input", request_mod.CODE_CHANNEL) + "/"
    mlflow = config.mlflow.named(config.base_job_name, run or job_name) if config.mlflow else None
    mlflow_env = {k: v for k, v in (mlflow.environment() if mlflow else {}).items() if k not in config.environment}
    preflight.check_environment(config.environment, len(BASE_ENVIRONMENT) + config.network_isolation + len(mlflow_env))
    environment = {**BASE_ENVIRONMENT, **mlflow_env, **config.environment,
                   **preflight.isolation_environment(config.network_isolation)}
    channels, uploads = plan_uploads(config.inputs, request_mod.s3_join(where.output_s3_uri, DATA_PREFIX))
    box = hardware(config.instance_type)
    data_warnings = channel_warnings(config.inputs, uploads, config.instance_count, config.volume_size_gb,
                                     box.local_nvme if box is not None else False)
    settings = _request_spec(config, code, job_name, where.role_arn, image_uri, limits, code_uri, environment,
                             where.output_s3_uri, channels,
                             chain_tags(run, 1, policy, RunState()) if run and policy else {},
                             tensorboard_uri(where.output_s3_uri, run or job_name) if config.tensorboard else None,
                             mlflow.request() if mlflow else None)
    with without_missing_profile():
        request = request_mod.build_request(settings, memo=local)
    request, request_warnings = check_request(request, hardware(config.instance_type))
    if not local:  # a local plan's region is a label; its MLflow is a file store (sm_dist.local)
        check_mlflow_region(request, region)
    if config.fallback_instance_types:  # on demand: InstancePreferences (planning.fallbacks)
        request = fallbacks.with_preferences(request, config.fallback_instance_types)
        request_mod.validate_request(request)
    reach_warnings = check_reach(request, where.reach, where.infra_stack) if where.reach and where.infra_stack else []
    return Plan(
        job_name=job_name, region=region, request_json=json.dumps(request), job_spec=code.spec, bundle=code.bundle,
        code_s3_uri=code_uri, role_arn=where.role_arn, instance_type=config.instance_type,
        instance_count=config.instance_count, checkpoint_uri=code.spec.checkpoint.uri,
        checkpoint_local_path=request_mod.CHECKPOINT_LOCAL_PATH, limits=limits, sizing=code.sizing,
        default_bucket=where.default_bucket, environment=MappingProxyType(environment),
        hyperparameters=MappingProxyType(dict(code.spec.hyperparameters)), channels=MappingProxyType(dict(config.inputs)),
        uploads=uploads,
        warnings=_warnings([*image_notes, *pull_warnings, *code.warnings, *limit_warnings, *request_warnings,
                            *reach_warnings, *data_warnings,
                            *_local_torch(image_torch, local)], local),
        local=local, run=run, chain=policy,
    )


def _run_name(config: LaunchConfig, job_name: str) -> str | None:
    """A chain's run name (its links `<run>-1` ...), checked against TrainingJobName's rule; None without chain."""
    if not config.chain:
        return None
    try:
        return check_run_name(job_name, config.max_links or DEFAULT_MAX_LINKS)
    except ValueError as exc:
        raise ConfigError("job_name", job_name, str(exc)) from None


def _image(config: LaunchConfig, region: str) -> tuple[str, str | None, list[str]]:
    """The training image's URI, its torch version (None for image_uri=), and a note when the
    image that runs on the instance is not the default (docs/PLATFORM.md §7)."""
    if config.image_uri:
        return config.image_uri, None, []
    image, note = request_mod.choose_image(region, config.torch_version, config.py_version, config.instance_type)
    return image.uri, image.torch_version, [note] if note else []


def _local_torch(image_torch: str | None, local: bool) -> list[str]:
    """A local run on another torch than the job's image proves less: say so."""
    if not local or image_torch is None:
        return []
    try:
        here = version("torch")
    except PackageNotFoundError:
        return []
    if parse(here) == parse(image_torch):
        return []
    return [f"this machine has torch {here}; the job's image has torch {image_torch}: a local run does not test "
            f"that version (pass torch_version='{'.'.join(map(str, parse(here) or ()))}' to match, if the image table has it)"]


def _warnings(warnings: list[str], local: bool) -> tuple[str, ...]:
    """Each warning once; a local plan's checkpoints go to local mode's own S3 endpoint, not lost."""
    if local:
        warnings = [w.replace(preflight.NO_CHECKPOINT_URI, "no checkpoint_s3_uri: local mode syncs checkpoints to "
                              f"its own S3 endpoint (s3://{LOCAL_BUCKET}/<job>/run/checkpoints)") for w in warnings]
    return tuple(dict.fromkeys(warnings))


def _session_factory(config: LaunchConfig, session: Session | None) -> Callable[[], Session]:
    """A function giving `session`, or a boto3 Session made on first call (never for a local plan)."""
    holder: list[Session | None] = [session]

    def session_factory() -> Session:
        made = holder[0]
        if made is None:
            from botocore.exceptions import ProfileNotFound

            try:
                if config.region:
                    import boto3

                    made = boto3.Session(region_name=config.region)
                else:  # follows AWS_REGION like the AWS CLI v2 (botocore alone reads AWS_DEFAULT_REGION)
                    from sm_dist.provision.aws import session_or_default

                    made = session_or_default()
            except ProfileNotFound:
                raise profile_error() from None
            holder[0] = made
        return made

    return session_factory


def _unchecked(config: LaunchConfig) -> Sizing:
    if config.strategy == "auto":
        raise ConfigError("strategy", "auto", f"{config.instance_type} is not in sm_dist's catalog; name a strategy")
    return Sizing(Strategy(config.strategy), None, "as given")


def _source(config: LaunchConfig) -> Path:
    return Path(config.source_dir).resolve()


def _request_spec(config: LaunchConfig, code: CodePlan, job_name: str, role_arn: str, image_uri: str, limits: Limits,
                  code_uri: str, environment: dict[str, str], output_uri: str,
                  channels: Mapping[str, Channel], chain: Mapping[str, str],
                  tensorboard: str | None = None,
                  mlflow: Mapping[str, str] | None = None) -> request_mod.RequestSpec:
    """What request.build_request turns into a ModelTrainer (`chain`: a link's tags, or none;
    `tensorboard`: TensorBoardOutputConfig.S3OutputPath, or none)."""
    spec = code.spec
    ckpt = spec.checkpoint
    ours = sm_dist_tags(spec.strategy.value, code.sizing.expected_usd(config.spot), limits.max_cost_usd, ckpt.uri,
                        tokens=config.tokens, flops_params=code.sizing.flops_params) | dict(chain)
    preflight.check_tags(config.tags, len(ours.keys() - config.tags.keys()))
    return request_mod.RequestSpec(
        job_name=job_name, role_arn=role_arn, instance_type=config.instance_type,
        instance_count=config.instance_count, volume_size_gb=config.volume_size_gb,
        volume_kms_key=config.volume_kms_key, spot=config.spot, training_plan_arn=config.training_plan_arn,
        keep_alive_s=config.keep_alive_s, image_uri=image_uri,
        max_runtime_s=limits.max_runtime_s, max_wait_s=limits.max_wait_s,
        output_s3_uri=output_uri, output_kms_key=config.output_kms_key,
        output_compression=request_mod.compression_type(config.output_compression, code.sizing.params,
                                                        config.precision),
        checkpoint_config_uri=ckpt.uri if ckpt.mode == "sagemaker-sync" else None,
        channels=request_mod.channel_sources(code_uri, channels), environment=environment,
        hyperparameters=spec.hyperparameters, tags={**ours, **config.tags},
        subnets=tuple(config.subnets), security_group_ids=tuple(config.security_group_ids),
        network_isolation=config.network_isolation,
        encrypt_inter_container_traffic=config.encrypt_inter_container_traffic,
        retry_attempts=config.retry_attempts or 0, metric_definitions=tuple(metric_definitions(config.metrics)),
        tensorboard_s3_uri=tensorboard,
        remote_debug=config.remote_debug,
        infra_check=infra_check_on(config.infra_check, config.instance_type, config.instance_count),
        mlflow=mlflow,
    )


def tensorboard_uri(output_s3_uri: str, name: str) -> str:
    """Where SageMaker syncs a job's TensorBoard folder: `<output>/<job>/tensorboard` (a chain's jobs
    share the run's, `<output>/<run>/tensorboard`, so one TensorBoard shows the whole run)."""
    return request_mod.s3_join(output_s3_uri, name, "tensorboard")


__all__ = ["BASE_ENVIRONMENT", "LOCAL_DEFAULTS", "CodePlan", "Plan", "launch_config", "make_plan", "new_job_name",
           "plan_code", "tensorboard_uri"]
