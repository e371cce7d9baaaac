"""ddp: DistributedDataParallel — a full replica per process, gradients all-reduced."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from torch import nn
from torch.nn.parallel import DistributedDataParallel

from sm_dist.runtime.strategies.base import Strategy

if TYPE_CHECKING:
    from sm_dist.runtime.context import RunContext


class DDPStrategy(Strategy):
    """DDP broadcasts rank 0's weights at wrap time, so every replica starts identical."""

    name = "ddp"

    def wrap_model(self, model: nn.Module, ctx: RunContext) -> nn.Module:
        model = self.prepare(model, ctx)
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=device_ids)

    @contextlib.contextmanager
    def no_sync(self, model: nn.Module) -> Iterator[None]:
        with model.no_sync():
            yield
