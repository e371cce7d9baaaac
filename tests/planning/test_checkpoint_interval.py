"""The plan's checkpoint interval: Young/Daly from the estimate when none is given, and the plan says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _project import ROLE_ARN

import sm_dist

CLOUD: dict[str, Any] = dict(instance_type="ml.p4d.24xlarge", instance_count=2, role=ROLE_ARN, region="us-east-1",
                             output_s3_uri="s3://out-bucket/runs", checkpoint_s3_uri="s3://ckpt-bucket/runs")


def _plan(source_dir: Path, **settings: Any) -> sm_dist.Plan:
    return sm_dist.plan("train.py", source_dir=str(source_dir), **{**CLOUD, **settings})


def test_none_given_the_job_checkpoints_at_the_estimates_interval(source_dir: Path) -> None:
    plan = _plan(source_dir, model="gpt2-xl", tokens=2e10, strategy="fsdp")
    row = plan.sizing.row
    assert row is not None and row.goodput is not None and row.step is not None
    interval = plan.job_spec.checkpoint.interval_steps
    assert interval == round(row.goodput.checkpoint_interval_s / row.step.total) == plan.sizing.checkpoint_interval_steps
    assert 1 < interval < row.steps
    assert plan.sizing.interval_defaulted
    assert f"interval   every {interval:,} steps" in str(plan) and "Young/Daly" in str(plan)


def test_a_given_interval_wins_and_without_tokens_there_is_no_default(source_dir: Path) -> None:
    given = _plan(source_dir, model="gpt2-xl", tokens=2e10, strategy="fsdp", checkpoint_interval_steps=50)
    assert given.job_spec.checkpoint.interval_steps == 50 and not given.sizing.interval_defaulted
    assert "Young/Daly" not in str(given)
    unpriced = _plan(source_dir, model="gpt2-xl", strategy="fsdp")  # no tokens: no run to price
    assert unpriced.job_spec.checkpoint.interval_steps is None and unpriced.sizing.row is not None
    assert unpriced.sizing.row.goodput is None
    off = _plan(source_dir, model="gpt2-xl", tokens=2e10, strategy="fsdp", checkpoint_mode="off",
                checkpoint_s3_uri=None)
    assert off.job_spec.checkpoint.interval_steps is None
