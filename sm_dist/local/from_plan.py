"""Turn a launch `Plan` into what local mode runs: the code bundle on disk and a LocalJobConfig.

The bundle is the one `fit` would upload (the plan's `Bundle`, written by `launch.bundle`).
One local-mode rule changes it: when the plan has no checkpoint URI (mode "local" or "auto"
without a bucket), local mode gives the job a CheckpointConfig of its own on the local S3
endpoint and switches the job spec to "sagemaker-sync", so checkpoints outlive the emulated
instances and a restart resumes — the default works with nothing but the project installed.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sm_dist.contract.checkpoint import CheckpointMode
from sm_dist.errors import ConfigError
from sm_dist.jobspec import JOB_SPEC_FILENAME, JobSpec
from sm_dist.local.config import LocalChannel, LocalJobConfig
from sm_dist.planning.channels import SourceKind, channel_keys, s3_prefix
from sm_dist.planning.locations import LOCAL_BUCKET

if TYPE_CHECKING:
    from sm_dist.planning.plan import Plan


def default_checkpoint_uri(job_name: str, label: str) -> str:
    """s3://sm-dist-local/<job>/<label>/checkpoints on the local endpoint."""
    return f"s3://{LOCAL_BUCKET}/{job_name}/{label}/checkpoints"


def sync_uri(plan: Plan, override: str | None, label: str) -> str | None:
    """The URI the emulated CheckpointConfig syncs with (None: no platform sync).

    mode "s3": the runtime writes to S3 itself and the cloud job has no CheckpointConfig, so
    there is nothing to sync; "off": nothing either. Otherwise the plan's URI, the caller's
    override, or a fresh prefix on the local endpoint.
    """
    mode = plan.job_spec.checkpoint.mode
    if mode in ("s3", "off"):
        if override is not None:
            raise ConfigError("checkpoint_uri", override, f'checkpoint mode "{mode}" has no CheckpointConfig to emulate')
        return None
    return override or plan.checkpoint_uri or default_checkpoint_uri(plan.job_name, label)


def runtime_s3_uri(plan: Plan, label: str) -> str | None:
    """The URI a mode-"s3" runtime writes to: the plan's, or a sibling for the verify run."""
    uri = plan.job_spec.checkpoint.uri
    if plan.job_spec.checkpoint.mode != "s3" or uri is None or label == "run":
        return uri
    return f"{uri.rstrip('/')}-{label}"


def local_spec(plan: Plan, uri: str | None, label: str) -> JobSpec:
    """The job spec as the local job runs it (sagemaker-sync when local mode supplies the URI)."""
    spec = plan.job_spec
    ckpt = spec.checkpoint
    if ckpt.mode == "s3":
        return dataclasses.replace(spec, checkpoint=dataclasses.replace(ckpt, uri=runtime_s3_uri(plan, label)))
    if uri is None:
        return spec
    # local_path=None: the runtime takes the folder from checkpointconfig.json (CheckpointConfig.
    # LocalPath, remapped under SM_DIST_OPT_ML), as in the cloud. A literal "/opt/ml/checkpoints"
    # in the spec would be used as is, outside the emulated host's folder.
    s3_uri = uri if uri.startswith("s3://") else None
    ckpt = dataclasses.replace(ckpt, mode=CheckpointMode.SAGEMAKER_SYNC, uri=s3_uri, local_path=None)
    return dataclasses.replace(spec, checkpoint=ckpt)


def write_code(plan: Plan, dest: Path) -> Path:
    """Write the plan's code bundle to `dest` (once per local job: its files are checked
    against the plan, so every run of the job gets the very same code)."""
    from sm_dist.planning.bundle import write_bundle

    return write_bundle(plan.bundle, dest)


def code_for_run(bundle: Path, dest: Path, spec: JobSpec) -> Path:
    """A copy of the bundle at `dest` with `spec` as its sm_dist_job.json."""
    shutil.copytree(bundle, dest)
    (dest / JOB_SPEC_FILENAME).write_text(spec.to_json(), encoding="utf-8")
    return dest


def local_channels(plan: Plan, stand_ins: Mapping[str, str | Path], download_s3: bool,
                   downloads: Path) -> dict[str, LocalChannel]:
    """Where each data channel's files come from here: a local source itself, a folder standing in for
    an S3 or file-system source, or (asked for) the S3 prefix downloaded with the caller's credentials."""
    unknown = sorted(set(stand_ins) - set(plan.channels))
    if unknown:
        raise ConfigError("data", unknown[0], f"no such channel in the plan (channels: {', '.join(plan.channels) or 'none'})")
    out = {}
    for name, channel in plan.channels.items():
        if name in stand_ins:
            folder = Path(stand_ins[name]).expanduser().resolve()
            if not folder.is_dir():
                raise ConfigError(f"data.{name}", str(stand_ins[name]), "expected an existing folder")
        elif channel.kind is SourceKind.LOCAL:
            folder = channel.local_path
        elif channel.kind is SourceKind.S3 and download_s3:
            folder = download_prefix(channel.source, downloads / name)
        else:
            raise ConfigError(f"inputs.{name}", channel.source, "local mode reads no AWS account by itself: give a "
                              "folder standing in for it (--local-data NAME=DIR, LocalOptions(data={...}))"
                              + (" or download it with your AWS credentials, read-only (--local-s3-data)"
                                 if channel.kind is SourceKind.S3 else ""))
        out[name] = LocalChannel(folder=folder, mode=channel.mode.value, distribution=channel.distribution.value)
    return out


def download_prefix(uri: str, dest: Path) -> Path:
    """The keys the channel `uri` holds in the cloud (`channels.channel_keys`: the request's S3Uri as a
    folder) into `dest`, with the caller's own AWS configuration."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _, prefix = s3_prefix(uri).removeprefix("s3://").partition("/")
    s3 = boto3.client("s3")
    try:
        keys = [item["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                for item in page.get("Contents", [])]
        for key in channel_keys(uri, keys):
            target = dest / key[len(prefix):]
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, key, str(target))
    except (BotoCoreError, ClientError) as exc:
        raise ConfigError("local_s3_data", uri, f"cannot download it with your AWS configuration ({exc}); give a "
                          "stand-in folder instead (--local-data NAME=DIR)") from None
    if not dest.is_dir():
        raise ConfigError("local_s3_data", uri, "no objects under this prefix")
    return dest


#: mlflow 3.x refuses a file store unless this is "true" (docs/PLATFORM.md §1.15).
MLFLOW_FILE_STORE_ENV = "MLFLOW_ALLOW_FILE_STORE"


def local_environment(plan: Plan, root: Path) -> dict[str, str]:
    """`plan.environment`, with `mlflow=`'s tracking server replaced by a file store under the run's folder
    `root` (`<root>/mlflow`): a rehearsal reaches no AWS. A MLFLOW_TRACKING_URI the user set stays."""
    env = dict(plan.environment)
    arn = (plan.request.get("MlflowConfig") or {}).get("MlflowResourceArn")
    if arn and env.get("MLFLOW_TRACKING_URI") == arn:
        env["MLFLOW_TRACKING_URI"] = (root / "mlflow").resolve().as_uri()
        env.setdefault(MLFLOW_FILE_STORE_ENV, "true")
    return env


def config_from_plan(plan: Plan, code_dir: Path, uri: str | None, job_name: str,
                     channels: Mapping[str, LocalChannel] | None = None,
                     tensorboard_uri: str | None = None, root: Path | None = None) -> LocalJobConfig:
    """The LocalJobConfig of `plan`, with its bundle at `code_dir`, sync URI `uri`, data `channels` and
    TensorBoard prefix `tensorboard_uri` (`tb_sync.tensorboard_uri`); `root`: the run's folder, where an
    `mlflow=` job's file store goes."""
    return LocalJobConfig(
        job_name=job_name,
        container_command=tuple(plan.container_command),
        environment=local_environment(plan, root) if root is not None else dict(plan.environment),
        code_dir=code_dir,
        hyperparameters=dict(plan.hyperparameters),
        instance_type=plan.instance_type,
        instance_count=plan.instance_count,
        checkpoint_uri=uri,
        checkpoint_local_path=plan.checkpoint_local_path,
        channels=dict(channels or {}),
        tensorboard_uri=tensorboard_uri,
        network_isolation=bool(plan.request.get("EnableNetworkIsolation")),
    )
