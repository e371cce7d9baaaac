"""Collective helpers the strategy plug-ins share, one floor below them.

`base` (the Strategy defaults) and `master_weights` (fp32 masters for "mixed") both need these.
They live here, importing neither, so that base can import master_weights without a circle.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor


def clip_global_grad_norm_(parameters: Iterable[nn.Parameter], max_norm: float) -> torch.Tensor:
    """Clip by the norm over *all* ranks' gradient shards.

    For DTensor (sharded) gradients the local squared norms are reduced over the mesh by
    `full_tensor()`; for replicated gradients every rank already holds the whole gradient.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    with torch.no_grad():
        norms = [torch.linalg.vector_norm(g, dtype=torch.float32) for g in grads]
        total = torch.linalg.vector_norm(torch.stack([_full(n) for n in norms]))
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:  # scale the local shard: the same factor on every rank
            (g.to_local() if isinstance(g, DTensor) else g).mul_(coef.to(g.dtype))
    return total


def _full(norm: torch.Tensor) -> torch.Tensor:
    """A shard's norm (DTensor, partial over the mesh) -> the global norm as a plain tensor."""
    return norm.full_tensor() if isinstance(norm, DTensor) else norm


@torch.no_grad()
def init_optimizer_state_(optimizer: torch.optim.Optimizer, params: list[torch.Tensor]) -> None:
    """Create the optimizer's per-parameter state without changing any weight.

    A checkpoint template made before the first step would have no optimizer state to load
    into. As torch.distributed.checkpoint.state_dict does, step once with zero gradients and
    lr = 0. Collective for optimizers whose step communicates: call it on every rank.
    """
    saved = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        group["lr"] = 0.0 if not isinstance(group["lr"], torch.Tensor) else torch.zeros_like(group["lr"])
    for p in params:
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for group, lr in zip(optimizer.param_groups, saved):
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)


def any_rank(flag: bool) -> bool:
    """True if `flag` is True on any rank (a MAX all-reduce; the local flag without a group)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return flag
    value = torch.tensor([int(flag)], device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def broadcast_module_(model: nn.Module, src: int = 0) -> None:
    """Copy rank `src`'s parameters and buffers to every rank (identical initial weights)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            dist.broadcast(tensor.data, src=src)


__all__ = ["any_rank", "broadcast_module_", "clip_global_grad_norm_", "init_optimizer_state_"]
