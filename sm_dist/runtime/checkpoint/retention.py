"""Retention: keep the newest K committed checkpoints, never the last good one.

Runs on rank 0 right after a commit. Older committed checkpoints beyond K are deleted, and so
are folders that never got a manifest (debris of crashed saves) older than the newest commit —
but only once the newest commit is durable where a restarted job will look
(:meth:`Storage.is_durable`: always for local and s3; for sagemaker-sync, once S3 holds it).
A failure here is logged, never raised: it must not fail the save that was just committed.
"""

from __future__ import annotations

import logging

from sm_dist.contract.checkpoint import MIN_KEEP, committed_manifest, step_dirname
from sm_dist.runtime.checkpoint.storage import Storage

_log = logging.getLogger(__name__)



def plan_deletions(steps: list[int], committed: set[int], keep: int, newest: int) -> list[int]:
    """Steps to delete: committed ones beyond the newest `keep`, uncommitted ones older than `newest`."""
    kept = sorted((s for s in committed if s <= newest), reverse=True)[:max(keep, MIN_KEEP)]
    return [s for s in steps if s < newest and s not in kept]


def _committed(storage: Storage, step: int) -> bool:
    """The contract's rule: a manifest that is there and parses (an unparsable one is debris)."""
    return committed_manifest(storage.read_manifest(step), where=f"{storage.uri}/{step_dirname(step)}") is not None


def apply_retention(storage: Storage, keep: int | None, *, newest: int) -> list[int]:
    """Delete what :func:`plan_deletions` selects; returns the steps deleted."""
    if keep is None:
        return []
    try:
        steps = storage.list_steps()
        committed = {s for s in steps if _committed(storage, s)}
        if not plan_deletions(steps, committed, keep, newest):
            return []
        # Count from the newest commit that is durable (sagemaker-sync: already in S3), so a
        # slow uploader delays deletions by a save or two instead of stopping them for good.
        anchor = next((s for s in sorted(committed, reverse=True) if s <= newest and storage.is_durable(s)), None)
        if anchor is None:
            _log.info("retention waits: no committed checkpoint up to %s is confirmed durable yet", step_dirname(newest))
            return []
        doomed = plan_deletions(steps, committed, keep, anchor)
        for step in doomed:
            storage.delete(step)
            _log.info("retention: deleted %s/%s", storage.uri, step_dirname(step))
        return doomed
    except Exception as exc:  # noqa: BLE001 - the commit already happened; never fail it here
        _log.warning("retention skipped: %s", exc)
        return []


__all__ = ["MIN_KEEP", "apply_retention", "plan_deletions"]
