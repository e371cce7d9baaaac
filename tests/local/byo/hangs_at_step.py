"""A plain torchrun DDP script whose last rank stops at one step, as a rank stuck in a data loader or
a branch only it takes would: it sleeps, and the other ranks wait in the next step's all-reduce.
Nothing in it knows about sm_dist. Rank 0 saves a snapshot into SM_CHECKPOINT_DIR after every step
and every rank resumes from it; `--once` hangs only the first time on its host (a marker in the
host's output folder), so the job can recover from the restart that follows."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def wait_forever(step):
    print(f"rank {dist.get_rank()} stops at step {step} at {time.time():.3f}", flush=True)
    while True:
        time.sleep(1)


def main(args):
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    snapshot = os.path.join(os.environ["SM_CHECKPOINT_DIR"], "snapshot.pt")
    start = 0
    if os.path.exists(snapshot):
        state = torch.load(snapshot, weights_only=True)
        model.module.load_state_dict(state["model"])
        start = state["step"]
        print(f"rank {rank} resumed after step {start} at {time.time():.3f}", flush=True)
    marker = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "hung-once")
    for step in range(start + 1, args.steps + 1):
        if rank == world - 1 and step == args.hang_step and not (args.once and os.path.exists(marker)):
            open(marker, "w").close()
            wait_forever(step)
        x = torch.randn(16, 8)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(args.step_sleep)
        if rank == 0:
            torch.save({"model": model.module.state_dict(), "step": step}, snapshot + ".tmp")
            os.replace(snapshot + ".tmp", snapshot)
            print(f"step {step} at {time.time():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--hang-step", type=int, default=5)
    parser.add_argument("--step-sleep", type=float, default=0.3)
    parser.add_argument("--once", action="store_true")
    main(parser.parse_args())
