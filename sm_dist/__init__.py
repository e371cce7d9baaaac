"""sm_dist: plan, launch and run multi-instance PyTorch training on Amazon SageMaker.

`import sm_dist` is cheap: it imports neither torch nor boto3/sagemaker. The public functions
are resolved on first use:

- `sm_dist.estimate(...)` — memory, time and cost per strategy/instance (standard library only)
- `sm_dist.plan(...)`, `sm_dist.fit(...)`, `sm_dist.Job` — launch on SageMaker (boto3, sagemaker)
- `sm_dist.runtime` — what runs inside the job (torch)
"""

from __future__ import annotations

import importlib
from typing import Any

from sm_dist._version import __version__
from sm_dist.errors import (
    CatalogError,
    CheckpointError,
    ConfigError,
    DoesNotFitError,
    LaunchError,
    RuntimeEnvError,
    SmDistError,
)

# public name -> "module:attribute", imported on first access (PEP 562)
_LAZY = {
    "estimate": "sm_dist.estimator.api:estimate",
    "plan": "sm_dist.launch.api:plan",
    "fit": "sm_dist.launch.api:fit",
    "Job": "sm_dist.launch.job:Job",
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'sm_dist' has no attribute {name!r}")
    module_name, attr = target.split(":")
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))


__all__ = [
    "__version__",
    "estimate",
    "plan",
    "fit",
    "Job",
    "SmDistError",
    "ConfigError",
    "CatalogError",
    "DoesNotFitError",
    "LaunchError",
    "CheckpointError",
    "RuntimeEnvError",
]
