"""Functions the multi-process tests run in each rank (via tests/runtime/spawn.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

GLOBAL_BATCH = 8


class Net(nn.Module):
    """Tiny MLP with a ModuleList, so FSDP2 shards per block."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([nn.Linear(16, 16) for _ in range(2)])
        self.out = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.inp(x))
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.out(x)


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 + step)
    return torch.randn(GLOBAL_BATCH, 8, generator=gen), torch.randn(GLOBAL_BATCH, 4, generator=gen)


def full_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    return {k: v.float() for k, v in sd.items()}


def digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for key in sorted(tensors):
        h.update(key.encode())
        h.update(tensors[key].detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def _opt(params: Any) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=1e-2)


def reference(steps: int, accum: int = 1, clip: float | None = None) -> dict[str, Any]:
    """Single process, whole global batch: the losses every strategy must reproduce."""
    torch.manual_seed(0)
    model = Net()
    opt = _opt(model.parameters())
    losses = []
    for step in range(steps):
        x, y = batch(step)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {"losses": losses, "weights": {k: v.tolist() for k, v in model.state_dict().items()}}


def train(strategies: list[str], precision: str = "fp32", steps: int = 3, accum: int = 1,
          clip: float | None = None) -> dict[str, Any]:
    """Train Net under each strategy on this rank's slice of the global batch."""
    from sm_dist import runtime
    from sm_dist.runtime.strategies import get_strategy

    out: dict[str, Any] = {}
    with runtime.init(strategy=strategies[0], precision=precision, seed=0) as ctx:
        for name in strategies:
            ctx.strategy = get_strategy(name)
            torch.manual_seed(ctx.rank)  # different local init: wrap_model must make them identical
            model = ctx.wrap_model(Net())
            opt = ctx.build_optimizer(model, _opt)
            losses = []
            per_rank = GLOBAL_BATCH // ctx.world_size // accum
            for step in range(steps):
                x, y = batch(step)
                xs, ys = x.split(per_rank), y.split(per_rank)
                total = torch.zeros(())
                for micro in range(accum):
                    idx = ctx.rank * accum + micro
                    with ctx.no_sync(model, enabled=micro < accum - 1), ctx.autocast():
                        loss = nn.functional.mse_loss(model(xs[idx]).float(), ys[idx]) / accum
                        ctx.backward(loss)
                    total += loss.detach().float()
                if clip is not None:
                    ctx.clip_grad_norm_(model, clip, opt)
                ctx.step(opt)
                opt.zero_grad()
                dist.all_reduce(total)
                losses.append(total.item() / ctx.world_size)
            local = {n: p.detach().to_local() if hasattr(p, "to_local") else p.detach()
                     for n, p in model.named_parameters()}
            out[name] = {"losses": losses, "local_digest": digest(local),
                         "weights": {k: v.tolist() for k, v in full_weights(model).items()}}
    return out
