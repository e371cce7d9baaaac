"""Checkpointer settings, checked once, and the choice of storage ("auto" resolution).

"auto" picks, in order: "sagemaker-sync" inside a SageMaker job whose CheckpointConfig gave a
local path (the platform restores and uploads it), else "s3" when an s3:// URI is known, else
"local" for a folder. Anything else is a ConfigError naming the field, the value and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping

from sm_dist.contract.checkpoint import CheckpointMode, CheckpointSettings
from sm_dist.contract.container import CHECKPOINT_LOCAL_PATH, opt_ml_root, remap
from sm_dist.errors import ConfigError
from sm_dist.runtime.checkpoint.storage import LocalStorage, Storage
from sm_dist.runtime.protocols import RunIdentity


def run_identity(env_or_ctx: RunIdentity | None) -> tuple[int, int]:
    """(rank, world_size) from a RunEnv / RunContext, else torch.distributed, else (0, 1)."""
    if env_or_ctx is not None and hasattr(env_or_ctx, "rank") and hasattr(env_or_ctx, "world_size"):
        return int(env_or_ctx.rank), int(env_or_ctx.world_size)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _run_env(env_or_ctx: RunIdentity | None) -> object:
    return getattr(env_or_ctx, "env", env_or_ctx)


def resolve_mode(config: CheckpointSettings, env_or_ctx: RunIdentity | None) -> str:
    """The concrete mode for "auto"."""
    if config.mode != "auto":
        return config.mode
    env = _run_env(env_or_ctx)
    if getattr(env, "on_sagemaker", False) and (getattr(env, "checkpoint_dir", None) or config.local_path):
        return "sagemaker-sync"
    if config.uri and config.uri.startswith("s3://"):
        return "s3"
    if config.uri or config.local_path or getattr(env, "checkpoint_dir", None):
        return "local"
    raise ConfigError("checkpoint.uri", config.uri,
                      "no checkpoint location: give uri='s3://bucket/prefix' or a local folder, or mode='off'")


def _container_path(path: str, environ: Mapping[str, str] | None) -> str:
    """A job-spec path like /opt/ml/checkpoints, moved under $SM_DIST_OPT_ML in local mode."""
    return remap(path, opt_ml_root(environ))


def open_storage(config: CheckpointSettings, env_or_ctx: RunIdentity | None, rank: int,
                 environ: Mapping[str, str] | None = None) -> Storage | None:
    """The storage the config asks for; None for mode "off"."""
    mode = resolve_mode(config, env_or_ctx)
    env = _run_env(env_or_ctx)
    if mode == "off":
        return None
    if mode == "s3":
        from sm_dist.runtime.checkpoint.s3 import S3Storage

        return S3Storage(str(config.uri), rank=rank)
    if mode == "sagemaker-sync":
        from sm_dist.runtime.checkpoint.sagemaker_sync import SageMakerSyncStorage

        path = config.local_path or getattr(env, "checkpoint_dir", None) or CHECKPOINT_LOCAL_PATH
        s3_uri = config.uri if config.uri and config.uri.startswith("s3://") else None
        return SageMakerSyncStorage(_container_path(path, environ), s3_uri=s3_uri, rank=rank)
    folder = config.local_path or config.uri or getattr(env, "checkpoint_dir", None)
    if not folder or str(folder).startswith("s3://"):
        raise ConfigError("checkpoint.local_path", folder, 'mode "local" needs a folder (local_path= or uri=)')
    return LocalStorage(_container_path(str(folder).removeprefix("file://"), environ))


__all__ = ["CheckpointMode", "open_storage", "resolve_mode", "run_identity"]
