"""What runs inside the training job: environment, process group, strategies, data, metrics.

Nothing is imported eagerly (PEP 562). `detect_env`/`RunEnv` are re-exported from `sm_dist.container.env`
(the PID-1 package, standard library only). Public names
resolve on first access, e.g. `from sm_dist import runtime; runtime.init(...)`.
"""

from __future__ import annotations

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

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = sorted(_LAZY)
