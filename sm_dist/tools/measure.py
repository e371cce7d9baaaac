"""What one rank really holds in parameters, gradients and optimizer states (torch side).

Run as `python -m sm_dist.tools.measure ...` by `sm-dist measure-memory` in each of N gloo
processes: it builds the model, wraps it with the strategy, runs a few real steps and counts
the bytes of the *unique storages* behind the local parameters, gradients and optimizer states
(DTensors by their local shard). The count is taken after optimizer.step() and before
zero_grad(): the point where only persistent state is held (FSDP has resharded, autocast
caches are gone, gradients still exist), which is what the estimator's params/grads/optimizer
columns describe (docs/ARCHITECTURE.md, memory accounting).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from sm_dist.errors import ConfigError, SmDistError

if TYPE_CHECKING:
    from sm_dist.runtime.context import RunContext

#: Tokens per sample and samples per rank for preset models: enough for a real step, small
#: enough for CPU. Memory of params/grads/optimizer does not depend on them.
BATCH, SEQ = 2, 32
#: AdamW, the optimizer the estimator assumes by default (2 states per parameter).
LR = 1e-4


def tiny_gpt(layers: int = 4, hidden: int = 512, heads: int = 8, vocab: int = 256) -> tuple[nn.Module, Any]:
    """A ~12.7M-parameter GPT (small vocabulary, many similar tensors) and a token batch.

    Many tensors of similar size let ZeroRedundancyOptimizer's whole-tensor partition come
    close to an even split, so the comparison with the estimator's Ψ/N is meaningful.
    """
    from sm_dist.runtime.models.gpt import GPT, GPTConfig

    cfg = GPTConfig(n_layer=layers, n_embd=hidden, n_head=heads, vocab_size=vocab, seq_len=SEQ)
    return GPT(cfg), torch.randint(0, vocab, (BATCH, SEQ), generator=torch.Generator().manual_seed(0))


def build_model(spec: str, layers: int | None = None) -> tuple[nn.Module, Any]:
    """(module, example input or None) from "module:function" or an estimator preset name."""
    if ":" in spec:
        module_name, _, func = spec.partition(":")
        try:
            made = getattr(importlib.import_module(module_name), func)()
        except (ImportError, AttributeError) as exc:
            raise ConfigError("model", spec, f"cannot load module:function ({exc})") from None
        model, batch = made if isinstance(made, tuple) else (made, None)
        if not isinstance(model, nn.Module):
            raise ConfigError("model", spec, "the function must return an nn.Module or (nn.Module, input)")
        return model, batch
    from sm_dist.estimator.models import preset
    from sm_dist.runtime.models.gpt import GPT, GPTConfig

    shape = preset(spec)
    cfg = GPTConfig.from_shape(layers=layers or shape.layers, hidden=shape.hidden, heads=shape.heads,
                               vocab=shape.vocab, seq_len=shape.seq_len)
    tokens = torch.randint(0, shape.vocab, (BATCH, min(SEQ, shape.seq_len)), generator=torch.Generator().manual_seed(0))
    return GPT(cfg), tokens


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def storage_bytes(tensors: Iterable[torch.Tensor], seen: set[int]) -> int:
    """Bytes of the storages behind `tensors` not already in `seen` (shared storages count once)."""
    total = 0
    for tensor in tensors:
        storage = _local(tensor).untyped_storage()
        if storage.data_ptr() in seen or storage.nbytes() == 0:
            continue
        seen.add(storage.data_ptr())
        total += storage.nbytes()
    return total


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every tensor the optimizer keeps: its states, plus fp32 masters of the mixed wrapper."""
    inner = getattr(optimizer, "optim", None) or getattr(optimizer, "inner", None) or optimizer
    tensors = [v for state in inner.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
    if inner is not optimizer and hasattr(optimizer, "inner"):  # MasterWeightOptimizer
        tensors += [p for group in inner.param_groups for p in group["params"]]
    return tensors


def held_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """{"params", "grads", "optimizer"} bytes held by this rank."""
    seen: set[int] = set()
    params = list(model.parameters())
    return {
        "params": storage_bytes(params, seen),
        "grads": storage_bytes([p.grad for p in params if p.grad is not None], seen),
        "optimizer": storage_bytes(optimizer_tensors(optimizer), seen),
    }


def _loss(output: object) -> torch.Tensor:
    """A scalar to backpropagate from a model's output (a tensor, or a tuple whose first item is one)."""
    first: torch.Tensor = output[0] if isinstance(output, (tuple, list)) else output
    return first.float().pow(2).mean()


def _train_step(ctx: RunContext, model: nn.Module, opt: torch.optim.Optimizer, batch: object) -> None:
    if batch is None:  # no input: synthetic gradients, same shape and placement as the params
        for p in model.parameters():
            p.grad = torch.randn_like(p) * 1e-3
    else:
        with ctx.autocast():
            loss = _loss(model(batch))
        ctx.backward(loss)
    ctx.step(opt)


def measure_rank(model_spec: str, strategies: list[str], precision: str, steps: int,
                 layers: int | None = None) -> dict[str, Any]:
    """For each strategy in turn: build, wrap, train `steps` steps, count what this rank holds.

    One process group serves every strategy (start-up dominates on CPU); each model and
    optimizer is dropped before the next strategy builds its own.
    """
    import gc

    from sm_dist import runtime
    from sm_dist.estimator.models import count_module_params
    from sm_dist.runtime.strategies import get_strategy

    held: dict[str, dict[str, int]] = {}
    with runtime.init(strategy=strategies[0], precision=precision, seed=0) as ctx:
        for name in strategies:
            ctx.strategy = get_strategy(name)
            model, batch = build_model(model_spec, layers)
            params, buffers = count_module_params(model)
            largest = max((p.numel() for p in model.parameters()), default=0)
            units = [sum(p.numel() for p in b.parameters()) for m in model.modules()
                     if isinstance(m, nn.ModuleList) for b in m]
            model = ctx.wrap_model(model)
            opt = ctx.build_optimizer(model, lambda ps: torch.optim.AdamW(ps, lr=LR))
            for step in range(steps):
                if step:
                    opt.zero_grad(set_to_none=True)
                _train_step(ctx, model, opt, batch)
            held[name] = held_bytes(model, opt)
            del model, opt, batch
            gc.collect()
        return {"rank": ctx.rank, "param_count": params, "buffers_bytes": buffers,
                "unit_params": max(units) if units else None, "largest_tensor_params": largest, "held": held}


def measure_activations(model_spec: str, precision: str, checkpointing: str, layers: int | None = None) -> dict[str, Any]:
    """One process: saved-tensor bytes per layer of the model's forward (sm_dist.tools.saved_tensors),
    with the shape the estimator reads from the same module and the batch it ran on."""
    from sm_dist.estimator.hf_config import shape_of_module
    from sm_dist.estimator.models import count_module_params
    from sm_dist.tools.saved_tensors import measure_saved

    model, batch = build_model(model_spec, layers)
    shape, how = shape_of_module(model, count_module_params(model)[0])
    if batch is None:  # token ids over the vocabulary the shape names
        batch = torch.randint(0, shape.vocab, (BATCH, min(SEQ, shape.seq_len)), generator=torch.Generator().manual_seed(0))
    if not isinstance(batch, torch.Tensor) or batch.dim() < 2:
        raise ConfigError("model", model_spec, "activations need a (batch, sequence, ...) tensor input; return "
                          "(model, input) from the function")
    saved = measure_saved(model, batch, precision=precision, checkpointing=checkpointing)
    return {"shape": shape._asdict(), "shape_source": how, "micro_batch": int(batch.shape[0]),
            "seq_len": int(batch.shape[1]), "per_layer": list(saved.per_layer), "other": saved.other,
            "recompute": saved.recompute, "total": saved.total}


def main(argv: list[str] | None = None) -> None:
    """Worker entry point: measure this rank (or, with --activations, saved tensors) and write JSON to --out."""
    parser = argparse.ArgumentParser(prog="python -m sm_dist.tools.measure")
    parser.add_argument("--model", required=True)
    parser.add_argument("--strategy", default="ddp", help="one or a comma list")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--activations", default=None, help="none, selective or full: measure saved tensors instead")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        if args.activations:
            result = measure_activations(args.model, args.precision, args.activations, args.layers)
        else:
            result = measure_rank(args.model, args.strategy.split(","), args.precision, args.steps, args.layers)
    except SmDistError as exc:  # one readable line for the parent to relay
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(exc.exit_code) from None
    Path(args.out).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
