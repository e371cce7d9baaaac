"""Loading that never executes code from a checkpoint.

DCP reads its ``.metadata`` with plain ``pickle.load`` and non-tensor entries with
``torch.load(weights_only=False)`` (docs/PLATFORM.md §3.1, §3.3): a crafted file planted in a bucket would
run code on load. Here ``.metadata`` goes through an unpickler that only resolves DCP's own
metadata classes and a few torch value types, every non-tensor entry and every ``.pt`` file is
read with ``torch.load(weights_only=True)`` (explicit, so TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD cannot
flip it), and the caller has already checked every file against the JSON manifest.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import IO, Any

import torch
from torch.distributed.checkpoint import DefaultLoadPlanner, FileSystemReader
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import ReadItem

from sm_dist.errors import CheckpointError

#: Classes a DCP ``.metadata`` pickle may name (measured on torch 2.13 with plain tensors,
#: DTensors, bf16/fp32 and non-tensor entries; see tests/checkpoint/test_safety.py).
_ALLOWED = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata", "BytesStorageMetadata", "ChunkStorageMetadata", "TensorStorageMetadata",
        "TensorProperties", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING",
    },
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch.serialization": {"_get_layout"},
    "pathlib": {"PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath", "Path"},
    "collections": {"OrderedDict"},
    "torch": {"Size"},
}


class _MetadataUnpickler(pickle.Unpickler):
    """Resolves only allow-listed globals; anything else (os.system, eval...) is refused."""

    def find_class(self, module: str, name: str) -> object:
        if name in _ALLOWED.get(module, ()):
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), (torch.dtype, torch.layout,
                                                                         torch.memory_format)):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in checkpoint metadata")


def load_dcp_metadata(path: Path) -> Metadata:
    """Read a DCP ``.metadata`` file through the restricted unpickler."""
    try:
        with open(path, "rb") as handle:
            metadata = _MetadataUnpickler(handle).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError) as exc:
        raise CheckpointError(f"{path}: refused to load DCP metadata ({exc})") from None
    if not isinstance(metadata, Metadata):
        raise CheckpointError(f"{path}: DCP metadata is a {type(metadata).__name__}, not Metadata; refused")
    return metadata


#: The global metadata file DCP's coordinator writes last (docs/PLATFORM.md §3.1).
METADATA_NAME = ".metadata"


class SafeFileSystemReader(FileSystemReader):
    """DCP's file reader with ``.metadata`` read by :func:`load_dcp_metadata`.

    Only public reader API is used (the folder is the ``path`` every torch release sets; the
    private ``_get_metadata_path`` does not exist in torch 2.8). Only the global ``.metadata`` is
    read: sm_dist never writes DCP's rank-local ``__<rank>.metadata`` files, so a request for one
    (``rank=``) reads the global file again, which fails the same way.
    """

    def read_metadata(self, *args: object, **kwargs: object) -> Metadata:
        metadata = load_dcp_metadata(Path(str(self.path)) / METADATA_NAME)
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """DCP's default planner, but non-tensor entries are read with ``weights_only=True``."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        value.seek(0)
        obj = safe_torch_load(value, what=f"entry {read_item.dest_index.fqn!r}")
        if self.flatten_state_dict:  # same placement as DefaultLoadPlanner.load_bytes
            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj


def safe_torch_load(source: str | os.PathLike[str] | IO[bytes], *, what: str) -> object:
    """``torch.load(..., weights_only=True)`` onto CPU; a refusal becomes a CheckpointError."""
    try:
        loaded: object = torch.load(source, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(f"{what}: refused to unpickle ({str(exc).splitlines()[0]})") from None
    except (RuntimeError, EOFError, ValueError) as exc:
        raise CheckpointError(f"{what}: unreadable ({exc})") from None
    return loaded


def load_state_file(path: Path, *, what: str) -> dict[str, Any]:
    """A ``.pt`` file of a checkpoint (full state, common state, RNG states): a dict, safely loaded."""
    state = safe_torch_load(path, what=what)
    if not isinstance(state, dict):
        raise CheckpointError(f"{what}: holds a {type(state).__name__}, not the dict sm_dist writes; refused")
    return state


def planned_reads(state: dict[str, Any], metadata: Metadata) -> dict[str, list[tuple[int, int]]]:
    """DCP file (relative to the checkpoint folder) -> (offset, length) spans loading `state` reads.

    The same local plan ``dcp.load`` makes first (``create_local_plan`` is local, no collective):
    each read item names the file, offset and length of its saved chunk in ``metadata.storage_data``.
    A state with this run's sharding therefore names this rank's share, at any world size.
    """
    planner = SafeLoadPlanner()
    planner.set_up_planner(state, metadata, False)
    reads: dict[str, list[tuple[int, int]]] = {}
    for item in planner.create_local_plan().items:
        info = metadata.storage_data[item.storage_index]
        reads.setdefault(info.relative_path, []).append((int(info.offset), int(info.length)))
    return reads


__all__ = ["METADATA_NAME", "SafeFileSystemReader", "SafeLoadPlanner", "load_dcp_metadata", "planned_reads",
           "load_state_file", "safe_torch_load"]
