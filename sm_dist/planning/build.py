"""Build the frozen `Plan` from a LaunchConfig (`make_plan`), creating nothing.

The checks that need nothing from AWS run first; then the image, the job's name (a chain's run),
the locations (role, S3, an infra stack's outputs: read-only AWS calls, only for what was not
given; none for a local plan), the code part (`sm_dist.planning.code_plan`), the limits, the
channels, the CreateTrainingJob request and the checks on it, and every warning, once.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sm_dist.contract.chain import DEFAULT_MAX_LINKS, TAG_CHECKPOINT, RunState, check_run_name, link_name
from sm_dist.contract.container import CHECKPOINT_LOCAL_PATH, CODE_CHANNEL
from sm_dist.contract.torch_support import parse
from sm_dist.errors import ConfigError
from sm_dist.estimator.cost import infra_check_on
from sm_dist.planning import fallbacks, preflight
from sm_dist.planning import request as request_mod
from sm_dist.planning.budget import Limits, chain_policy, stopping_limits
from sm_dist.planning.bundle import resolve_entry
from sm_dist.planning.channel_data import channel_warnings, plan_uploads
from sm_dist.planning.channels import Channel
from sm_dist.planning.code_plan import BASE_ENVIRONMENT, CodePlan, plan_code
from sm_dist.planning.config import LaunchConfig
from sm_dist.planning.constraints import check_image_pull, check_mlflow_region, check_request
from sm_dist.planning.locations import LOCAL_BUCKET, local_locations, resolve_locations
from sm_dist.planning.plan import LOCAL_DEFAULTS, Plan, tensorboard_uri
from sm_dist.planning.profile import profile_error, without_missing_profile
from sm_dist.planning.reach import check_reach
from sm_dist.planning.settings import flatten
from sm_dist.planning.tags import chain_tags, sm_dist_tags

if TYPE_CHECKING:
    from boto3.session import Session

#: Where local channels are uploaded, under the job's output location: one prefix per content, shared by jobs.
DATA_PREFIX = "sm-dist-data"


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


def launch_config(entry: str, settings: Mapping[str, Any], *, local: bool = False) -> LaunchConfig:
    """The LaunchConfig of `sm_dist.plan(entry, **settings)` (sections flattened); a local one gets `LOCAL_DEFAULTS`."""
    data = flatten(settings)
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
    # the script first: a missing one is refused before any AWS lookup (region, role: seconds); plan_code takes it
    entry = resolve_entry(config.entry, Path(config.source_dir).resolve(), config.entry_is_function)
    session_factory = _session_factory(config, session)
    region = _region(config, session_factory)
    # the checks that need nothing from AWS run before any lookup, once (plan_code trusts them); the instance
    # type's hardware and catalog row are looked up here once, and handed on
    box, instance = preflight.check_instance(config.instance_type, region)
    job_name = config.job_name or new_job_name(config.base_job_name)
    run = _run_name(config, job_name)
    job_name = link_name(run, 1) if run else job_name
    # the job's MLflow variables count against the environment's limit beside the user's
    mlflow = config.mlflow.named(config.base_job_name, run or job_name) if config.mlflow else None
    mlflow_env = {k: v for k, v in (mlflow.environment() if mlflow else {}).items() if k not in config.environment}
    preflight.check_texts(config.hyperparameters, config.environment,
                          len(BASE_ENVIRONMENT) + config.network_isolation + len(mlflow_env), config.args)
    image, image_note = request_mod.job_image(config, region, box)
    image_uri = image.uri if image is not None else str(config.image_uri)
    where = local_locations(config) if local else resolve_locations(config, session_factory, region)
    pull_warnings = (check_image_pull(image_uri, where.image_repository_arns, where.infra_stack)
                     if where.infra_stack else [])
    code = plan_code(config, region, job_name, entry, instance, image, where.checkpoint_base,
                     None if local else where.output_s3_uri, run)
    usd_per_hour = code.instance.sagemaker_usd_per_hour * config.instance_count if code.instance else None
    limits, limit_warnings = stopping_limits(config, usd_per_hour, code.sizing.expected_hours)
    types = fallbacks.check_fallbacks(config, region, code.sizing.strategy, code.sizing.row is not None)
    policy = chain_policy(config, usd_per_hour, types) if run else None
    if run and not local and code.spec.checkpoint.uri is None:
        raise ConfigError("checkpoint_s3_uri", None, "each job of a chain resumes from the checkpoints at a URI: pass "
                          "checkpoint_s3_uri= (--checkpoint-s3-uri) or infra_stack=")
    code_uri = request_mod.s3_join(where.output_s3_uri, job_name, "input", CODE_CHANNEL) + "/"
    environment = {**BASE_ENVIRONMENT, **mlflow_env, **config.environment,
                   **preflight.isolation_environment(config.network_isolation)}
    channels, uploads = plan_uploads(config.inputs, request_mod.s3_join(where.output_s3_uri, DATA_PREFIX))
    data_warnings = channel_warnings(config.inputs, uploads, config.instance_count, config.volume_size_gb,
                                     box.local_nvme if box is not None else False)
    settings = _request_spec(config, code, job_name, where.role_arn, image_uri, limits, code_uri, environment,
                             where.output_s3_uri, channels,
                             chain_tags(run, 1, policy, RunState()) if run and policy else {},
                             tensorboard_uri(where.output_s3_uri, run or job_name) if config.tensorboard else None,
                             mlflow.request() if mlflow else None)
    with without_missing_profile():
        request = request_mod.build_request(settings, memo=local)
    request, request_warnings = check_request(request, box)
    if run and not local and not any(t["Key"] == TAG_CHECKPOINT for t in request.get("Tags") or ()):
        raise ConfigError("checkpoint_s3_uri", code.spec.checkpoint.uri, "a chain's supervisor finds each job's "
                          f"checkpoints by its tag {TAG_CHECKPOINT}, and this URI is not a tag value: use at most 256 "
                          "letters, digits, spaces and _ . : / = + - @ (docs/PLATFORM.md §1.17)")
    if not local:  # a local plan's region is a label; its MLflow is a file store (sm_dist.local)
        check_mlflow_region(request, region)
    if config.fallback_instance_types:  # on demand: InstancePreferences (planning.fallbacks)
        request = fallbacks.with_preferences(request, config.fallback_instance_types)
        request_mod.validate_request(request)
    written = code.spec.checkpoint.uri if str(code.spec.checkpoint.mode) not in ("off", "local") else None
    reach_warnings = (check_reach(request, where.reach, where.infra_stack, written if written and
                                  written.startswith("s3://") else None)
                      if where.reach and where.infra_stack else [])
    return Plan(
        job_name=job_name, region=region, request_json=json.dumps(request), job_spec=code.spec, bundle=code.bundle,
        code_s3_uri=code_uri, role_arn=where.role_arn, instance_type=config.instance_type,
        instance_count=config.instance_count, checkpoint_uri=code.spec.checkpoint.uri,
        checkpoint_local_path=CHECKPOINT_LOCAL_PATH, limits=limits, sizing=code.sizing,
        default_bucket=where.default_bucket, environment=MappingProxyType(environment),
        hyperparameters=MappingProxyType(dict(code.spec.hyperparameters)), channels=MappingProxyType(dict(config.inputs)),
        uploads=uploads,
        warnings=_warnings([*([image_note] if image_note else []), *pull_warnings, *code.warnings, *limit_warnings, *request_warnings,
                            *reach_warnings, *data_warnings, *_local_stack(config, local),
                            *_local_torch(image.torch_version if image is not None else None, local)], local),
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


def _local_stack(config: LaunchConfig, local: bool) -> list[str]:
    """A local plan reads no infra stack: say so, rather than leave --infra-stack silently unused."""
    if not local or config.infra_stack is None:
        return []
    return [f"infra_stack={config.infra_stack!r} is not read by a local run: its role, buckets and reach are the "
            "cloud job's (this plan's role and S3 URIs are labels); the same settings without --local use it"]


#: A local plan's warning in place of preflight.NO_CHECKPOINT_URI (the Slurm backend drops it: its line says where).
LOCAL_NO_CHECKPOINT_URI = ("no checkpoint_s3_uri: local mode syncs checkpoints to its own S3 endpoint "
                           f"(s3://{LOCAL_BUCKET}/<job>/run/checkpoints)")


def _warnings(warnings: list[str], local: bool) -> tuple[str, ...]:
    """Each warning once; a local plan's checkpoints go to local mode's own S3 endpoint, not lost."""
    if local:
        warnings = [w.replace(preflight.NO_CHECKPOINT_URI, LOCAL_NO_CHECKPOINT_URI) for w in warnings]
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
        retry_attempts=config.retry_attempts or 0, metric_definitions=tuple(request_mod.metric_definitions(config.metrics)),
        tensorboard_s3_uri=tensorboard,
        remote_debug=config.remote_debug,
        infra_check=infra_check_on(config.infra_check, config.instance_type, config.instance_count),
        mlflow=mlflow,
    )


__all__ = ["DATA_PREFIX", "LOCAL_NO_CHECKPOINT_URI", "launch_config", "make_plan", "new_job_name"]
