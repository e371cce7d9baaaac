"""zero1: DDP + optimizer states sharded over the ranks (ZeRO stage 1).

fp32 / amp / bf16 use torch's ZeroRedundancyOptimizer. "mixed" uses MasterWeightOptimizer
partitioned over the ranks: fp32 master weights and Adam states only for this rank's share,
updated bf16 weights broadcast by their owner — ZeroRedundancyOptimizer cannot do that (it
keeps states in the parameters' dtype).

State dicts are *full and identical on every rank* (sharded = False), in the FQN-keyed layout
of torch.distributed.checkpoint.state_dict — so a zero1 checkpoint loads into ddp, fsdp or a
plain model and back. Producing it gathers the optimizer partitions (ZeroRedundancyOptimizer:
consolidate_state_dict(to=0) then a broadcast from rank 0; docs/PLATFORM.md §3.2): O(full optimizer
state) transiently on every rank while checkpointing.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    set_model_state_dict,
)
from torch.distributed.optim import ZeroRedundancyOptimizer

from sm_dist.runtime.protocols import OptimizerFactory
from sm_dist.runtime.strategies.collectives import any_rank, init_optimizer_state_
from sm_dist.runtime.strategies.ddp import DDPStrategy
from sm_dist.runtime.strategies.master_weights import MasterWeightOptimizer, unwrap
from sm_dist.vocab import Precision

if TYPE_CHECKING:
    from sm_dist.runtime.protocols import StrategyContext


def _zero_from_factory(model: nn.Module, factory: OptimizerFactory) -> ZeroRedundancyOptimizer:
    """ZeroRedundancyOptimizer wants (class, kwargs); recover them from a probe instance."""
    probe = factory([nn.Parameter(torch.zeros(1))])
    cls = type(probe)
    accepted = inspect.signature(cls.__init__).parameters
    kwargs = {k: v for k, v in probe.defaults.items() if k in accepted}
    return ZeroRedundancyOptimizer(model.parameters(), optimizer_class=cls, **kwargs)


class Zero1Strategy(DDPStrategy):
    """DDP for gradients; each rank updates 1/N of the parameters and broadcasts them."""

    name = "zero1"

    def build_optimizer(self, model: nn.Module, factory: OptimizerFactory, ctx: StrategyContext) -> torch.optim.Optimizer:
        if ctx.precision is Precision.MIXED:
            return MasterWeightOptimizer(model, factory, partitioned=True)
        return _zero_from_factory(model, factory)

    def state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
        if not isinstance(optimizer, ZeroRedundancyOptimizer):
            return super().state_dict(model, optimizer)
        names = [n for n, _ in unwrap(model).named_parameters()]
        if not any_rank(bool(optimizer.optim.state)):
            init_optimizer_state_(optimizer, list(model.parameters()))
        optimizer.consolidate_state_dict(to=0)
        box = [optimizer.state_dict() if dist.get_rank() == 0 else None]
        dist.broadcast_object_list(box, src=0)
        by_index: dict[str, Any] = box[0] or {}  # rank 0's consolidated state, broadcast to all
        optim = {
            "state": {names[i]: v for i, v in by_index["state"].items()},
            "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in by_index["param_groups"]],
        }
        model_sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
        return {"model": model_sd, "optim": optim}

    def load_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, state: dict[str, Any]) -> None:
        if not isinstance(optimizer, ZeroRedundancyOptimizer):
            super().load_state_dict(model, optimizer, state)
            return
        set_model_state_dict(model, state["model"], options=StateDictOptions(full_state_dict=True))
        if not state.get("optim"):
            return
        index = {n: i for i, (n, _) in enumerate(unwrap(model).named_parameters())}
        optim = state["optim"]
        by_index = {
            "state": {index[n]: v for n, v in optim["state"].items()},
            "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in optim["param_groups"]],
        }
        optimizer.load_state_dict(by_index)
