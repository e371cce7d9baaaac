"""A torchrun script whose training ends normally, then one rank ends badly once (the first run):
`--how kill`: rank 1 is killed (SIGKILL) after its last collective, once every other rank has
finished; `--how abort`: rank 1 aborts at interpreter exit (as a gloo thread destructed during
finalization does: exit code -6), after its script finished."""

import argparse
import atexit
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--how", choices=["kill", "abort"], required=True)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()
dist.init_process_group("gloo")
total = torch.zeros(1)
for _ in range(args.steps):
    step = torch.ones(1)
    dist.all_reduce(step)
    total += step
model_dir = Path(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
if dist.get_rank() == 0:
    torch.save({"total": total}, model_dir / "model.pt")
once = model_dir / f"ended-badly-{dist.get_rank()}"  # the host's own folder: kept across in-job restarts
if dist.get_rank() == 1 and not once.exists():
    once.touch()
    if args.how == "abort":
        atexit.register(os.abort)
    else:
        dist.destroy_process_group()
        time.sleep(3)  # rank 0 has finished its script by now
        os.kill(os.getpid(), signal.SIGKILL)
print("done")
