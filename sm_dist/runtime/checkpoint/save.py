"""Writing one checkpoint: collect the state, write and publish every rank's files, commit.

Order is the guarantee: (1) every rank writes its files into a private staging folder and
publishes them under final names; (2) ranks report file names, sizes and sha256 to rank 0;
(3) only if every rank succeeded does rank 0 write the manifest — the commit — and then apply
retention. A crash anywhere before (3) leaves a folder without a manifest, which no loader
accepts. Step (1)-(3) may run in a background thread on the checkpointer's own process group.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import DefaultSavePlanner
from torch.distributed.checkpoint.api import CheckpointException

from sm_dist._version import __version__
from sm_dist.contract.checkpoint import (
    COMMON_FILE,
    FULL_FILE,
    MODEL_DIR,
    FileEntry,
    Manifest,
    rng_file,
    sha256_file,
    step_dirname,
)
from sm_dist.errors import CheckpointError
from sm_dist.runtime.checkpoint.faults import FaultHook
from sm_dist.runtime.checkpoint.retention import apply_retention
from sm_dist.runtime.checkpoint.storage import Storage

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Next to each DCP data file: sha256 of its fixed-size blocks, so a rank that needs a few entries
#: of another rank's file (replicated values, a reshard) fetches and verifies only those blocks.
BLOCKS_SUFFIX = ".blocks.json"
#: Block size: at least 4 KiB (a small entry costs one block), larger for big files so an index
#: holds at most 65536 hashes (~4.4 MB of JSON; a 500 MB shard gets 8 KiB blocks).
MIN_BLOCK_BYTES = 4 << 10
MAX_BLOCKS = 65536


@dataclass(kw_only=True)
class SavePayload:
    """Everything one rank writes for one step, already detached from training."""

    step: int
    epoch: int
    sharded: bool
    state: dict[str, Any] | None  # {"model", "optim"}; None on ranks with nothing to write
    rng: dict[str, Any]
    common: dict[str, Any] | None  # rank 0 only
    sampler: dict[str, int] | None
    strategy: str | None = None
    precision: str | None = None
    has: dict[str, bool] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Group:
    """Who takes part in a save: this rank, the world size, the process group (None: alone)."""

    rank: int
    world_size: int
    pg: ProcessGroup | None = None


def write_checkpoint(payload: SavePayload, storage: Storage, group: Group, faults: FaultHook,
                     keep: int | None) -> Manifest:
    """Steps (1)-(3) above; every rank calls it. Raises CheckpointError on every rank on failure."""
    stage = _prepare(payload.step, storage, group)
    entries: dict[str, FileEntry] = {}
    error = None
    try:
        _write_files(payload, stage, group)
        for path in sorted(p for p in stage.rglob("*") if p.is_file()):
            rel = path.relative_to(stage).as_posix()
            entries[rel] = FileEntry(size=path.stat().st_size, sha256=sha256_file(path))
            storage.publish(payload.step, path, rel)
    except (Exception, CheckpointException) as exc:  # DCP's CheckpointException is a BaseException
        error = f"rank {group.rank}: {type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    faults.after_shards(payload.step)
    reports = _gather((entries, error), group)
    mine = _commit(payload, storage, group, faults, reports) if group.rank == 0 else None
    outcome = cast("dict[str, Any]", _broadcast(mine, group))  # rank 0's, which is never None
    if outcome["error"]:
        raise CheckpointError(f"checkpoint of step {payload.step} was not committed: {outcome['error']}")
    manifest = Manifest.from_json(outcome["manifest"], where=step_dirname(payload.step))
    if group.rank == 0:
        apply_retention(storage, keep, newest=payload.step)
    return manifest


def _prepare(step: int, storage: Storage, group: Group) -> Path:
    """Rank 0 removes a stale commit of `step`; every rank gets a staging folder. All ranks learn
    of any failure here, so none is left waiting in the collectives of the write."""
    problem = None
    try:
        if group.rank == 0:
            _clear_stale(storage, step)
        stage = storage.stage_dir(step, group.rank)
    except Exception as exc:  # noqa: BLE001 - reported to every rank below
        problem = f"rank {group.rank}: {exc}"
    problems = [p for p in _gather(problem, group) if p]
    if problems:
        raise CheckpointError(f"checkpoint of step {step} was not started: {'; '.join(problems)}")
    return stage


def _clear_stale(storage: Storage, step: int) -> None:
    """Delete a commit of `step` left by an abandoned timeline (we resumed from an older step)."""
    if storage.read_manifest(step) is not None:
        _log.warning("replacing %s/%s from an earlier attempt", storage.uri, step_dirname(step))
        storage.delete(step)


def _write_files(payload: SavePayload, stage: Path, group: Group) -> None:
    if payload.sharded:
        writer = dcp.FileSystemWriter(stage / MODEL_DIR, single_file_per_rank=True, sync_files=True)
        # replicated entries (optimizer steps, param groups) all in rank 0's file, not spread over
        # every rank's: a restore then reads blocks of one other file, not of all of them
        planner = DefaultSavePlanner(dedup_save_to_lowest_rank=True)
        dcp.save(payload.state, storage_writer=writer, planner=planner, process_group=group.pg,
                 no_dist=group.pg is None)
        for path in sorted((stage / MODEL_DIR).glob("*.distcp")):
            write_block_index(path)
    elif group.rank == 0:
        _save_pt(payload.state, stage / FULL_FILE)
    _save_pt(payload.rng, stage / rng_file(group.rank))
    if group.rank == 0:
        _save_pt(payload.common, stage / COMMON_FILE)


def block_size_for(size: int) -> int:
    """Block size of a file of `size` bytes (a power of two)."""
    block = MIN_BLOCK_BYTES
    while block * MAX_BLOCKS < size:
        block *= 2
    return block


def write_block_index(path: Path) -> None:
    """Write ``<path>.blocks.json``: {"size", "block_size", "sha256": [one hex digest per block]}."""
    size = path.stat().st_size
    block = block_size_for(size)
    digests = []
    with open(path, "rb") as handle:
        while chunk := handle.read(block):
            digests.append(hashlib.sha256(chunk).hexdigest())
    with open(path.with_name(path.name + BLOCKS_SUFFIX), "w", encoding="utf-8") as handle:
        json.dump({"size": size, "block_size": block, "sha256": digests}, handle)
        handle.flush()
        os.fsync(handle.fileno())


def _save_pt(obj: object, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        torch.save(obj, handle)
        handle.flush()
        os.fsync(handle.fileno())


def _commit(payload: SavePayload, storage: Storage, group: Group, faults: FaultHook,
            reports: list[tuple[dict[str, FileEntry], str | None]]) -> dict[str, Any]:
    errors = [err for _, err in reports if err]
    if errors:
        return {"error": "; ".join(errors), "manifest": None}
    files: dict[str, FileEntry] = {}
    for rank_entries, _ in reports:
        files.update(rank_entries)
    manifest = Manifest(
        step=payload.step, epoch=payload.epoch, world_size=group.world_size, sharded=payload.sharded,
        strategy=payload.strategy, precision=payload.precision, sampler=payload.sampler,
        rng_files={str(r): rng_file(r) for r in range(group.world_size)}, files=files, has=payload.has,
        sm_dist_version=__version__, torch_version=torch.__version__, created_unix=time.time(),
    )
    text = manifest.to_json()
    try:
        storage.commit(payload.step, text, midway=lambda: faults.midway_commit(payload.step))
    except Exception as exc:  # noqa: BLE001 - every rank must hear the outcome
        return {"error": f"commit: {exc}", "manifest": None}
    _log.info("checkpoint step %d committed to %s/%s", payload.step, storage.uri, step_dirname(payload.step))
    return {"error": None, "manifest": text}


def _gather(obj: _T, group: Group) -> list[_T]:
    """Every rank's `obj`, in rank order (collective)."""
    if group.pg is None:
        return [obj]
    out: list[Any] = [None] * group.world_size
    dist.all_gather_object(out, obj, group=group.pg)
    return out


def _broadcast(obj: _T, group: Group) -> _T:
    """Rank 0's `obj` on every rank (collective)."""
    if group.pg is None:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=group.pg)
    return box[0]


__all__ = ["BLOCKS_SUFFIX", "COMMON_FILE", "FULL_FILE", "MODEL_DIR", "Group", "SavePayload", "block_size_for",
           "rng_file", "write_block_index", "write_checkpoint"]
