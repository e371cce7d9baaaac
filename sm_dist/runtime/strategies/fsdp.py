"""fsdp: FSDP2 `fully_shard` — parameters, gradients and optimizer states sharded (ZeRO-3).

Each "unit" (by default: every block in an nn.ModuleList, else every direct child with
parameters) is sharded on its own, then the root; a unit's parameters are all-gathered just
before its forward/backward and freed after (unless reshard_after_forward=False, which is
zero2). On CPU the mesh is always created explicitly on "cpu" (docs/PLATFORM.md §3.2: FSDP2 defaults to
CUDA and crashes with gloo on a GPU box otherwise).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from sm_dist.runtime.strategies.base import Strategy
from sm_dist.runtime.strategies.collectives import broadcast_module_
from sm_dist.vocab import Precision

if TYPE_CHECKING:
    from sm_dist.runtime.protocols import StrategyContext


class FSDPStrategy(Strategy):
    """Full sharding over all ranks; reshards after forward unless told otherwise."""

    name = "fsdp"
    sharded = True
    native_mixed = True
    default_reshard_after_forward = True

    def mesh(self, ctx: StrategyContext) -> DeviceMesh:
        """1-D mesh over every rank."""
        return init_device_mesh(ctx.device.type, (ctx.world_size,))

    def wrap_model(self, model: nn.Module, ctx: StrategyContext) -> nn.Module:
        model = self.prepare(model, ctx)
        broadcast_module_(model)  # every rank shards the same full weights
        reshard = self.reshard_after_forward
        options = dict(
            mesh=self.mesh(ctx),
            reshard_after_forward=self.default_reshard_after_forward if reshard is None else reshard,
        )
        if ctx.precision is Precision.MIXED:
            # bf16 working copy for compute, fp32 gradient reduction and fp32 sharded master
            options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for unit in self.units(model):
            fully_shard(unit, **options)
        fully_shard(model, **options)
        return model

    def units(self, model: nn.Module) -> list[nn.Module]:
        """Submodules sharded on their own, innermost first (fully_shard is applied bottom-up)."""
        if self.shard_units:
            chosen = [m for m in model.modules() if m is not model and isinstance(m, self.shard_units)]
        else:
            lists = [m for m in model.modules() if isinstance(m, nn.ModuleList)]
            chosen = [child for lst in lists for child in lst.children()]
            if not chosen:
                chosen = [c for c in model.children() if any(True for _ in c.parameters())]
        order = {id(m): i for i, m in enumerate(model.modules())}
        return sorted(chosen, key=lambda m: -order[id(m)])

    @contextlib.contextmanager
    def no_sync(self, model: nn.Module) -> Iterator[None]:
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
