"""Crash-safe checkpoints: sharded or full, local / S3 / SageMaker-synced, async, exact resume.

    ckpt = Checkpointer.from_env(ctx)            # or Checkpointer(ctx, uri="s3://b/p", interval_steps=100)
    state = ckpt.resume(model=model, optimizer=opt, scheduler=sched, sampler=sampler)
    start = state.step if state else 0
    for step in range(start, total):
        ...train one step...
        ckpt.maybe_save(step + 1, model=model, optimizer=opt, scheduler=sched, sampler=sampler)
    ckpt.close()

The manifest and storage modules need only the standard library (and boto3 for S3); the
Checkpointer needs torch, so public names resolve on first access (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sm_dist._lazy import lazy_exports

_LAZY = {
    "Checkpointer": "sm_dist.runtime.checkpoint.checkpointer:Checkpointer",
    "ResumeState": "sm_dist.runtime.checkpoint.load:ResumeState",
    "Manifest": "sm_dist.contract.checkpoint:Manifest",
    "LocalStorage": "sm_dist.runtime.checkpoint.storage:LocalStorage",
    "S3Storage": "sm_dist.runtime.checkpoint.s3:S3Storage",
    "SageMakerSyncStorage": "sm_dist.runtime.checkpoint.sagemaker_sync:SageMakerSyncStorage",
}

if TYPE_CHECKING:  # what type checkers see; tests/test_public_types.py keeps it equal to _LAZY
    from sm_dist.contract.checkpoint import Manifest as Manifest
    from sm_dist.runtime.checkpoint.checkpointer import Checkpointer as Checkpointer
    from sm_dist.runtime.checkpoint.load import ResumeState as ResumeState
    from sm_dist.runtime.checkpoint.s3 import S3Storage as S3Storage
    from sm_dist.runtime.checkpoint.sagemaker_sync import SageMakerSyncStorage as SageMakerSyncStorage
    from sm_dist.runtime.checkpoint.storage import LocalStorage as LocalStorage
else:
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = sorted(_LAZY)
