"""FSDP2 with torch.distributed.checkpoint, in the style of PyTorch's "Getting Started with
Distributed Checkpoint (DCP)" recipe: `fully_shard` the model, an `AppState` (Stateful) holding the
model and optimizer through get_state_dict/set_state_dict, `dcp.save` into `step_N` folders under
the checkpoint folder every `--save-every` steps, `dcp.load` of the newest at start, a tqdm bar over
the steps on rank 0, the final weights in SM_MODEL_DIR. Nothing in it knows about sm_dist."""

import argparse
import os
import re
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.fsdp import fully_shard
from tqdm import tqdm


class AppState(Stateful):
    def __init__(self, model, optimizer, step=0):
        self.model, self.optimizer, self.step = model, optimizer, step

    def state_dict(self):
        model_state_dict, optimizer_state_dict = get_state_dict(self.model, self.optimizer)
        return {"model": model_state_dict, "optim": optimizer_state_dict, "step": self.step}

    def load_state_dict(self, state_dict):
        set_state_dict(self.model, self.optimizer, model_state_dict=state_dict["model"],
                       optim_state_dict=state_dict["optim"])
        self.step = state_dict["step"]


def latest_checkpoint(folder):
    """The newest complete step_N folder (DCP writes .metadata last), or None."""
    steps = [int(m.group(1)) for name in os.listdir(folder) if (m := re.fullmatch(r"step_(\d+)", name))
             and os.path.exists(os.path.join(folder, name, ".metadata"))] if os.path.isdir(folder) else []
    return os.path.join(folder, f"step_{max(steps)}") if steps else None


def main(args):
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    state = AppState(model, optimizer)
    latest = latest_checkpoint(args.checkpoint_dir)
    if latest:
        dcp.load({"app": state}, checkpoint_id=latest)
        print(f"Resumed from {latest} at step {state.step}")
    data = torch.Generator().manual_seed(1)
    inputs, targets = torch.randn(args.steps, 8, 16, generator=data), torch.randint(0, 4, (args.steps, 8), generator=data)
    for step in tqdm(range(state.step, args.steps), initial=state.step, total=args.steps, disable=rank != 0):
        loss = torch.nn.functional.cross_entropy(model(inputs[step]), targets[step])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        state.step = step + 1
        if state.step % args.save_every == 0:
            dcp.save({"app": state}, checkpoint_id=os.path.join(args.checkpoint_dir, f"step_{state.step}"))
        time.sleep(args.step_sleep)
    full = {k: v.full_tensor() for k, v in model.state_dict().items()}  # every rank takes part
    if rank == 0:
        torch.save(full, os.path.join(args.model_dir, "model.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--save-every", type=int, default=2)
    parser.add_argument("--step-sleep", type=float, default=0.2)
    parser.add_argument("--checkpoint-dir", default="/opt/ml/checkpoints")
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    main(parser.parse_args())
