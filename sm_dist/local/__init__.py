"""Local mode: emulate a multi-instance SageMaker job on this machine (CPU, gloo, moto S3).

The local backend, a peer of the cloud one (`sm_dist.cloud.submit.run`): `run(plan)` takes a
plan from `sm_dist.plan(..., local=True)` and returns the finished `LocalJob`. Names resolve on
first access, so a helper run inside an emulated host (`python -m sm_dist.local.mountns`) does
not import the whole backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sm_dist._lazy import lazy_exports

_LAZY = {
    "run": "sm_dist.local.api:run",
    "run_local": "sm_dist.local.api:run_local",
    "LocalJob": "sm_dist.local.job:LocalJob",
    "LocalOptions": "sm_dist.local.options:LocalOptions",
}

if TYPE_CHECKING:  # what type checkers see; tests/test_public_types.py keeps it equal to _LAZY
    from sm_dist.local.api import run as run
    from sm_dist.local.api import run_local as run_local
    from sm_dist.local.job import LocalJob as LocalJob
    from sm_dist.local.options import LocalOptions as LocalOptions
else:
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = ["LocalJob", "LocalOptions", "run", "run_local"]
