"""What runs inside the training job: environment, process group, strategies, data, metrics.

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
