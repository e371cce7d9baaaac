"""A checkpoint never executes code: crafted pickles planted in a checkpoint are refused.

The attacker here controls the whole folder (as someone with write access to the bucket
would) and rewrites the manifest so every checksum matches the planted file.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from sm_dist.contract.checkpoint import (
    MANIFEST_NAME,
    FileEntry,
    Manifest,
    sha256_file,
    step_dirname,
)
from sm_dist.errors import CheckpointError
from sm_dist.runtime.checkpoint import Checkpointer
from sm_dist.runtime.checkpoint.safe_load import load_dcp_metadata


class _Payload:
    """Unpickling this runs os.system: creates the file named by `flag`."""

    def __init__(self, flag: Path) -> None:
        self.flag = flag

    def __reduce__(self):
        return (os.system, (f"touch {self.flag}",))


class _ShardedPlain:
    """Strategy stand-in that takes the DCP (sharded) path without a process group."""

    sharded = True
    name = "test-sharded"

    def __init__(self, extra: dict | None = None) -> None:
        self.extra = extra or {}

    def state_dict(self, model, optimizer):
        model_sd, optim_sd = get_state_dict(model, optimizer)
        return {"model": model_sd, "optim": optim_sd, **self.extra}

    def load_state_dict(self, model, optimizer, state):
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def _model() -> tuple[nn.Module, torch.optim.Optimizer]:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(1, 4)).sum().backward()
    optimizer.step()
    return model, optimizer


def _save(root: Path, strategy=None) -> Path:
    model, optimizer = _model()
    with Checkpointer(uri=str(root), mode="local", strategy=strategy) as ckpt:
        ckpt.save(1, model=model, optimizer=optimizer)
    return root / step_dirname(1)


def _plant(folder: Path, rel: str, data: bytes) -> None:
    """Replace a file and make the manifest agree with it, as an attacker with bucket access could."""
    (folder / rel).write_bytes(data)
    manifest = Manifest.from_json((folder / MANIFEST_NAME).read_text(), where="test")
    files = dict(manifest.files)
    files[rel] = FileEntry(size=len(data), sha256=sha256_file(folder / rel))
    text = Manifest(**{**manifest.__dict__, "files": files}).to_json()
    (folder / MANIFEST_NAME).write_text(text)


def _resume(root: Path, strategy=None) -> None:
    model, optimizer = _model()
    with Checkpointer(uri=str(root), mode="local", strategy=strategy) as ckpt:
        ckpt.resume(model=model, optimizer=optimizer)


def test_crafted_dcp_metadata_is_refused(tmp_path):
    flag = tmp_path / "pwned"
    folder = _save(tmp_path / "ckpt", _ShardedPlain())
    _plant(folder, "model/.metadata", pickle.dumps(_Payload(flag)))
    with pytest.raises(CheckpointError, match="not allowed"):
        _resume(tmp_path / "ckpt", _ShardedPlain())
    assert not flag.exists()


def test_genuine_dcp_metadata_passes_the_allow_list(tmp_path):
    folder = _save(tmp_path / "ckpt", _ShardedPlain())
    metadata = load_dcp_metadata(folder / "model" / ".metadata")
    assert any(key.startswith("optim.state.") for key in metadata.state_dict_metadata)


def test_crafted_non_tensor_dcp_entry_is_refused(tmp_path):
    """DCP itself would unpickle non-tensor entries with weights_only=False (docs/PLATFORM.md §3.3)."""
    flag = tmp_path / "pwned"
    _save(tmp_path / "ckpt", _ShardedPlain({"evil": _Payload(flag)}))
    assert not flag.exists()  # saving pickles it; nothing ran yet
    with pytest.raises(CheckpointError, match="refused to unpickle"):
        _resume(tmp_path / "ckpt", _ShardedPlain({"evil": 0}))
    assert not flag.exists()


@pytest.mark.parametrize("rel", ["model/full.pt", "common.pt", "rng/rank-00000.pt"])
@pytest.mark.parametrize("force_unsafe", [False, True])
def test_crafted_torch_files_are_refused(tmp_path, monkeypatch, rel, force_unsafe):
    if force_unsafe:  # flips torch.load's default; explicit weights_only=True must still win
        monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    flag = tmp_path / "pwned"
    folder = _save(tmp_path / "ckpt")
    buffer = io.BytesIO()
    torch.save({"model": _Payload(flag)}, buffer)
    _plant(folder, rel, buffer.getvalue())
    with pytest.raises(CheckpointError, match="refused to unpickle"):
        _resume(tmp_path / "ckpt")
    assert not flag.exists()


def test_reader_uses_no_private_torch_api(tmp_path):
    """torch 2.8's FileSystemReader has no `_get_metadata_path`: the reader must work without it."""
    import inspect

    from sm_dist.runtime.checkpoint import safe_load

    assert "._" not in inspect.getsource(safe_load.SafeFileSystemReader).replace("self._", "")
    folder = _save(tmp_path / "ckpt", _ShardedPlain())
    reader = safe_load.SafeFileSystemReader(folder / "model")
    for name in ("_get_metadata_path",):  # as on torch 2.8
        setattr(reader, name, None)
    metadata = reader.read_metadata()
    assert metadata.state_dict_metadata and metadata.storage_meta is not None
