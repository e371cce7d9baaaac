"""Worker for test_memory_torch.py, started by torchrun: what torch's own sharding really holds.

Prints (rank 0) one JSON line: per configuration, the bytes this rank holds for params, grads and
optimizer states after one step, and the bytes of parameters held between forward and backward.
"""

from __future__ import annotations

import gc
import json

import torch
import torch.distributed as dist
from torch import nn

WIDTH, LAYERS = 256, 8  # 8 × 256² = 524,288 parameters: small, and every layer divides by 2 and 4


def _local_bytes(tensor: torch.Tensor) -> int:
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def _fsdp(strategy: str, precision: str) -> tuple[nn.Module, torch.optim.Optimizer]:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)])
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    options = {"reshard_after_forward": strategy == "fsdp"}
    if precision == "mixed":
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model:
        fully_shard(layer, **options)
    fully_shard(model, **options)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def _zero1() -> tuple[nn.Module, torch.optim.Optimizer]:
    from torch.distributed.optim import ZeroRedundancyOptimizer

    model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)])
    return model, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)


def measure(strategy: str, precision: str) -> dict[str, object]:
    torch.manual_seed(0)
    model, opt = _zero1() if strategy == "zero1" else _fsdp(strategy, precision)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    out = model(torch.randn(4, WIDTH, dtype=dtype))
    between = sum(_local_bytes(p) for p in model.parameters())  # unsharded until backward for zero2
    out.float().sum().backward()
    opt.step()
    inner = opt.optim if strategy == "zero1" else opt
    states = [v for s in inner.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
    return {
        "strategy": strategy, "precision": precision, "psi": WIDTH * WIDTH * LAYERS,
        "params": sum(_local_bytes(p) for p in model.parameters()),
        "grads": sum(_local_bytes(p.grad) for p in model.parameters() if p.grad is not None),
        "optimizer": sum(_local_bytes(v) for v in states), "between_fwd_bwd": between,
    }


def main() -> None:
    dist.init_process_group("gloo")
    configs = [("fsdp", "fp32"), ("fsdp", "mixed"), ("fsdp", "bf16"), ("zero2", "mixed"), ("zero1", "fp32")]
    results = [measure(*c) for c in configs]
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps({"world": dist.get_world_size(), "results": results}), flush=True)
    # Same teardown as sm_dist.runtime.context.shutdown: a bare destroy at exit lets gloo's threads
    # be destructed during interpreter finalization, which aborts ("terminate called ...").
    dist.barrier()
    dist.destroy_process_group()
    gc.collect()


if __name__ == "__main__":
    main()
