"""The cloud backend: a plan becomes a SageMaker training job, and `Job` is its handle.

`run(plan)` (submit: read-only checks, the code upload, CreateTrainingJob) is what `sm_dist.fit`
hands a cloud plan to; its peer is `sm_dist.local.run`. `Job` implements the job-handle contract
(`sm_dist.contract.job.JobHandle`): status, wait, logs (CloudWatch), stop, checkpoints (S3), cost
(DescribeTrainingJob's billable time), summary. Names resolve on first access; boto3 is imported
only inside the functions that call AWS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sm_dist._lazy import lazy_exports

_LAZY = {
    "run": "sm_dist.cloud.submit:run",
    "Job": "sm_dist.cloud.job:Job",
}

if TYPE_CHECKING:  # what type checkers see; tests/test_public_types.py keeps it equal to _LAZY
    from sm_dist.cloud.job import Job as Job
    from sm_dist.cloud.submit import run as run
else:
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = ["Job", "run"]
