"""Local mode: emulate a multi-instance SageMaker job on this machine (CPU, gloo, moto S3).

The local backend, a peer of the cloud one (`sm_dist.launch.submit.run`): `run(plan)` takes a
plan from `sm_dist.plan(..., local=True)` and returns the finished `LocalJob`.
"""

from sm_dist.local.api import run, run_local
from sm_dist.local.job import LocalJob

__all__ = ["LocalJob", "run", "run_local"]
