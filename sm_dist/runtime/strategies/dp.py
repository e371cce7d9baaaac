"""dp: torch.nn.DataParallel — one process drives every GPU of a single instance.

Kept for scripts that start without a launcher; it scatters each batch over the local GPUs
and gathers the outputs on GPU 0. init() refuses it when the run has several processes.
On a machine without GPUs it runs the module as is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from sm_dist.runtime.protocols import OptimizerFactory
from sm_dist.runtime.strategies.base import Strategy

if TYPE_CHECKING:
    from sm_dist.runtime.protocols import StrategyContext


def _inner(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.DataParallel) else model


class DataParallelStrategy(Strategy):
    """nn.DataParallel over all visible GPUs of this instance."""

    name = "dp"

    def wrap_model(self, model: nn.Module, ctx: StrategyContext) -> nn.Module:
        model = self.prepare(model, ctx)
        if ctx.device.type != "cuda":
            return model
        return nn.DataParallel(model)

    def build_optimizer(self, model: nn.Module, factory: OptimizerFactory, ctx: StrategyContext) -> torch.optim.Optimizer:
        return super().build_optimizer(_inner(model), factory, ctx)

    def state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]:
        return super().state_dict(_inner(model), optimizer)  # DataParallel's `module.` stays out

    def load_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, state: dict[str, Any]) -> None:
        super().load_state_dict(_inner(model), optimizer, state)
