"""Benchmark: blocking vs background checkpoint saves of the same state, and restore time.

Run by hand: /tmp/venv/bin/python tests/bench/bench_checkpoint.py [--mib 100] [--repeats 3]
Prints the figures, then one JSON object on the last line. stall_ratio = how long save(...,
blocking=False) holds the training loop / how long a blocking save takes (goal <= 0.25).
loop_overhead_ratio also counts the slowdown of the training steps that run while the
background write competes for the same cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import torch
from torch import nn

from sm_dist.runtime.checkpoint import Checkpointer

WIDTH = 1024  # a Linear(1024, 1024) layer is 4 MiB of fp32 weights


def build(mib: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    """A model whose weights + AdamW state (3x the weights) total about `mib` MiB."""
    layers = max(1, round(mib / 12))
    model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(layers)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, optimizer


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    loss = model(torch.randn(8, WIDTH)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def steps_until_done(ckpt: Checkpointer, model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[int, float]:
    """Train while the background save runs; (steps, seconds)."""
    start, steps = time.perf_counter(), 0
    while ckpt.saving:
        train_step(model, optimizer)
        steps += 1
    return steps, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=100, help="approximate checkpoint size")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, optimizer = build(args.mib)
    train_step(model, optimizer)
    blocking, stalls, overheads, restores = [], [], [], []
    with tempfile.TemporaryDirectory() as root:
        ckpt = Checkpointer(uri=root, mode="local", keep=2, handle_signals=False)
        step = 0
        for _ in range(args.repeats):
            step += 1
            start = time.perf_counter()
            manifest = ckpt.save(step, model=model, optimizer=optimizer, blocking=True)
            blocking.append(time.perf_counter() - start)
            size_mib = sum(f.size for f in manifest.files.values()) / 2**20

            t0 = time.perf_counter()
            for _ in range(5):
                train_step(model, optimizer)
            per_step = (time.perf_counter() - t0) / 5

            step += 1
            start = time.perf_counter()
            ckpt.save(step, model=model, optimizer=optimizer, blocking=False)
            stalls.append(time.perf_counter() - start)
            steps, seconds = steps_until_done(ckpt, model, optimizer)
            ckpt.wait()
            overheads.append(stalls[-1] + max(0.0, seconds - steps * per_step))

            fresh, fresh_opt = build(args.mib)
            start = time.perf_counter()
            ckpt.resume(model=fresh, optimizer=fresh_opt)
            restores.append(time.perf_counter() - start)
        ckpt.close()
    result = {
        "checkpoint_mib": round(size_mib, 1),
        "blocking_save_s": round(statistics.median(blocking), 4),
        "async_stall_s": round(statistics.median(stalls), 4),
        "stall_ratio": round(statistics.median(stalls) / statistics.median(blocking), 4),
        "loop_overhead_ratio": round(statistics.median(overheads) / statistics.median(blocking), 4),
        "restore_s": round(statistics.median(restores), 4),
        "repeats": args.repeats,
    }
    for key, value in result.items():
        print(f"{key:>22}: {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
