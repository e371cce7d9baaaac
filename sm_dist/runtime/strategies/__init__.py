"""Strategy plug-ins, looked up by name and imported on demand.

One module per strategy; each defines a subclass of :class:`base.Strategy` with a handful of
methods (wrap model, build optimizer, state dict in/out, no_sync, clipping). The names are the
ones of :class:`sm_dist.vocab.Strategy`, which the estimator uses for its formulas too.

What a plug-in's state dict looks like (what the checkpointer saves and loads):

- `sharded = True` (zero2, fsdp, hsdp: FSDP2): DTensor state from
  `torch.distributed.checkpoint.state_dict`, saved by each rank with DCP;
- `sharded = False` (dp, ddp, zero1): the state is full and identical on every rank (plain tensors,
  FQN keys, the optimizer's `{"state": {fqn: ...}, "param_groups": [{"params": [fqn, ...]}]}`), so one
  copy is saved; zero1 gathers its partitions to build it, transiently the whole optimizer state.

Both are `{"model", "optim"}` without `module.` prefixes. Under `precision="mixed"`, dp/ddp/zero1's
model state holds the fp32 master weights (`master_weights`), not the bf16 working copy.
To add a strategy: a module here with a `base.Strategy` subclass, a line in `REGISTRY`, its name in
`sm_dist.vocab.Strategy`, and its formulas in the estimator (`sm_dist.estimator.memory`, `timing`).
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
