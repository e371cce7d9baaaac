"""The final model file: a plain state dict on rank 0, and a sha256 of its weights.

The hash covers the weights themselves — every tensor's name, dtype, shape and bytes, in sorted
name order — not the bytes of the `torch.save` zip, so it identifies "the same model" regardless
of how the file was serialised. Local mode and the tests compare it across runs (same seed, and
a run that was killed and resumed, must give the same hex).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import torch

#: File names inside the model dir. SageMaker tars the model dir of every host into one
#: model.tar.gz (docs/PLATFORM.md §1.1); only rank 0 (on the first host) writes, so names cannot clash.
MODEL_FILENAME = "model.pt"
SHA_FILENAME = "model.sha256"


def state_dict_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 over (name, dtype, shape, bytes) of every tensor, names sorted."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def write_model(state: Mapping[str, torch.Tensor], model_dir: str | os.PathLike[str]) -> tuple[str, str]:
    """Write `model.pt` and `model.sha256` atomically into `model_dir`; returns (path, hex)."""
    folder = Path(model_dir)
    folder.mkdir(parents=True, exist_ok=True)
    plain = {name: t.detach().cpu().clone() for name, t in state.items()}
    sha = state_dict_sha256(plain)
    path = folder / MODEL_FILENAME
    tmp = folder / (MODEL_FILENAME + ".tmp")
    torch.save(plain, tmp)
    os.replace(tmp, path)  # a reader never sees half a file
    (folder / SHA_FILENAME).write_text(sha + "\n", encoding="utf-8")
    return str(path), sha


def load_model(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """Read a model file written by write_model (weights only: loading runs no code)."""
    return torch.load(path, map_location="cpu", weights_only=True)
