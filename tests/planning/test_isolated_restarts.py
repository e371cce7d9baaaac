"""In-job restarts under network isolation on several instances (docs/PLATFORM.md §1.7).

The container reaches no S3, so a restarted host cannot fetch what the others saved from the checkpoint
URI; it fetches it from the other hosts, which isolation lets it reach. The plan keeps the restarts,
tells the container it is isolated and says so in the dry run; it sets no RetryStrategy in their
place (SageMaker retries only on InternalServerError, never after a worker failed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _project import ROLE_ARN

import sm_dist
from sm_dist.contract.container import NETWORK_ISOLATION_ENV

BASE = dict(instance_type="ml.p4d.24xlarge", instance_count=2, strategy="ddp", role=ROLE_ARN, region="us-east-1",
            output_s3_uri="s3://team-bucket/out", max_runtime_s=3600, network_isolation=True,
            checkpoint_s3_uri="s3://team-bucket/ckpt")
NOTE = ("network isolation on 2 instances: after an in-job restart (max_restarts 2) each host gets the checkpoint "
        "files it lacks from the other hosts over the cluster network, not from S3")


@pytest.fixture(params=["own script", "sm_dist script"])
def entry(request: pytest.FixtureRequest, source_dir: Path) -> str:
    """train.py never imports sm_dist (it writes /opt/ml/checkpoints itself); uses_sm_dist.py does."""
    if request.param == "own script":
        return "train.py"
    (source_dir / "uses_sm_dist.py").write_text("from sm_dist import runtime\n")
    return "uses_sm_dist.py"


def test_isolated_hosts_restart_in_the_job_and_restore_from_each_other(source_dir: Path, entry: str) -> None:
    plan = sm_dist.plan(entry, source_dir=str(source_dir), **BASE)
    assert plan.job_spec.max_restarts == 2 and plan.job_spec.checkpoint.mode == "sagemaker-sync"
    assert plan.request["Environment"][NETWORK_ISOLATION_ENV] == plan.environment[NETWORK_ISOLATION_ENV] == "1"
    assert plan.request["CheckpointConfig"]["S3Uri"] == "s3://team-bucket/ckpt"  # the platform's sync carries it
    assert "RetryStrategy" not in plan.request
    [note] = [w for w in plan.warnings if w.startswith("network isolation")]
    assert note.startswith(NOTE)
    assert f"warning      {note}" in str(plan)  # the dry run says it


def test_the_local_rehearsal_plan_says_it_too(source_dir: Path) -> None:
    """A local plan has no URI (local mode gives the job its own); its dry run says the same."""
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), local=True, instance_count=2, network_isolation=True)
    assert plan.environment[NETWORK_ISOLATION_ENV] == "1"
    assert any(w.startswith(NOTE) for w in plan.warnings), plan.warnings


@pytest.mark.parametrize("change", [{"instance_count": 1}, {"network_isolation": False}, {"max_restarts": 0}],
                         ids=["one host", "no isolation", "no restarts"])
def test_nothing_to_say_where_no_host_restores_from_its_peers(source_dir: Path, change: dict[str, object]) -> None:
    """One host keeps its own folder; without isolation the restore reads S3; without restarts none runs."""
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), **{**BASE, **change})
    assert plan.job_spec.max_restarts == change.get("max_restarts", 2)
    assert not any(w.startswith("network isolation") for w in plan.warnings)
    assert (NETWORK_ISOLATION_ENV in plan.environment) is plan.request.get("EnableNetworkIsolation", False)
