"""hang_timeout_s travels from fit's keyword (and `--hang-timeout-s`) to the job spec PID 1 reads."""

from __future__ import annotations

from pathlib import Path

import pytest

import sm_dist
from sm_dist.cli import build_parser
from sm_dist.errors import ConfigError
from sm_dist.jobspec import JobSpec


def test_the_plan_carries_it_to_pid1(source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), local=True, hang_timeout_s=15)
    assert plan.job_spec.hang_timeout_s == 15
    assert JobSpec.from_json(plan.job_spec.to_json()).hang_timeout_s == 15
    assert sm_dist.plan("train.py", source_dir=str(source_dir), local=True).job_spec.hang_timeout_s is None


def test_a_negative_timeout_is_refused_by_name(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match="hang_timeout_s"):
        sm_dist.plan("train.py", source_dir=str(source_dir), local=True, hang_timeout_s=-1)
    with pytest.raises(ConfigError, match="hang_timeout_s"):
        JobSpec(entry="train.py", hang_timeout_s=-5)


def test_the_flag_is_there_and_takes_seconds() -> None:
    args = build_parser("fit").parse_args(["train.py", "--hang-timeout-s", "0"])
    assert args.hang_timeout_s == 0
