"""Raises on rank 1 at step 3: the failure must show this ValueError, not torchrun's lines."""

import argparse
import os

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    dist.init_process_group(backend="gloo")
    model = torch.nn.Linear(4, 2)
    for step in range(1, args.steps + 1):
        model(torch.randn(8, 4)).sum().backward()
        if step == 3 and int(os.environ["RANK"]) == 1:
            raise ValueError(f"loss went NaN at step {step}")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
