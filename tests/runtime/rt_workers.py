"""Functions the multi-process tests run in each rank (via tests/runtime/spawn.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
)

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
    return {k: v.detach().float().clone() for k, v in sd.items()}


def digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for key in sorted(tensors):
        h.update(key.encode())
        h.update(tensors[key].detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


OPTIMIZERS = {
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2),
    "sgd": lambda params: torch.optim.SGD(params, lr=0.2),  # clipping changes SGD's step (not Adam's much)
}


def reference(steps: int, clip: float | None = None, optimizer: str = "adamw") -> dict[str, Any]:
    """Single process, whole global batch: the losses every strategy must reproduce."""
    torch.manual_seed(0)
    model = Net()
    opt = OPTIMIZERS[optimizer](model.parameters())
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


def train(runs: list[list[str]], steps: int = 3, accum: int = 1, clip: float | None = None,
          optimizer: str = "adamw") -> dict[str, Any]:
    """Train Net for each [strategy, precision] on this rank's slice of the global batch."""
    from sm_dist import runtime

    out: dict[str, Any] = {}
    with runtime.init(strategy=runs[0][0], precision=runs[0][1], seed=0) as ctx:
        for name, precision in runs:
            _switch(ctx, name, precision)
            torch.manual_seed(ctx.rank)  # different local init: wrap_model must make them identical
            model = ctx.wrap_model(Net())
            opt = ctx.build_optimizer(model, OPTIMIZERS[optimizer])
            losses, unsynced = [], []
            for step in range(steps):
                losses.append(_step(ctx, model, opt, step, accum, clip, unsynced))
            local = {n: p.detach().to_local() if hasattr(p, "to_local") else p.detach()
                     for n, p in model.named_parameters()}
            out[f"{name}/{precision}"] = {
                "losses": losses, "local_digest": digest(local), "unsynced_grad_digest": unsynced[:1],
                "weights": {k: v.tolist() for k, v in full_weights(model).items()},
            }
        out["launcher"] = ctx.env.launcher
    return out


def _switch(ctx: Any, name: str, precision: str) -> None:
    from sm_dist.runtime.precision import PrecisionPlugin
    from sm_dist.runtime.strategies import get_strategy
    from sm_dist.vocab import Precision

    ctx.strategy = get_strategy(name)
    ctx.precision = Precision(precision)
    ctx.amp = PrecisionPlugin(ctx.precision, ctx.device.type)


def _step(ctx: Any, model: nn.Module, opt: Any, step: int, accum: int, clip: float | None,
          unsynced: list[str]) -> float:
    per_rank = GLOBAL_BATCH // ctx.world_size // accum
    x, y = batch(step)
    xs, ys = x.split(per_rank), y.split(per_rank)
    total = torch.zeros(())
    for micro in range(accum):
        idx = ctx.rank * accum + micro
        with ctx.no_sync(model, enabled=micro < accum - 1):
            with ctx.autocast():
                loss = nn.functional.mse_loss(model(xs[idx]).float(), ys[idx]) / accum
            ctx.backward(loss)
        if micro < accum - 1 and not unsynced:
            grads = {n: (p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad)
                     for n, p in model.named_parameters() if p.grad is not None}
            unsynced.append(digest(grads))
        total += loss.detach().float()
    if clip is not None:
        ctx.clip_grad_norm_(model, clip, opt)
    ctx.step(opt)
    opt.zero_grad()
    dist.all_reduce(total)
    return total.item() / ctx.world_size


def roundtrip(pairs: list[list[str]], folder: str, steps: int = 2) -> dict[str, Any]:
    """Train under strategy A, save with DCP, load into strategy B and into a plain Net.

    Returns per pair: keys of A's state, losses of A continuing vs B continuing after the load,
    and (rank 0) whether the plain module got exactly A's weights.
    """
    import torch.distributed.checkpoint as dcp

    from sm_dist import runtime

    out: dict[str, Any] = {}
    with runtime.init(strategy="ddp", seed=0) as ctx:
        for i, (save_as, load_as) in enumerate(pairs):
            save_name, save_prec = save_as.split("/")
            load_name, load_prec = load_as.split("/")
            _switch(ctx, save_name, save_prec)
            model_a = ctx.wrap_model(Net())
            opt_a = ctx.build_optimizer(model_a, OPTIMIZERS["adamw"])
            for step in range(steps):
                _step(ctx, model_a, opt_a, step, 1, None, [])
            state = ctx.state_dict(model_a, opt_a)
            path = f"{folder}/ckpt{i}"
            dcp.save(state, checkpoint_id=path)
            weights_a = full_weights(model_a)
            cont_a = [_step(ctx, model_a, opt_a, steps + k, 1, None, []) for k in range(2)]
            _switch(ctx, load_name, load_prec)
            torch.manual_seed(123)
            model_b = ctx.wrap_model(Net())
            opt_b = ctx.build_optimizer(model_b, OPTIMIZERS["adamw"])
            target = ctx.state_dict(model_b, opt_b)
            dcp.load(target, checkpoint_id=path)
            ctx.load_state_dict(model_b, opt_b, target)
            cont_b = [_step(ctx, model_b, opt_b, steps + k, 1, None, []) for k in range(2)]
            plain_ok = None
            if ctx.rank == 0:
                plain = Net()
                plain_state = {"model": plain.state_dict()}
                dcp.load(plain_state, checkpoint_id=path, no_dist=True)
                plain.load_state_dict(plain_state["model"], strict=True)
                atol = 1e-2 if save_prec == "mixed" else 1e-6  # fp32 masters vs bf16 working copy
                plain_ok = all(torch.allclose(plain.state_dict()[k].float(), v, atol=atol)
                               for k, v in weights_a.items())
            out[f"{save_as}->{load_as}"] = {
                "model_keys": sorted(state["model"]), "optim_keys": sorted(state["optim"].get("state", {})),
                "cont_a": cont_a, "cont_b": cont_b, "plain_ok": plain_ok,
            }
            ctx.barrier()
    return out


def metrics() -> dict[str, Any]:
    """AvgMetric over unequal sample counts, and rank-0-only metric lines."""
    import io

    from sm_dist import runtime

    with runtime.init(seed=0) as ctx:
        metric = runtime.AvgMetric()
        if ctx.rank == 0:
            metric.update(1.0, n=3)  # 3 samples with mean 1.0
        else:
            metric.update(torch.tensor(5.0), n=1)  # 1 sample with mean 5.0
        empty = runtime.AvgMetric().compute()
        stream = io.StringIO()
        line = runtime.log_metrics(7, {"loss": metric.compute()}, stream=stream)
        return {"mean": metric.compute(), "empty_is_nan": empty != empty, "line": line,
                "printed": stream.getvalue()}


def plain_mlp() -> nn.Module:
    """A model given without an input: measure-memory drives it with synthetic gradients."""
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))


def embedding_heavy() -> nn.Module:
    """~13M parameters, 98% of them in one tensor: zero1 cannot split it evenly."""
    return nn.Sequential(nn.Embedding(50_000, 256), nn.Linear(256, 256), nn.Linear(256, 256))
