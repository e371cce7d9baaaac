"""Run under `python -m torch.distributed.run`: init through torchrun's agent store, one DDP step."""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist

from sm_dist import runtime


def main(out: str) -> None:
    with runtime.init(strategy="ddp", seed=0) as ctx:
        model = ctx.wrap_model(torch.nn.Linear(4, 1))
        opt = ctx.build_optimizer(model, lambda p: torch.optim.SGD(p, lr=0.1))
        ctx.backward(model(torch.full((2, 4), float(ctx.rank))).sum())
        ctx.step(opt)
        weight = model.module.weight.detach().clone()
        gathered = [torch.zeros_like(weight) for _ in range(ctx.world_size)]
        dist.all_gather(gathered, weight)
        result = {"rank": ctx.rank, "launcher": ctx.env.launcher, "job_name": ctx.env.job_name,
                  "same_weights": all(torch.equal(g, gathered[0]) for g in gathered)}
    with open(f"{out}.{result['rank']}", "w") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main(sys.argv[1])
