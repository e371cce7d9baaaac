"""What one process of the check kit does: train with each strategy, sync BatchNorm, scale fp16.

Run in rank processes started by `sm_dist.tools.selfcheck.spawn` (torchrun-style variables,
a free port), each function returns a JSON-able dict the parent compares across ranks and with
the estimator. Timing brackets every step with a device synchronisation, so it is wall time of
whole steps (forward, backward, collectives, optimizer).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn

from sm_dist.estimator.shape import ModelShape
from sm_dist.tools.selfcheck.models import from_shape, loss_of, tokens

if TYPE_CHECKING:
    from sm_dist.runtime.context import RunContext

#: AdamW's learning rate: large enough for a fixed batch's loss to fall within a few steps.
LR = 1e-3


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _checksum(model: nn.Module) -> float:
    """Sum of every full parameter (DTensor shards gathered: a collective), in float64."""
    total = 0.0
    for p in model.parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        total += float(full.detach().double().sum())
    return total


def timed_steps(ctx: RunContext, model: nn.Module, opt: torch.optim.Optimizer, batch: torch.Tensor, warmup: int,
                 steps: int) -> tuple[list[float], list[float]]:
    """(losses, seconds) of warmup + steps training steps on one fixed batch; seconds of the timed ones."""
    losses, seconds = [], []
    for step in range(warmup + steps):
        _sync(ctx.device)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)  # at the start: the grads of the last step stay, as measure-memory counts them
        with ctx.autocast():
            loss = loss_of(model(batch), batch)
        ctx.backward(loss)
        ctx.step(opt)
        losses.append(float(loss.detach()))
        _sync(ctx.device)
        if step >= warmup:
            seconds.append(time.perf_counter() - start)
    return losses, seconds


def strategy_run(ctx: RunContext, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Build the check model, wrap it with strategy `name`, train, and report what this rank saw."""
    from sm_dist.estimator.models import count_module_params
    from sm_dist.runtime.strategies import get_strategy
    from sm_dist.tools.measure import held_bytes

    ctx.strategy = get_strategy(name)
    torch.manual_seed(0)  # every rank builds the same weights
    module = from_shape(_shape(config))
    params, buffers = count_module_params(module)
    largest = max(p.numel() for p in module.parameters())
    units = [sum(p.numel() for p in b.parameters()) for m in module.modules() if isinstance(m, nn.ModuleList) for b in m]
    if ctx.device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(ctx.device)
    model = ctx.wrap_model(module)
    opt = ctx.build_optimizer(model, lambda ps: torch.optim.AdamW(ps, lr=LR))
    batch = tokens(_shape(config), config["micro_batch"], config["seq_len"], ctx.rank, ctx.device)
    losses, seconds = timed_steps(ctx, model, opt, batch, config["warmup"], config["steps"])
    out: dict[str, Any] = {
        "losses": losses, "step_seconds": statistics.median(seconds), "held": held_bytes(model, opt),
        "param_count": params, "buffers_bytes": buffers, "largest_tensor_params": largest,
        "unit_params": max(units) if units else None,
    }
    if ctx.device.type == "cuda":
        out["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(ctx.device)
        out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(ctx.device)
    out["checksum"] = _checksum(model)
    del model, opt, batch, module
    gc.collect()
    if ctx.device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def _shape(config: Mapping[str, Any]) -> ModelShape:
    return ModelShape(**config["shape"])


def strategies(config: Mapping[str, Any]) -> dict[str, Any]:
    """Every strategy of `config` in turn on one process group (start-up dominates on CPU)."""
    from sm_dist import runtime

    names = list(config["strategies"])
    with runtime.init(strategy=names[0], precision=config["precision"], seed=0) as ctx:
        results = {name: strategy_run(ctx, name, config) for name in names}
        return {"rank": ctx.rank, "world_size": ctx.world_size, "backend": dist.get_backend(),
                "device": str(ctx.device), "results": results}


def sync_batchnorm(config: Mapping[str, Any]) -> dict[str, Any]:
    """DDP with sync_batchnorm=True: after one training forward, BatchNorm's running statistics are
    those of the batch of every rank together (computed here from all ranks' inputs)."""
    from sm_dist import runtime

    with runtime.init(strategy="ddp", precision="fp32", seed=0, sync_batchnorm=True) as ctx:
        model = ctx.wrap_model(nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16)))
        inner = getattr(model, "module", model)
        x = torch.randn(32, 8, generator=torch.Generator().manual_seed(100 + ctx.rank)).to(ctx.device)
        model.train()
        model(x)
        with torch.no_grad():
            local = inner[0](x)
            gathered = [torch.empty_like(local) for _ in range(ctx.world_size)]
            dist.all_gather(gathered, local)
            every = torch.cat(gathered)
        bn = inner[1]
        momentum = bn.momentum if bn.momentum is not None else 0.1
        want_mean = momentum * every.mean(0)
        want_var = (1 - momentum) * torch.ones_like(bn.running_var) + momentum * every.var(0, unbiased=True)
        return {"rank": ctx.rank, "world_size": ctx.world_size, "module": type(bn).__name__,
                "mean_error": float((bn.running_mean - want_mean).abs().max()),
                "var_error": float((bn.running_var - want_var).abs().max())}


def grad_scaler(device_type: str) -> dict[str, Any]:
    """sm_dist's fp16 path (PrecisionPlugin, amp): forced to fp16 with a GradScaler where the GPU
    would pick bf16. Finite steps change the weights and keep the scale; an inf gradient skips
    the step and halves the scale."""
    from sm_dist.runtime.precision import PrecisionPlugin
    from sm_dist.vocab import Precision

    plugin = PrecisionPlugin(Precision.AMP, device_type)
    forced = plugin.scaler is None
    if forced:  # the path a GPU without bf16 (V100, T4) takes
        plugin.dtype, plugin.scaler = torch.float16, torch.amp.GradScaler(device_type)
    assert plugin.scaler is not None
    torch.manual_seed(0)
    model = nn.Linear(64, 64).to(device_type)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 64).to(device_type)

    def step(poison: bool) -> tuple[bool, float]:
        before = model.weight.detach().clone()
        opt.zero_grad(set_to_none=True)
        with plugin.autocast():
            loss = model(x).float().pow(2).mean()
        plugin.backward(loss)
        if poison:
            assert model.weight.grad is not None
            model.weight.grad[0, 0] = float("inf")
        plugin.step(opt)
        return not torch.equal(before, model.weight.detach()), float(loss.detach())

    scale = plugin.scaler.get_scale()
    finite = [step(False) for _ in range(3)]
    finite_scale = plugin.scaler.get_scale()
    changed, _ = step(True)
    return {"device": device_type, "forced_fp16": forced, "autocast_dtype": str(plugin.dtype),
            "finite_steps_changed_weights": all(c for c, _ in finite), "scale_after_finite_steps": finite_scale,
            "initial_scale": scale, "inf_step_changed_weights": changed, "scale_after_inf": plugin.scaler.get_scale()}


__all__ = ["LR", "grad_scaler", "strategies", "strategy_run", "sync_batchnorm", "timed_steps"]
