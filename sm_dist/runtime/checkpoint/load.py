"""Finding the newest good checkpoint and restoring everything from it.

Rank 0 walks the step folders newest first; a folder without a manifest, with a malformed
one, or whose files differ from it (missing, truncated, other sha256) is skipped with a
warning. Every rank then verifies the files it will read against the manifest again (they
may come from a download) before any byte is unpickled, and loads through ``safe_load``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

from sm_dist.errors import CheckpointError
from sm_dist.runtime.checkpoint.manifest import Manifest, step_dirname
from sm_dist.runtime.checkpoint.rng import restore_rng
from sm_dist.runtime.checkpoint.safe_load import (SafeFileSystemReader, SafeLoadPlanner, load_dcp_metadata,
                                                  safe_torch_load)
from sm_dist.runtime.checkpoint.save import COMMON_FILE, FULL_FILE, MODEL_DIR, Group, rng_file
from sm_dist.runtime.checkpoint.storage import Storage

_log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ResumeState:
    """What :meth:`Checkpointer.resume` restored."""

    step: int
    """Optimizer steps completed: continue the loop at this step."""
    epoch: int
    """Epoch saved with the checkpoint."""
    extras: dict[str, Any] = field(default_factory=dict)
    """The user's extras, as saved."""
    location: str = ""
    """Where it was read from (folder or s3:// URI of the step)."""
    saved_world_size: int = 1
    """World size that wrote it (RNG states are restored only when it equals the current one)."""


def select_checkpoint(storage: Storage) -> tuple[int, str] | None:
    """(step, manifest text) of the newest committed checkpoint that verifies; rank 0 only."""
    for step in reversed(storage.list_steps()):
        where = f"{storage.uri}/{step_dirname(step)}"
        raw = storage.read_manifest(step)
        if raw is None:
            _log.warning("skipping %s: no manifest (its save never committed)", where)
            continue
        try:
            manifest = Manifest.from_json(raw, where=where)
        except CheckpointError as exc:
            _log.warning("skipping %s", exc)
            continue
        problems = [f"manifest is for step {manifest.step}"] if manifest.step != step else []
        problems = problems or storage.verify(step, manifest)
        if problems:
            _log.warning("skipping %s: %s", where, "; ".join(problems))
            continue
        return step, raw.decode("utf-8")
    return None


def needed_files(manifest: Manifest, rank: int, world_size: int) -> list[str]:
    """Files this rank reads: model data, common state, its own RNG file when world sizes match."""
    if manifest.sharded:
        rels = [rel for rel in manifest.files if rel.startswith(MODEL_DIR + "/")]
    else:
        rels = [FULL_FILE]
    if COMMON_FILE in manifest.files:
        rels.append(COMMON_FILE)
    if manifest.world_size == world_size and rng_file(rank) in manifest.files:
        rels.append(rng_file(rank))
    return rels


def load_model_state(folder: Path, manifest: Manifest, strategy: Any, sharded_now: bool, model: Any,
                     optimizer: Any, group: Group) -> None:
    """Model and optimizer: DCP (resharded to this world size) or the one full copy."""
    if manifest.sharded:
        state = strategy.state_dict(model, optimizer)  # templates with this run's sharding
        _check_optimizer_template(folder, state, optimizer)
        reader = SafeFileSystemReader(folder / MODEL_DIR)
        try:
            dcp.load(state, storage_reader=reader, planner=SafeLoadPlanner(), process_group=group.pg,
                     no_dist=group.pg is None)
        except CheckpointException as exc:  # a BaseException; carries each rank's traceback as text
            lines = [line for line in str(exc).splitlines() if line.strip()]
            raise CheckpointError(f"loading {folder / MODEL_DIR} failed: {lines[-1] if lines else exc}") from None
        strategy.load_state_dict(model, optimizer, state)
        return
    state = safe_torch_load(folder / FULL_FILE, what=f"{folder}/{FULL_FILE}")
    if sharded_now:  # a replicated run's checkpoint into sharded parameters: torch's full-state path
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                       options=StateDictOptions(full_state_dict=True, strict=True))
    else:
        strategy.load_state_dict(model, optimizer, state)


def _check_optimizer_template(folder: Path, state: dict[str, Any], optimizer: Any) -> None:
    """DCP loads only keys the template has: an empty optimizer template would load nothing."""
    metadata = load_dcp_metadata(folder / MODEL_DIR / ".metadata")
    saved = any(key.startswith("optim.state.") for key in metadata.state_dict_metadata)
    if saved and optimizer is not None and not state.get("optim", {}).get("state"):
        raise CheckpointError("the optimizer has no state to load into (DCP loads into existing state); "
                              "use a strategy whose state_dict initializes optimizer state")


def restore_common(folder: Path, manifest: Manifest, rank: int, world_size: int, *, scheduler: Any,
                   scaler: Any, sampler: Any) -> dict[str, Any]:
    """Scheduler, scaler, sampler, this rank's RNG; returns the extras."""
    common = safe_torch_load(folder / COMMON_FILE, what=COMMON_FILE) if COMMON_FILE in manifest.files else {}
    for name, obj in (("scheduler", scheduler), ("scaler", scaler)):
        if obj is None:
            continue
        if common.get(name) is None:
            _log.warning("checkpoint step %d has no %s state; the %s starts fresh", manifest.step, name, name)
        else:
            obj.load_state_dict(common[name])
    if sampler is not None and manifest.sampler is not None:
        sampler.load_state_dict(dict(manifest.sampler))
    if manifest.world_size == world_size:
        restore_rng(safe_torch_load(folder / rng_file(rank), what=rng_file(rank)))
    else:
        _log.warning("checkpoint written by %d ranks, now %d: RNG states not restored (data order still is, "
                     "through the sampler)", manifest.world_size, world_size)
    return dict(common.get("extras") or {})


__all__ = ["ResumeState", "load_model_state", "needed_files", "restore_common", "select_checkpoint"]
