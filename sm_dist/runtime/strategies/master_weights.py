"""Mixed precision with fp32 master weights, optionally partitioned: the ZeRO paper's stage 1.

The model holds bf16 working weights and receives bf16 gradients. This optimizer keeps an fp32
master copy — and the inner optimizer's (e.g. Adam's) fp32 states — only for the parameters
this rank *owns*: all of them for dp/ddp, a 1/N partition for zero1. A step copies the owned
gradients to fp32, steps the inner optimizer on the masters, writes the result back into the
bf16 weights, and the owner of each parameter broadcasts it to the others. torch has no such
wrapper (ZeroRedundancyOptimizer keeps states in the parameters' own dtype), hence this one.

State (full_state_dict) is complete and identical on every rank: {"model": fp32 masters by
FQN, "optim": {"state": {fqn: {...}}, "param_groups": [{..., "params": [fqn, ...]}]}} — the
layout torch.distributed.checkpoint.state_dict uses, so it loads into any strategy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from sm_dist.runtime.protocols import OptimizerFactory
from sm_dist.runtime.strategies.collectives import any_rank, init_optimizer_state_


def unwrap(model: nn.Module) -> nn.Module:
    """The user's module inside DDP / DataParallel wrappers (their `module.` is not in FQNs)."""
    while isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        model = model.module
    return model


def partition(sizes: list[int], world: int) -> list[int]:
    """Owner rank per parameter: largest first onto the least-loaded rank (deterministic)."""
    loads, owner = [0] * world, [0] * len(sizes)
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        rank = min(range(world), key=lambda r: (loads[r], r))
        owner[index] = rank
        loads[rank] += sizes[index]
    return owner


class MasterWeightOptimizer(torch.optim.Optimizer):
    """fp32 masters + inner optimizer for the owned parameters; param_groups are the model's."""

    def __init__(self, model: nn.Module, factory: OptimizerFactory, *, partitioned: bool) -> None:
        named = [(n, p) for n, p in unwrap(model).named_parameters() if p.requires_grad]
        self._names = [n for n, _ in named]
        world = dist.get_world_size() if partitioned and dist.is_initialized() else 1
        self._rank = dist.get_rank() if world > 1 else 0
        self._owner = partition([p.numel() for _, p in named], world)
        self._partitioned = world > 1
        self._owned = [(i, p, p.detach().float().clone()) for i, (_, p) in enumerate(named)
                       if self._owner[i] == self._rank]
        masters = [m for _, _, m in self._owned]
        self.inner = factory(masters) if masters else None
        probe = self.inner or factory([nn.Parameter(torch.zeros(1))])
        if len(probe.param_groups) != 1:
            raise ValueError("mixed precision supports optimizer factories that build one param group")
        hparams = {k: v for k, v in probe.param_groups[0].items() if k != "params"}
        super().__init__([p for _, p in named], hparams)

    def _sync_hparams(self) -> None:
        if self.inner is not None:
            for key, value in self.param_groups[0].items():
                if key != "params":
                    self.inner.param_groups[0][key] = value

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> None:
        """Update the owned fp32 masters, copy to bf16, broadcast from each owner."""
        if closure is not None:
            raise ValueError("closures are not supported with fp32 master weights")
        self._sync_hparams()
        for _, p, master in self._owned:
            master.grad = None if p.grad is None else p.grad.detach().float()
        if self.inner is not None:
            self.inner.step()
        for _, p, master in self._owned:
            p.copy_(master)
            master.grad = None
        if self._partitioned:
            params = self.param_groups[0]["params"]
            works = [dist.broadcast(p.data, src=self._owner[i], async_op=True) for i, p in enumerate(params)]
            for work in works:
                work.wait()

    def _owned_state(self) -> dict[str, Any]:
        out = {}
        for i, _, master in self._owned:
            state = self.inner.state.get(master, {}) if self.inner else {}
            out[self._names[i]] = (master.detach().cpu(), {k: _cpu(v) for k, v in state.items()})
        return out

    def full_state_dict(self) -> dict[str, Any]:
        """Complete state on every rank (gathers the partitions for zero1). Collective."""
        has_state = bool(self.inner.state) if self.inner is not None else False
        if not (any_rank(has_state) if self._partitioned else has_state):
            init_optimizer_state_(self, list(self.param_groups[0]["params"]))
        entries = self._owned_state()
        if self._partitioned:
            gathered: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, entries)
            entries = {k: v for part in gathered for k, v in part.items()}
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        return {
            "model": {name: entries[name][0] for name in self._names},
            "optim": {
                "state": {name: entries[name][1] for name in self._names if entries[name][1]},
                "param_groups": [{**group, "params": list(self._names)}],
            },
        }

    @torch.no_grad()
    def load_full_state_dict(self, state: dict[str, Any]) -> None:
        """Load a full state (from this class or from any strategy's full state dict)."""
        weights = state["model"]
        for name, p in zip(self._names, self.param_groups[0]["params"]):
            p.copy_(weights[name])
        for i, _, master in self._owned:
            master.copy_(weights[self._names[i]])
        optim = state.get("optim") or {}
        if optim.get("param_groups"):
            for key, value in optim["param_groups"][0].items():
                if key != "params":
                    self.param_groups[0][key] = value
            self._sync_hparams()
        if self.inner is not None:
            for i, _, master in self._owned:
                saved = optim.get("state", {}).get(self._names[i])
                if saved:
                    self.inner.state[master] = {k: _to(v, master.device) for k, v in saved.items()}


def _cpu(value: object) -> object:
    return value.detach().cpu().clone() if isinstance(value, torch.Tensor) else value


def _to(value: object, device: torch.device) -> object:
    if not isinstance(value, torch.Tensor):
        return value
    if value.dim() == 0 and value.device.type == "cpu":  # Adam's `step` stays a CPU scalar
        return value.clone()
    return value.detach().to(device=device, dtype=torch.float32).clone()


__all__ = ["MasterWeightOptimizer", "partition", "unwrap"]
