"""What runs inside the training job: environment, process group, strategies, data, metrics.

    from sm_dist import runtime
    with runtime.init(strategy=None, precision=None, seed=None) as ctx:  # None: the job spec's, else ddp/fp32/0
        model = ctx.wrap_model(model)                      # per strategy; every rank starts from rank 0's weights
        opt = ctx.build_optimizer(model, lambda params: torch.optim.AdamW(params, lr=1e-3))
        loader = runtime.build_dataloader(dataset, batch_size=32, ctx=ctx, seed=0)  # resumable, this rank's shard
        for step, (x, y) in enumerate(loader, 1):
            with ctx.no_sync(model, enabled=not last_micro_step):  # skip the sync while accumulating
                with ctx.autocast():
                    loss = loss_fn(model(x), y)
                ctx.backward(loss)                         # scaled for fp16 amp
            ctx.clip_grad_norm_(model, 1.0, opt)           # the global norm over every shard
            ctx.step(opt)
            opt.zero_grad()
            runtime.log_metrics(step, {"loss": loss.item()})  # rank 0 prints `[sm_dist] step=N loss=...`

`ctx.state_dict(model, opt)` (collective) is `{"model", "optim"}` without `module.` prefixes, the
layout every strategy shares (`sm_dist.runtime.strategies`); checkpoints are
`sm_dist.runtime.checkpoint.Checkpointer`'s. The strategies, precisions and the environment a rank
reads (`RunEnv`: torchrun, SageMaker, Slurm or alone) are documented where they live:
`runtime.context`, `runtime.strategies`, `runtime.precision`, `sm_dist.container.env`.

Nothing is imported eagerly (PEP 562). `detect_env`/`RunEnv` are re-exported from `sm_dist.container.env`
(the PID-1 package, standard library only). Public names
resolve on first access, e.g. `from sm_dist import runtime; runtime.init(...)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sm_dist._lazy import lazy_exports

# public name -> "module:attribute", imported on first access
_LAZY = {
    "detect_env": "sm_dist.container.env:detect_env",
    "RunEnv": "sm_dist.container.env:RunEnv",
    "init": "sm_dist.runtime.context:init",
    "shutdown": "sm_dist.runtime.context:shutdown",
    "RunContext": "sm_dist.runtime.context:RunContext",
    "get_strategy": "sm_dist.runtime.strategies:get_strategy",
    "ResumableDistributedSampler": "sm_dist.runtime.sampler:ResumableDistributedSampler",
    "ResumableLoader": "sm_dist.runtime.data:ResumableLoader",
    "build_dataloader": "sm_dist.runtime.data:build_dataloader",
    "channel_files": "sm_dist.runtime.data:channel_files",
    "AvgMetric": "sm_dist.runtime.metrics:AvgMetric",
    "log_metrics": "sm_dist.runtime.metrics:log_metrics",
    "rank0_print": "sm_dist.runtime.metrics:rank0_print",
}

if TYPE_CHECKING:  # what type checkers see; tests/test_public_types.py keeps it equal to _LAZY
    from sm_dist.container.env import RunEnv as RunEnv
    from sm_dist.container.env import detect_env as detect_env
    from sm_dist.runtime.context import RunContext as RunContext
    from sm_dist.runtime.context import init as init
    from sm_dist.runtime.context import shutdown as shutdown
    from sm_dist.runtime.data import ResumableLoader as ResumableLoader
    from sm_dist.runtime.data import build_dataloader as build_dataloader
    from sm_dist.runtime.data import channel_files as channel_files
    from sm_dist.runtime.metrics import AvgMetric as AvgMetric
    from sm_dist.runtime.metrics import log_metrics as log_metrics
    from sm_dist.runtime.metrics import rank0_print as rank0_print
    from sm_dist.runtime.sampler import ResumableDistributedSampler as ResumableDistributedSampler
    from sm_dist.runtime.strategies import get_strategy as get_strategy
else:
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = sorted(_LAZY)
