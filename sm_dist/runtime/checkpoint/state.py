"""Getting model/optimizer state in and out, and copying it aside for a background save.

The strategy plug-ins (``sm_dist.runtime.strategies``) know how: ``state_dict(model, opt)``
returns {"model", "optim"} with FQN keys, ``sharded`` says whether the tensors are DTensor
shards. A script that does not use ``runtime.init()`` (raw DDP or FSDP2) gets
:class:`DcpStateAdapter`, which does the same with torch's ``get_state_dict``.
"""

from __future__ import annotations

import copy
from typing import Any, cast

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.tensor import DTensor

from sm_dist.runtime.protocols import StateStrategy


def has_dtensor(tree: object) -> bool:
    """True if any tensor in a nested dict/list is a DTensor."""
    if isinstance(tree, DTensor):
        return True
    if isinstance(tree, dict):
        return any(has_dtensor(v) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return any(has_dtensor(v) for v in tree)
    return False


class DcpStateAdapter:
    """The strategy interface for plain, DDP and FSDP2 models, detected from the model itself."""

    name = None

    def __init__(self) -> None:
        self.sharded = False  # set from the model by state_dict()

    def state_dict(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
        self.sharded = has_dtensor(dict(model.state_dict()))
        options = StateDictOptions(full_state_dict=False)  # unsharded: local == full, without torch's
        # full-state path, which fails for optimizers without tensor state (plain SGD)
        if optimizer is None:
            from torch.distributed.checkpoint.state_dict import get_model_state_dict

            return {"model": get_model_state_dict(model, options=options), "optim": {}}
        model_sd, optim_sd = get_state_dict(model, optimizer, options=options)
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None,
                        state: dict[str, Any]) -> None:
        options = StateDictOptions(full_state_dict=False, strict=True)
        if optimizer is None or not state.get("optim"):
            from torch.distributed.checkpoint.state_dict import set_model_state_dict

            set_model_state_dict(model, state["model"], options=options)
            return
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                       options=options)


def resolve_strategy(ctx: object, strategy: StateStrategy | None) -> StateStrategy:
    """The explicit strategy, else the run context's, else the DCP adapter."""
    for candidate in (strategy, getattr(ctx, "strategy", None)):
        if candidate is not None and hasattr(candidate, "state_dict") and hasattr(candidate, "load_state_dict"):
            return cast("StateStrategy", candidate)
    return DcpStateAdapter()


def stage_copy(state: dict[str, Any]) -> dict[str, Any]:
    """A CPU copy of a nested state that training can no longer change (for background saves).

    DTensors keep their mesh and placements around a copied local shard, so DCP still writes
    them as shards; everything that is not a tensor is deep-copied (schedulers mutate lists).
    """
    return cast("dict[str, Any]", _copy(state))


def _copy(tree: object) -> object:
    if isinstance(tree, DTensor):
        local = tree.to_local().detach().to("cpu", copy=True)
        return DTensor.from_local(local, tree.device_mesh, tree.placements, run_check=False,
                                  shape=tree.shape, stride=tree.stride())
    if isinstance(tree, torch.Tensor):
        return tree.detach().to("cpu", copy=True)
    if isinstance(tree, dict):
        return {k: _copy(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_copy(v) for v in tree]
    if isinstance(tree, tuple):
        return tuple(_copy(v) for v in tree)
    return copy.deepcopy(tree)


__all__ = ["DcpStateAdapter", "has_dtensor", "resolve_strategy", "stage_copy"]
