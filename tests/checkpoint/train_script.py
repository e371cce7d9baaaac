"""A small deterministic training run the checkpoint tests drive in real processes.

Every source of randomness is exercised (dropout: torch; input noise: python and numpy; data
order: the resumable sampler), so a resume is bit-identical only if all of them are restored.
Rank 0 appends JSON lines to --out: {"event": "resume", "step"}, {"event": "step", "step",
"loss"}, {"event": "final", "sha256"}. Run it under torchrun or with RANK/WORLD_SIZE/MASTER_*.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import signal
import sys
import time

import numpy as np
import torch
from torch import nn

from sm_dist import runtime
from sm_dist.runtime.checkpoint import Checkpointer

DATASET = 48  # samples per epoch
BATCH = 4  # per rank
FEATURES = 16


def sample(index: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(index)
    x = torch.randn(FEATURES, generator=gen)
    return x, (x[:4] * 2.0 - x[4:8]).detach()


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 4))


def state_sha(ctx: object, model: nn.Module, optimizer: torch.optim.Optimizer) -> str:
    """sha256 of the full model and optimizer state (DTensors gathered)."""
    state = ctx.strategy.state_dict(model, optimizer)
    digest = hashlib.sha256()

    def feed(prefix: str, tree: object) -> None:
        if isinstance(tree, dict):
            for key in sorted(tree, key=str):
                feed(f"{prefix}.{key}", tree[key])
        elif isinstance(tree, torch.Tensor):
            full = tree.full_tensor() if hasattr(tree, "full_tensor") else tree
            digest.update(prefix.encode() + full.detach().cpu().contiguous().numpy().tobytes())
        elif isinstance(tree, (list, tuple)):  # torch's set_state_dict turns tuples (betas) into lists
            for i, item in enumerate(tree):
                feed(f"{prefix}[{i}]", item)
        else:
            digest.update(f"{prefix}={tree!r}".encode())

    feed("", state)
    return digest.hexdigest()


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--strategy", default="ddp")
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--interval", type=int, default=4)
    p.add_argument("--uri", required=True)
    p.add_argument("--mode", default="local")
    p.add_argument("--out", required=True)
    p.add_argument("--kill-at", type=int, default=None, help="rank 1 SIGKILLs itself after this step (attempt 0)")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds per step (to signal a run mid-way)")
    p.add_argument("--async-checkpoint", action="store_true")
    return p.parse_args()


def emit(ctx: object, path: str, **event: object) -> None:
    if ctx.rank == 0:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event) + "\n")


def main() -> int:
    args = parse()
    logging.basicConfig(level=logging.INFO, format=f"rank{os.environ.get('RANK', '0')} %(name)s: %(message)s")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    with runtime.init(strategy=args.strategy, seed=0, timeout=60) as ctx:
        model = ctx.wrap_model(build_model())
        optimizer = ctx.build_optimizer(model, lambda params: torch.optim.AdamW(params, lr=1e-2))
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.7)
        sampler = runtime.ResumableDistributedSampler(DATASET, num_replicas=ctx.world_size, rank=ctx.rank, seed=3)
        ckpt = Checkpointer(ctx, uri=args.uri, mode=args.mode, keep=2, interval_steps=args.interval,
                            async_checkpoint=args.async_checkpoint)
        state = dict(model=model, optimizer=optimizer, scheduler=scheduler, sampler=sampler)
        resumed = ckpt.resume(**state)
        step = resumed.step if resumed else 0
        emit(ctx, args.out, event="resume", step=step, attempt=os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        while step < args.steps:
            indices = list(iter(sampler))
            if not indices:
                sampler.set_epoch(sampler.epoch + 1)
                continue
            for start in range(0, len(indices) - BATCH + 1, BATCH):
                xs, ys = zip(*(sample(i) for i in indices[start:start + BATCH]))
                x = torch.stack(xs) + random.random() * 0.01 + float(np.random.rand()) * 0.01
                loss = nn.functional.mse_loss(model(x), torch.stack(ys))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scheduler.step()
                sampler.advance(BATCH)
                step += 1
                emit(ctx, args.out, event="step", step=step, loss=loss.item())
                if args.kill_at == step and ctx.rank == 1 and ctx.env.restart_count == 0:
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(args.sleep)
                ckpt.maybe_save(step, epoch=sampler.epoch, **state)
                if step >= args.steps:
                    break
        ckpt.close()
        emit(ctx, args.out, event="final", step=step, sha256=state_sha(ctx, model, optimizer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
