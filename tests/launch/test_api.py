"""The facade: `sm_dist.fit` makes the plan and hands it to one backend, with its options."""

from __future__ import annotations

from pathlib import Path

import pytest
from _project import ROLE_ARN

import sm_dist
from sm_dist.errors import ConfigError
from sm_dist.local import api as local_api
from sm_dist.local.options import LocalOptions
from sm_dist.planning.plan import Plan

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

EXPLICIT = dict(instance_type="ml.g5.12xlarge", role=ROLE_ARN, output_s3_uri="s3://out-bucket/runs", region="us-east-1",
                max_runtime_s=3600)


def test_fit_local_hands_the_plan_to_local_mode(source_dir: Path, monkeypatch) -> None:
    seen = {}
    monkeypatch.setattr(local_api, "run", lambda plan, options: seen.update(plan=plan, options=options) or "ran")
    assert sm_dist.fit("train.py", source_dir=str(source_dir), local=True, local_options={"verify": True}, **EXPLICIT) == "ran"
    assert isinstance(seen["plan"], Plan) and seen["options"] == {"verify": True}


def test_fit_local_needs_no_aws_settings(source_dir: Path, monkeypatch) -> None:
    monkeypatch.setattr(local_api, "run", lambda plan, options: plan)
    plan = sm_dist.fit("train.py", source_dir=str(source_dir), local=True, instance_type="ml.m5.xlarge")
    assert plan.region and plan.role_arn.startswith("arn:aws:iam::")


def test_local_options_need_local(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match="local_options=\\['verify'\\]: only with local=True"):
        sm_dist.fit("train.py", source_dir=str(source_dir), local_options={"verify": True}, **EXPLICIT)


def test_local_options_are_a_record_and_a_dict_is_checked_key_by_key() -> None:
    assert LocalOptions.coerce({"chaos": ["kill:5"], "verify": True}) == LocalOptions(chaos=("kill:5",), verify=True)
    assert LocalOptions.coerce(None) == LocalOptions()
    with pytest.raises(ConfigError, match=r"local_options.verfy=True: not an option \(did you mean 'verify'\?\)"):
        LocalOptions.coerce({"verfy": True})
    with pytest.raises(ConfigError, match="chaos"):
        LocalOptions(chaos=("explode:3",))
    with pytest.raises(ConfigError, match="grace_seconds"):
        LocalOptions(grace_seconds=0)


def test_every_handle_is_a_job_handle() -> None:
    from sm_dist.cloud.job import Job
    from sm_dist.cloud.run import Run
    from sm_dist.contract.job import JobHandle, Releasable, Steppable
    from sm_dist.local.job import LocalJob

    for handle in (Job, Run, LocalJob):
        missing = [name for name in ("status", "wait", "logs", "stop", "checkpoints", "cost", "summary")
                   if not callable(getattr(handle, name, None))]
        assert missing == [], handle
    assert isinstance(Job("j", region="us-east-1"), JobHandle)
    run = Run("r", region="us-east-1")  # a chained run holds its jobs: a handle, not a Job
    assert isinstance(run, JobHandle) and isinstance(run, Steppable) and isinstance(run, Releasable)
    assert not isinstance(run, Job) and run.name == "r"
