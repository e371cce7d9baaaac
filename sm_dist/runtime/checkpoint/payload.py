"""Collecting what one rank saves at a step boundary (runs in the training thread).

This is the only part of a background save that stalls training: the strategy's state dict
(a collective) and, for a background save, a CPU copy of it, so training may change the live
tensors while the copy is written.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from sm_dist.errors import ConfigError, check_int
from sm_dist.runtime.checkpoint.rng import capture_rng
from sm_dist.runtime.checkpoint.save import SavePayload
from sm_dist.runtime.checkpoint.state import has_dtensor, stage_copy
from sm_dist.runtime.protocols import Stateful, StateStrategy

#: Leaf types a checkpoint may hold: what torch.load(weights_only=True) reads back.
_PLAIN = (type(None), bool, int, float, str, torch.Tensor)


def check_extras(extras: object, path: str = "extras") -> None:
    """Refuse extras that a safe (weights_only) load could not read back."""
    if isinstance(extras, dict):
        for key, value in extras.items():
            if not isinstance(key, (str, int)):
                raise ConfigError(f"{path} key", key, "use str or int keys")
            check_extras(value, f"{path}[{key!r}]")
    elif isinstance(extras, (list, tuple)):
        for i, value in enumerate(extras):
            check_extras(value, f"{path}[{i}]")
    elif not isinstance(extras, _PLAIN):
        raise ConfigError(path, type(extras).__name__, "use only tensors, numbers, strings, None, lists and "
                          "dicts: checkpoints are loaded with weights_only=True and never run code")


def _name(value: object) -> str | None:
    return None if value is None else str(value)


def collect_payload(step: int, *, epoch: int, strategy: StateStrategy, model: nn.Module,
                    optimizer: torch.optim.Optimizer | None, scheduler: Stateful | None, scaler: Stateful | None,
                    sampler: Stateful | None, extras: dict[str, Any] | None, rank: int, copy: bool,
                    precision: str | None) -> SavePayload:
    """Gather this rank's state for `step`; `copy` detaches it from training (background saves)."""
    check_int("step", step, 0, "expected a non-negative integer (optimizer steps completed)")
    if extras is not None and not isinstance(extras, dict):
        raise ConfigError("extras", type(extras).__name__, "expected a dict")
    check_extras(extras or {})
    full = strategy.state_dict(model, optimizer)  # collective
    sharded = bool(getattr(strategy, "sharded", False)) or has_dtensor(full)
    state: dict[str, Any] | None = None  # replicated: one full copy, written by rank 0
    if sharded or rank == 0:
        state = stage_copy(full) if copy else full
    common = None
    if rank == 0:
        common = stage_copy({"scheduler": scheduler.state_dict() if scheduler is not None else None,
                             "scaler": scaler.state_dict() if scaler is not None else None,
                             "extras": extras or {}})
    return SavePayload(
        step=step, epoch=int(epoch), sharded=sharded, state=state, rng=capture_rng(), common=common,
        sampler=dict(sampler.state_dict()) if sampler is not None else None,
        strategy=_name(getattr(strategy, "name", None)), precision=precision,
        has={"scheduler": scheduler is not None, "scaler": scaler is not None, "extras": bool(extras)},
    )


__all__ = ["check_extras", "collect_payload"]
