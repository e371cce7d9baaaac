"""The small interface every strategy plug-in implements, with the defaults most share.

A strategy wraps the model, builds the optimizer from a user factory, produces and loads state
dicts whose keys carry no `module.` prefix (torch.distributed.checkpoint.state_dict strips the
wrappers), skips gradient sync during accumulation, and clips gradients by their *global* norm.
"""

from __future__ import annotations

import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)

from sm_dist.errors import ConfigError
from sm_dist.runtime.protocols import OptimizerFactory
from sm_dist.runtime.strategies.collectives import clip_global_grad_norm_
from sm_dist.runtime.strategies.master_weights import MasterWeightOptimizer
from sm_dist.vocab import Precision

if TYPE_CHECKING:
    from sm_dist.runtime.protocols import StrategyContext

_log = logging.getLogger(__name__)

class Strategy(ABC):
    """Defaults for a replicated-model strategy; subclasses override what differs."""

    name: ClassVar[str] = ""
    #: True: state is DTensor-sharded, saved per rank with DCP. False: every rank returns the
    #: same full state (plain tensors); one copy is enough.
    sharded: ClassVar[bool] = False
    #: True if the strategy implements "mixed" itself (FSDP2 MixedPrecisionPolicy).
    native_mixed: ClassVar[bool] = False

    def __init__(self, *, sync_batchnorm: bool = False, reshard_after_forward: bool | None = None,
                 shard_units: Iterable[type[nn.Module]] | None = None) -> None:
        self.sync_batchnorm = bool(sync_batchnorm)
        self.reshard_after_forward = reshard_after_forward
        self.shard_units = tuple(shard_units) if shard_units else None

    # -- model ---------------------------------------------------------------------------------
    def prepare(self, model: nn.Module, ctx: StrategyContext) -> nn.Module:
        """Move to the device, apply precision and SyncBatchNorm: the common first steps."""
        model = model.to(ctx.device)
        if ctx.precision is Precision.BF16 or (ctx.precision is Precision.MIXED and not self.native_mixed):
            model = model.to(torch.bfloat16)  # mixed: half working copy; fp32 master in the optimizer
        if self.sync_batchnorm:
            if ctx.device.type == "cpu":
                raise ConfigError("sync_batchnorm", True, "SyncBatchNorm runs only on GPUs; drop it on CPU")
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        return model

    @abstractmethod
    def wrap_model(self, model: nn.Module, ctx: StrategyContext) -> nn.Module:
        """Wrap `model` for this strategy (each plug-in's one required method)."""

    # -- optimizer -----------------------------------------------------------------------------
    def build_optimizer(self, model: nn.Module, factory: OptimizerFactory, ctx: StrategyContext) -> torch.optim.Optimizer:
        """factory(params); for "mixed", behind fp32 master weights every rank keeps in full."""
        if ctx.precision is Precision.MIXED and not self.native_mixed:
            return MasterWeightOptimizer(model, factory, partitioned=False)
        return factory(model.parameters())

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
        """{"model", "optim"}: FQN keys without `module.`. Collective: every rank calls it."""
        if isinstance(optimizer, MasterWeightOptimizer):
            return optimizer.full_state_dict()
        options = StateDictOptions(full_state_dict=not self.sharded)
        if optimizer is None:
            return {"model": get_model_state_dict(model, options=options), "optim": {}}
        model_sd, optim_sd = get_state_dict(model, optimizer, options=options)
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, state: dict[str, Any]) -> None:
        """Load what state_dict() (of this or another strategy) produced. Collective."""
        if isinstance(optimizer, MasterWeightOptimizer):
            optimizer.load_full_state_dict(state)
            return
        options = StateDictOptions(full_state_dict=not self.sharded, strict=True)
        if optimizer is None or not state.get("optim"):
            set_model_state_dict(model, state["model"], options=options)
            return
        set_state_dict(model, optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"], options=options)

    # -- training-loop helpers ------------------------------------------------------------------
    @contextlib.contextmanager
    def no_sync(self, model: nn.Module) -> Iterator[None]:
        """Skip gradient synchronisation (gradient accumulation micro-steps)."""
        yield

    def clip_grad_norm_(self, model: nn.Module, max_norm: float) -> torch.Tensor:
        """Scale gradients so their global L2 norm is at most max_norm; returns the norm."""
        return clip_global_grad_norm_(model.parameters(), max_norm)


__all__ = ["OptimizerFactory", "Strategy"]
