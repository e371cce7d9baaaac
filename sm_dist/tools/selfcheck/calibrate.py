"""`sm-dist calibrate`, torch side: N timed training steps of one model on this machine's GPU,
written as a calibration record (sm_dist.estimator.calibration) for `estimate-cost --calibration`.

One process, world size 1, through the runtime a job uses (`runtime.init`, ddp, the precision
plugin, AdamW), so the step is a real training step: forward, backward, optimizer. Tokens per
second are the timed steps' tokens over their wall time (each step bracketed by a device
synchronisation); FLOPs per token are 6 × the module's parameters, the estimator's own count.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from sm_dist.errors import ConfigError
from sm_dist.estimator.calibration import Calibration, from_throughput
from sm_dist.tools.selfcheck.checks import LR, timed_steps
from sm_dist.tools.selfcheck.models import build, tokens

#: Sequence length when neither the flag nor the model says less (one GPU's worth of a long context).
DEFAULT_SEQ = 2048

_WORLD_OF_ONE = {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}


def calibrate(spec: str, *, steps: int, warmup: int, device: str, out: str, layers: int | None = None,
              seq_len: int | None = None, micro_batch: int = 1, precision: str = "mixed") -> Calibration:
    """Measure and write the calibration file `out`; returns the record."""
    from sm_dist import runtime
    from sm_dist.estimator.models import count_module_params

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device", "cuda", "no CUDA GPU on this machine: calibrate measures the GPU it runs on; "
                          "run it on the GPU machine (or add --device cpu to try the command here)")
    built = build(spec, layers=layers, seq_len=seq_len)
    if built.shape.experts:
        raise ConfigError("--model", spec, "a mixture-of-experts config is not built by calibrate; give "
                          "module:function returning your model")
    seq = seq_len or min(built.shape.seq_len, DEFAULT_SEQ)
    with runtime.init(strategy="ddp", precision=precision, seed=0, environ=_WORLD_OF_ONE) as ctx:
        params, _ = count_module_params(built.module)
        model = ctx.wrap_model(built.module)
        opt = ctx.build_optimizer(model, lambda ps: torch.optim.AdamW(ps, lr=LR))
        batch = built.batch.to(ctx.device) if built.batch is not None else tokens(built.shape, micro_batch, seq, 0,
                                                                                  ctx.device)
        if ctx.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(ctx.device)
        _, seconds = timed_steps(ctx, model, opt, batch, warmup, steps)
        cuda = ctx.device.type == "cuda"
        record = from_throughput(
            device_name=torch.cuda.get_device_name(ctx.device) if cuda else f"cpu ({platform.machine()})",
            tokens_per_second=batch.numel() * len(seconds) / sum(seconds), flops_per_token=6.0 * params,
            model=built.name, params=params, source="calibrate",
            peak_memory_bytes=torch.cuda.max_memory_allocated(ctx.device) if cuda else None,
            torch_version=torch.__version__, seq_len=int(batch.shape[1]), micro_batch=int(batch.shape[0]),
            precision=ctx.precision.value, steps=len(seconds),
            detail=f"ddp at world size 1, AdamW, {warmup} warm-up steps untimed",
        )
    Path(out).write_text(record.to_json(), encoding="utf-8")
    return record


__all__ = ["calibrate"]
