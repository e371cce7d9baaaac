"""Local mode: emulate a multi-instance SageMaker job on this machine (CPU, gloo, moto S3)."""

from sm_dist.local.api import run_local
from sm_dist.local.job import LocalJob

__all__ = ["run_local", "LocalJob"]
