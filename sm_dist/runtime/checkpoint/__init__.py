"""Crash-safe checkpoints: sharded or full, local / S3 / SageMaker-synced, async, exact resume.

    ckpt = Checkpointer.from_env(ctx)            # or Checkpointer(ctx, uri="s3://b/p", interval_steps=100)
    state = ckpt.resume(model=model, optimizer=opt, scheduler=sched, sampler=sampler)
    start = state.step if state else 0
    for step in range(start, total):
        ...train one step...
        ckpt.maybe_save(step + 1, model=model, optimizer=opt, scheduler=sched, sampler=sampler)
    ckpt.close()

Every rank constructs the Checkpointer at the same point after the process group exists and calls
`save`/`maybe_save`/`resume`/`close` in the same order (`checkpointer`). A checkpoint is a step
folder whose `manifest.json`, written last by rank 0, is the commit; the layout, the manifest and
what makes a step committed are `sm_dist.contract.checkpoint`'s, read by both backends' listings
too. Where it goes (`mode`, "auto" resolved in `config`): "local" (a folder, `storage`), "s3"
(boto3's managed transfers, `s3`), "sagemaker-sync" (the folder SageMaker's CheckpointConfig syncs,
`sagemaker_sync`) or "off". Its other parts:

- `signals`: SIGTERM on any rank is a flag the ranks agree on (MAX) in `maybe_save`, so every rank
  stops after the same step; a last save is made if it fits in torchrun's shutdown grace; with a
  checkpoint committed, each host's local rank 0 writes the file `$SM_DIST_INTERRUPT_MARKER` names
  (so PID 1 exits `sm_dist.jobspec.EXIT_INTERRUPTED`), and the rank raises
  `SystemExit(EXIT_INTERRUPTED)`;
- `save` (write, publish, commit; optionally in a background thread), `retention` (keep the newest
  `keep` ≥ 2 committed steps), `load` (the newest good step; each rank fetches and verifies only what
  it reads), `safe_load` (no code runs from a checkpoint), `payload`/`state`/`rng` (what a rank saves);
- `faults`: the test-only `SM_DIST_FAULT` hook (crash-in-save, crash-in-commit).

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
