"""The checkpoint contract: layout, commit manifest, and the settings every part reads.

A checkpoint is one folder ``step-000000120/``. Every rank writes and publishes its files first;
rank 0 writes ``manifest.json`` last. The manifest lists every file with its size and sha256,
so a loader can prove that what it is about to read is exactly what was written, before it
unpickles a single byte. A folder without a manifest, or whose files do not match it, is not a
checkpoint — for the runtime's loader, the cloud backend's S3 listing and local mode's listing alike
(:func:`committed_manifest`). Standard library only: the launch side reads manifests without torch.

Every file name is unique per rank, so all hosts can share one prefix:

    <root>/step-000000120/
      model/.metadata, model/*.distcp     sharded strategies: DCP, loads at any world size
      model/*.distcp.blocks.json          sha256 of each fixed-size block of that data file
      model/full.pt                       replicated strategies: one copy, rank 0
      common.pt                           scheduler, grad scaler, extras (rank 0)
      rng/rank-00003.pt                   each rank's python/numpy/torch RNG state
      manifest.json                       THE COMMIT, written last by rank 0 (`Manifest`)

The manifest is written with a temporary file, fsync and rename on a folder, `If-None-Match: *` on
S3 (`sm_dist.runtime.checkpoint`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from sm_dist.errors import CheckpointError, ConfigError, check_int
from sm_dist.vocab import StrEnum

#: Name of the commit file inside a step folder.
MANIFEST_NAME = "manifest.json"
#: Format tag; bump when the layout changes incompatibly.
FORMAT = "sm_dist.checkpoint/1"
#: Step folders are zero-padded so lexical order is numeric order in any listing (S3 too).
_STEP_RE = re.compile(r"^step-(\d{9,})$")
_HASH_CHUNK = 8 << 20  # read files in 8 MiB blocks: large enough to keep hashlib off the GIL


#: File names inside a step folder (the layout in this module's docstring).
MODEL_DIR = "model"  # DCP files of a sharded checkpoint
FULL_FILE = "model/full.pt"  # one full copy (replicated strategies), written by rank 0
COMMON_FILE = "common.pt"  # scheduler, grad scaler, extras (same on every rank), rank 0


def rng_file(rank: int) -> str:
    """Per-rank RNG file (rank in the name: all hosts share one S3 prefix)."""
    return f"rng/rank-{rank:05d}.pt"


def step_dirname(step: int) -> str:
    """Folder name of a step's checkpoint, e.g. ``step-000000120``."""
    return f"step-{step:09d}"


def parse_step(name: str) -> int | None:
    """The step of a folder name from :func:`step_dirname`, or None for anything else."""
    match = _STEP_RE.match(name.rstrip("/"))
    return int(match.group(1)) if match else None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_HASH_CHUNK):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True, kw_only=True)
class FileEntry:
    """One file of a checkpoint, relative to the step folder."""

    size: int
    """Bytes."""
    sha256: str
    """Hex digest of the bytes."""


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """Everything needed to verify and restore one checkpoint (written as JSON)."""

    step: int
    """Optimizer steps completed when the checkpoint was taken."""
    epoch: int
    """Epoch at that step (what the training loop passed to save)."""
    world_size: int
    """Processes that wrote it; a sharded checkpoint loads at any other world size too."""
    sharded: bool
    """True: model/optimizer in DCP format under ``model/``; False: one copy in ``model/full.pt``."""
    strategy: str | None = None
    """Strategy name of the run that wrote it (informational)."""
    precision: str | None = None
    """Precision of that run (informational)."""
    sampler: dict[str, int] | None = None
    """Sampler state ({"seed", "epoch", "consumed"}) or None."""
    rng_files: dict[str, str] = field(default_factory=dict)
    """Rank (as text) -> file with that rank's RNG states (python, numpy, torch CPU/CUDA)."""
    files: dict[str, FileEntry] = field(default_factory=dict)
    """Every file of the checkpoint (relative path -> size and sha256)."""
    has: dict[str, bool] = field(default_factory=dict)
    """Which optional parts were saved: scheduler, scaler, extras."""
    sm_dist_version: str = ""
    torch_version: str = ""
    created_unix: float = 0.0
    format: str = FORMAT

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys) of this manifest."""
        data = asdict(self)
        return json.dumps(data, sort_keys=True, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str) -> Manifest:
        """Parse a manifest; CheckpointError (naming `where`) for anything malformed."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"format is not {FORMAT!r}")
            files = {str(k): FileEntry(**v) for k, v in data.pop("files").items()}
            manifest = cls(files=files, **data)
            _check_types(manifest)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CheckpointError(f"{where}: malformed manifest ({exc}); not a usable checkpoint") from None
        return manifest

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON types only)."""
        return asdict(self)


def _check_types(m: Manifest) -> None:
    ints = (m.step, m.epoch, m.world_size)
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in ints) or m.world_size < 1:
        raise ValueError("step, epoch and world_size must be non-negative integers")
    for rel, entry in m.files.items():
        if not _safe_relpath(rel):
            raise ValueError(f"file name {rel!r} leaves the step folder")
        if not isinstance(entry.size, int) or not re.fullmatch(r"[0-9a-f]{64}", str(entry.sha256)):
            raise ValueError(f"bad entry for {rel!r}")
    if any(rel not in m.files for rel in m.rng_files.values()):
        raise ValueError("an RNG file is not in the file list")


def _safe_relpath(rel: str) -> bool:
    """True for a plain relative path inside the step folder (no '..', no absolute path)."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def committed_manifest(text: str | bytes | None, *, where: str) -> Manifest | None:
    """The manifest that makes a step folder a committed checkpoint, or None.

    A folder is committed only when its manifest is there AND parses (format tag, types, file
    list); a missing, truncated or foreign manifest is an in-flight or abandoned save.
    """
    if text is None:
        return None
    try:
        return Manifest.from_json(text, where=where)
    except CheckpointError:
        return None


#: checkpoint_mode's words, as a user's type checker sees them (CheckpointMode's values).
CheckpointModeName: TypeAlias = Literal["auto", "local", "s3", "sagemaker-sync", "off"]


class CheckpointMode(StrEnum):
    """Where checkpoints go ("auto": sagemaker-sync, else s3, else local; runtime/checkpoint/config.py)."""

    AUTO = "auto"
    LOCAL = "local"
    S3 = "s3"
    SAGEMAKER_SYNC = "sagemaker-sync"
    OFF = "off"


#: Fewest committed checkpoints kept: one can be unreadable (bad disk, partial sync) and the
#: other still restores.
MIN_KEEP = 2
#: Committed checkpoints kept when nothing says otherwise: the Checkpointer's and CheckpointSettings'
#: default, and what the plan writes when LaunchConfig.checkpoint_keep is unset (a spec's keep=None keeps all).
DEFAULT_KEEP = 2


def parse_mode(value: object, name: str = "checkpoint.mode") -> CheckpointMode:
    """A CheckpointMode from its text; ConfigError naming `name` otherwise."""
    try:
        return CheckpointMode(str(value))
    except ValueError:
        raise ConfigError(name, value, f"expected one of {', '.join(CheckpointMode)}") from None


def check_keep(value: object, name: str = "checkpoint.keep") -> None:
    """keep: None (all) or an integer >= MIN_KEEP."""
    check_int(name, value, MIN_KEEP, f"keep at least {MIN_KEEP} (one may be unreadable), or None to keep all", optional=True)


def check_interval(value: object, name: str = "checkpoint.interval_steps") -> None:
    """interval_steps: None (only on stop and explicit saves) or an integer >= 1."""
    check_int(name, value, 1, "expected an integer >= 1 or None", optional=True)


@dataclass(frozen=True, kw_only=True)
class CheckpointSettings:
    """Where and how often the runtime checkpoints: the job spec's "checkpoint" and the runtime's config."""

    mode: CheckpointMode = CheckpointMode.AUTO
    uri: str | None = None
    """s3://bucket/prefix (also what a resumed job reads), or a local folder for mode "local"."""
    local_path: str | None = None
    """Local folder ("local" and "sagemaker-sync", e.g. /opt/ml/checkpoints)."""
    keep: int | None = DEFAULT_KEEP
    """Committed checkpoints kept (>= MIN_KEEP); None keeps all."""
    interval_steps: int | None = None
    """maybe_save() saves every N steps; None: only on stop and explicit save()."""
    async_checkpoint: bool = False
    """maybe_save() writes in the background."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", parse_mode(self.mode))
        check_keep(self.keep)
        check_interval(self.interval_steps)
        if self.uri is not None and not isinstance(self.uri, str):
            raise ConfigError("checkpoint.uri", self.uri, "expected s3://bucket/prefix or a folder")
        if self.mode is CheckpointMode.S3 and not (self.uri or "").startswith("s3://"):
            raise ConfigError("checkpoint.uri", self.uri, 'mode "s3" needs uri="s3://bucket/prefix"')
        if not isinstance(self.async_checkpoint, bool):
            raise ConfigError("checkpoint.async_checkpoint", self.async_checkpoint, "expected True or False")


__all__ = [
    "COMMON_FILE",
    "DEFAULT_KEEP",
    "FORMAT",
    "FULL_FILE",
    "MANIFEST_NAME",
    "MIN_KEEP",
    "MODEL_DIR",
    "CheckpointMode",
    "CheckpointSettings",
    "FileEntry",
    "Manifest",
    "check_interval",
    "check_keep",
    "committed_manifest",
    "parse_mode",
    "parse_step",
    "rng_file",
    "sha256_file",
    "step_dirname",
]
