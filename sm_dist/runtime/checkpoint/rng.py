"""RNG states of one process (python, numpy, torch CPU and CUDA), as weights_only-safe values.

Dropout masks, data augmentation and random crops draw from these generators, so resuming
bit-identically needs them back exactly. Everything is stored as tensors, ints, floats and
strings: numpy's own state tuple is not loadable with ``weights_only=True`` (docs/PLATFORM.md §3.3).
"""

from __future__ import annotations

import random
from typing import Any, cast

import torch


def capture_rng() -> dict[str, Any]:
    """This process's generator states."""
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {
        "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy as np
    except ImportError:
        return state
    kind, keys, pos, has_gauss, cached = cast("tuple[Any, ...]", np.random.get_state())
    state["numpy"] = {"kind": str(kind), "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached": float(cached)}
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Put back what :func:`capture_rng` returned (on the same rank)."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["state"].tolist()), py["gauss"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy as np

        npy = state["numpy"]
        keys = npy["keys"].numpy().astype(np.uint32)
        np.random.set_state((npy["kind"], keys, npy["pos"], npy["has_gauss"], npy["cached"]))


__all__ = ["capture_rng", "restore_rng"]
