"""In-job restarts under network isolation: refused where a restarted host could not resume (docs/PLATFORM.md §1.7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _project import ROLE_ARN

import sm_dist
from sm_dist.errors import ConfigError

BASE = dict(instance_type="ml.p4d.24xlarge", instance_count=2, strategy="ddp", role=ROLE_ARN, region="us-east-1",
            output_s3_uri="s3://team-bucket/out", max_runtime_s=3600, network_isolation=True,
            checkpoint_s3_uri="s3://team-bucket/ckpt")


def test_a_script_of_its_own_with_in_job_restarts_is_refused_with_the_fix(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"max_restarts=2: .* pass max_restarts=0 and retry_attempts=N"):
        sm_dist.plan("train.py", source_dir=str(source_dir), **BASE)
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), **BASE, max_restarts=0, retry_attempts=2)
    assert plan.request["RetryStrategy"] == {"MaximumRetryAttempts": 2}


@pytest.mark.parametrize("change", [{"instance_count": 1}, {"network_isolation": False}], ids=["one host", "no isolation"])
def test_where_a_restart_can_resume_it_is_planned(source_dir: Path, change: dict[str, object]) -> None:
    """One host keeps its own folder across an in-job restart; without isolation the restore reads S3."""
    assert sm_dist.plan("train.py", source_dir=str(source_dir), **{**BASE, **change}).job_spec.max_restarts == 2
