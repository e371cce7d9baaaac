"""Finding the newest good checkpoint and restoring everything from it.

Rank 0 walks the step folders newest first and checks what is cheap to check: a manifest that
parses and names the step, and stored files of the manifest's sizes (a listing, for S3). Then
every rank fetches only what it reads — the DCP ``.metadata``, the DCP files its own load plan
names (its share at this run's sharding), the common state and its RNG file — and checks each
against the manifest's sha256 before any byte is unpickled. So the sha256 pass is split across
ranks, not repeated on each. If any rank finds a problem, all agree to skip that step with a
warning and rank 0 offers the next older one. Loading goes through ``safe_load``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

from sm_dist.contract.checkpoint import Manifest, step_dirname
from sm_dist.errors import CheckpointError
from sm_dist.runtime.checkpoint.rng import restore_rng
from sm_dist.runtime.checkpoint.safe_load import (
    METADATA_NAME,
    SafeFileSystemReader,
    SafeLoadPlanner,
    load_dcp_metadata,
    load_state_file,
    planned_reads,
)
from sm_dist.runtime.checkpoint.save import (
    COMMON_FILE,
    FULL_FILE,
    MODEL_DIR,
    Group,
    rng_file,
)
from sm_dist.runtime.checkpoint.storage import Storage
from sm_dist.runtime.protocols import Stateful, StateStrategy

if TYPE_CHECKING:
    from torch import nn
    from torch.distributed import ProcessGroup

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


def select_checkpoint(storage: Storage, below: int | None = None) -> tuple[int, str] | None:
    """(step, manifest text) of the newest committed checkpoint (older than `below`) whose stored
    files pass the storage's check; rank 0 only. The sha256 check is each rank's, in :func:`fetch_checkpoint`."""
    for step in reversed(storage.list_steps()):
        if below is not None and step >= below:
            continue
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
    """Files this rank reads besides DCP data files: the DCP metadata (or the one full copy),
    common state, its own RNG file when world sizes match. DCP data: :func:`dcp_reads`."""
    rels = [f"{MODEL_DIR}/{METADATA_NAME}"] if manifest.sharded else [FULL_FILE]
    if COMMON_FILE in manifest.files:
        rels.append(COMMON_FILE)
    if manifest.world_size == world_size and rng_file(rank) in manifest.files:
        rels.append(rng_file(rank))
    return rels


def dcp_reads(folder: Path, template: dict[str, Any]) -> dict[str, list[tuple[int, int]]]:
    """Step-relative DCP file -> (offset, length) spans this rank's load plan reads for `template`."""
    metadata = load_dcp_metadata(folder / MODEL_DIR / METADATA_NAME)
    return {f"{MODEL_DIR}/{rel}": spans for rel, spans in planned_reads(template, metadata).items()}


def _fetch_dcp_data(storage: Storage, step: int, manifest: Manifest, reads: dict[str, list[tuple[int, int]]]) -> None:
    """Whole files where this rank reads most of one; verified blocks of the others (storages that can)."""
    fetch_ranges = getattr(storage, "fetch_ranges", None)
    whole = []
    for rel, spans in sorted(reads.items()):
        needed = sum(length for _, length in spans)
        if fetch_ranges is None or rel not in manifest.files or 2 * needed >= manifest.files[rel].size:
            whole.append(rel)
        else:
            fetch_ranges(step, manifest, rel, spans)
    storage.local_copy(step, manifest, whole)


@dataclass(frozen=True, kw_only=True)
class Fetched:
    """A checkpoint step whose files this rank needs are local and verified."""

    step: int
    manifest: Manifest
    folder: Path
    template: dict[str, Any] | None
    """The strategy's state dict with this run's sharding (sharded checkpoints), to load into."""


def fetch_checkpoint(storage: Storage, *, rank: int, world_size: int, pg: ProcessGroup | None,
                     template: Callable[[], dict[str, Any]]) -> Fetched | None:
    """Choose a step (rank 0), fetch and verify each rank's files, agree, fall back (collective)."""
    below: int | None = None
    while True:
        choice: list[Any] = [None]
        if rank == 0:
            try:
                choice = [select_checkpoint(storage, below)]
            except CheckpointError as exc:  # e.g. S3 unreachable: every rank must hear of it
                choice = [str(exc)]
        if pg is not None:
            dist.broadcast_object_list(choice, src=0, group=pg)
        if isinstance(choice[0], str):
            raise CheckpointError(f"cannot look for checkpoints in {storage.uri}: {choice[0]}")
        if choice[0] is None:
            return None
        step, text = choice[0]
        manifest = Manifest.from_json(text, where=f"{storage.uri}/{step_dirname(step)}")
        state = template() if manifest.sharded else None  # every rank, same order (may be collective)
        problems, refused, folder = _fetch_own(storage, step, manifest, rank, world_size, state)
        everyone: list[Any] = [(problems, refused)]
        if pg is not None:
            everyone = [None] * world_size
            dist.all_gather_object(everyone, (problems, refused), group=pg)
        found = [problem for part, _ in everyone for problem in part]
        refusals = [text for _, text in everyone if text]
        if refusals:  # content that would run code: an error, never a silent older step or fresh start
            raise CheckpointError(refusals[0])
        if not found and folder is not None:
            return Fetched(step=step, manifest=manifest, folder=folder, template=state)
        storage.release(step)
        if rank == 0:
            _log.warning("skipping %s/%s: %s", storage.uri, step_dirname(step), "; ".join(found))
        below = step


def _fetch_own(storage: Storage, step: int, manifest: Manifest, rank: int, world_size: int,
               state: dict[str, Any] | None) -> tuple[list[str], str, Path | None]:
    """Fetch and verify this rank's files of `step`: (problems, refusal, folder)."""
    try:
        folder = storage.local_copy(step, manifest, needed_files(manifest, rank, world_size))
    except CheckpointError as exc:
        return [str(exc)], "", None
    try:
        reads = dcp_reads(folder, state) if state is not None else {}
    except CheckpointError as exc:  # verified, yet refused by the allow-list unpickler
        return [], str(exc), None
    try:
        _fetch_dcp_data(storage, step, manifest, reads)
    except CheckpointError as exc:
        return [str(exc)], "", None
    return [], "", folder


def load_model_state(folder: Path, manifest: Manifest, strategy: StateStrategy, sharded_now: bool, model: nn.Module,
                     optimizer: torch.optim.Optimizer | None, group: Group,
                     template: dict[str, Any] | None = None) -> None:
    """Model and optimizer: DCP (resharded to this world size) or the one full copy."""
    if manifest.sharded:
        # templates with this run's sharding (the one the files were fetched for, when given)
        state = template if template is not None else strategy.state_dict(model, optimizer)
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
    state = load_state_file(folder / FULL_FILE, what=f"{folder}/{FULL_FILE}")
    if sharded_now:  # a replicated run's checkpoint into sharded parameters: torch's full-state path
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                       options=StateDictOptions(full_state_dict=True, strict=True))
    else:
        strategy.load_state_dict(model, optimizer, state)


def _check_optimizer_template(folder: Path, state: dict[str, Any], optimizer: torch.optim.Optimizer | None) -> None:
    """DCP loads only keys the template has: an empty optimizer template would load nothing."""
    metadata = load_dcp_metadata(folder / MODEL_DIR / METADATA_NAME)
    saved = any(key.startswith("optim.state.") for key in metadata.state_dict_metadata)
    if saved and optimizer is not None and not state.get("optim", {}).get("state"):
        raise CheckpointError("the optimizer has no state to load into (DCP loads into existing state); "
                              "use a strategy whose state_dict initializes optimizer state")


def restore_common(folder: Path, manifest: Manifest, rank: int, world_size: int, *, scheduler: Stateful | None,
                   scaler: Stateful | None, sampler: Stateful | None) -> dict[str, Any]:
    """Scheduler, scaler, sampler, this rank's RNG; returns the extras."""
    common = load_state_file(folder / COMMON_FILE, what=COMMON_FILE) if COMMON_FILE in manifest.files else {}
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
        restore_rng(load_state_file(folder / rng_file(rank), what=rng_file(rank)))
    else:
        _log.warning("checkpoint written by %d ranks, now %d: RNG states not restored (data order still is, "
                     "through the sampler)", manifest.world_size, world_size)
    return dict(common.get("extras") or {})


__all__ = ["Fetched", "ResumeState", "dcp_reads", "fetch_checkpoint", "load_model_state", "needed_files",
           "restore_common", "select_checkpoint"]
