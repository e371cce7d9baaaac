"""Throughput of the SimpleCNN trained with the sm_dist runtime (ddp) vs a hand-written DDP loop.

Run by hand: `/tmp/venv/bin/python tests/bench/bench_runtime_overhead.py [--rounds 20 --steps 20]`.
Starts 2 gloo processes on this machine; inside them both loops are built once on the same
data, warmed up, then timed in alternating chunks (raw, runtime, runtime, raw, ...) so that the
load of a shared machine hits both alike. A chunk's time is the slowest rank's. Prints one line per round
and, last, one JSON object: {"ratio": runtime/raw throughput over all chunks, ...} (goal >= 0.98).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH = 32  # samples per rank per step
RANKS = 2
WARMUP = 5
LOG_EVERY = 10


def _data(steps: int):
    """MNIST-shaped samples in memory, exactly enough for one epoch of WARMUP + steps steps."""
    import torch
    from torch.utils.data import TensorDataset

    n = (WARMUP + steps) * BATCH * RANKS
    gen = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 1, 28, 28, generator=gen), torch.randint(0, 10, (n,), generator=gen))


def _chunk_seconds(step_fn, first: int, steps: int) -> float:
    """Wall time of `steps` steps on the slowest rank (barriers outside the timed span)."""
    import torch
    import torch.distributed as dist

    dist.barrier()
    start = time.perf_counter()
    for i in range(first, first + steps):
        step_fn(i)
    elapsed = torch.tensor([time.perf_counter() - start])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return elapsed.item()


def raw_loop(steps: int):
    """What a user writes by hand: DDP, DistributedSampler, DataLoader, loss all-reduce to log."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    from sm_dist.runtime.models.cnn import SimpleCNN

    torch.manual_seed(0)
    model = DistributedDataParallel(SimpleCNN())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = _data(steps)
    loader = DataLoader(data, batch_size=BATCH, sampler=DistributedSampler(data, seed=0))
    batches = iter(loader)
    total, count = 0.0, 0

    def step(i: int) -> None:
        nonlocal total, count
        x, y = next(batches)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        total, count = total + loss.item() * len(y), count + len(y)
        if i % LOG_EVERY == 0:
            t = torch.tensor([total, float(count)], dtype=torch.float64)
            dist.all_reduce(t)
            if dist.get_rank() == 0:
                print(f"step={i} loss={t[0].item() / t[1].item():.4f}", file=open(os.devnull, "w"))

    return step


def runtime_loop(steps: int):
    """The same training with sm_dist.runtime (ddp, fp32)."""
    import torch

    from sm_dist import runtime
    from sm_dist.runtime.models.cnn import SimpleCNN

    ctx = runtime.init(strategy="ddp", precision="fp32", seed=0)  # joins the worker's group
    model = ctx.wrap_model(SimpleCNN())
    opt = ctx.build_optimizer(model, lambda p: torch.optim.AdamW(p, lr=1e-3))
    loader = runtime.build_dataloader(_data(steps), BATCH, ctx=ctx, seed=0)
    batches = iter(loader)
    metric = runtime.AvgMetric()
    sink = open(os.devnull, "w")

    def step(i: int) -> None:
        x, y = next(batches)
        with ctx.autocast():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        ctx.backward(loss)
        ctx.step(opt)
        opt.zero_grad()
        metric.update(loss, len(y))
        if i % LOG_EVERY == 0:
            runtime.log_metrics(i, {"loss": metric.compute()}, stream=sink)

    return step


def worker(rounds: int, steps: int, out: str) -> None:
    """Build both loops once, then alternate chunks of `steps` steps: raw, runtime, runtime, raw, ..."""
    import torch

    from sm_dist import runtime

    torch.set_num_threads(1)
    # The group is created (and torn down) by the runtime for both loops, outside the timing:
    # a bare destroy_process_group() at exit can abort in gloo's teardown (see context.shutdown).
    ctx = runtime.init(strategy="ddp", seed=0)
    total = WARMUP + rounds * steps
    loops = {"raw": raw_loop(total), "runtime": runtime_loop(total)}
    for step in loops.values():
        for i in range(WARMUP):
            step(i)
    rows = []
    for r in range(rounds):
        order = ["raw", "runtime"] if r % 2 == 0 else ["runtime", "raw"]
        seconds = {name: _chunk_seconds(loops[name], WARMUP + r * steps, steps) for name in order}
        rows.append({name: steps * BATCH * RANKS / sec for name, sec in seconds.items()})
    if ctx.rank == 0:
        Path(out).write_text(json.dumps(rows))
    ctx.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20, help="chunks per loop")
    parser.add_argument("--steps", type=int, default=20, help="steps per chunk")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if args.worker:
        worker(args.rounds, args.steps, args.out)
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "rows.json")
        procs = []
        for rank in range(RANKS):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(RANKS), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(RANKS),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
            cmd = [sys.executable, __file__, "--worker", "--rounds", str(args.rounds), "--steps", str(args.steps),
                   "--out", out]
            procs.append(subprocess.Popen(cmd, env=env))
        if any(p.wait() for p in procs):
            raise SystemExit("a worker failed")
        rows = json.loads(Path(out).read_text())
    for i, row in enumerate(rows):
        print(f"round {i}: raw {row['raw']:8.1f} samples/s   runtime {row['runtime']:8.1f} samples/s   "
              f"ratio {row['runtime'] / row['raw']:.3f}")
    raw = len(rows) / sum(1 / r["raw"] for r in rows)  # total samples / total time
    rt = len(rows) / sum(1 / r["runtime"] for r in rows)
    per_round = [r["runtime"] / r["raw"] for r in rows]
    best = max(r["runtime"] for r in rows) / max(r["raw"] for r in rows)  # least disturbed chunks
    print(json.dumps({"ratio": round(rt / raw, 4), "median_round_ratio": round(statistics.median(per_round), 4),
                      "best_chunk_ratio": round(best, 4), "raw_samples_per_s": round(raw, 1),
                      "runtime_samples_per_s": round(rt, 1), "rounds": len(rows), "steps_per_round": args.steps, "ranks": RANKS, "batch_per_rank": BATCH}))


if __name__ == "__main__":
    main()
