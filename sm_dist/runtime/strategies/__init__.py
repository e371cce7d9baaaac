"""Strategy plug-ins, looked up by name and imported on demand.

One module per strategy; each defines a subclass of :class:`base.Strategy` with a handful of
methods (wrap model, build optimizer, state dict in/out, no_sync, clipping). The names are the
ones of :class:`sm_dist.vocab.Strategy`, which the estimator uses for its formulas too.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sm_dist.vocab import Strategy as StrategyName
from sm_dist.vocab import parse_enum

if TYPE_CHECKING:
    from torch import nn

    from sm_dist.runtime.strategies.base import Strategy

#: strategy name -> "module:class"; a plain mapping, imported only when asked for.
REGISTRY: dict[str, str] = {
    "dp": "sm_dist.runtime.strategies.dp:DataParallelStrategy",
    "ddp": "sm_dist.runtime.strategies.ddp:DDPStrategy",
    "zero1": "sm_dist.runtime.strategies.zero1:Zero1Strategy",
    "zero2": "sm_dist.runtime.strategies.zero2:Zero2Strategy",
    "fsdp": "sm_dist.runtime.strategies.fsdp:FSDPStrategy",
    "hsdp": "sm_dist.runtime.strategies.hsdp:HSDPStrategy",
}


def get_strategy(name: str | StrategyName, *, sync_batchnorm: bool = False, reshard_after_forward: bool | None = None,
                 shard_units: Iterable[type[nn.Module]] | None = None) -> Strategy:
    """An instance of the strategy called `name` (ConfigError with a suggestion if unknown)."""
    key = parse_enum(StrategyName, name, "strategy").value
    module_name, cls_name = REGISTRY[key].split(":")
    cls: type[Strategy] = getattr(importlib.import_module(module_name), cls_name)
    return cls(sync_batchnorm=sync_batchnorm, reshard_after_forward=reshard_after_forward, shard_units=shard_units)


__all__ = ["REGISTRY", "get_strategy"]
