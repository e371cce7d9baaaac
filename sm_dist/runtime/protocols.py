"""The duck types the runtime's parts pass each other, written once.

torch is imported only for the type checker: the checkpoint storages and config import this
module without torch (tests/checkpoint/test_config.py checks that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn

    from sm_dist.container.env import RunEnv
    from sm_dist.vocab import Precision

#: What a script gives for its optimizer: `factory(params) -> Optimizer` (strategies wrap it).
OptimizerFactory = Callable[[Iterable["nn.Parameter"]], "torch.optim.Optimizer"]


class RunIdentity(Protocol):
    """Where this process stands in the job: a RunEnv or a RunContext (both have these)."""

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...


class Stateful(Protocol):
    """An object the checkpointer saves and restores through its own state dict: an LR scheduler,
    a grad scaler, the resumable sampler or loader."""

    def state_dict(self) -> Mapping[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class StateStrategy(Protocol):
    """What the checkpointer needs of a strategy: a state dict {"model", "optim"} out and back in.

    Every plug-in of `sm_dist.runtime.strategies` is one, so is the checkpointer's DcpStateAdapter
    (raw DDP/FSDP2 models). `sharded`: the state is DTensor shards, saved per rank with DCP.
    """

    @property
    def sharded(self) -> bool: ...

    def state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, Any]: ...

    def load_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None,
                        state: dict[str, Any]) -> None: ...



class StrategyContext(Protocol):
    """What a strategy plug-in reads of the run it wraps the model for: a `RunContext` is one
    (`sm_dist.runtime.context` imports the strategies, so they name this instead of it)."""

    @property
    def env(self) -> RunEnv: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def precision(self) -> Precision: ...

    @property
    def world_size(self) -> int: ...


__all__ = ["OptimizerFactory", "RunIdentity", "StateStrategy", "Stateful", "StrategyContext"]
