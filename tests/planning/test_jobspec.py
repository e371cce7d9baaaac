"""The job spec round-trips through JSON and rejects what the runtime could not use."""

from __future__ import annotations

import pytest

from sm_dist.contract.checkpoint import CheckpointSettings
from sm_dist.errors import ConfigError
from sm_dist.jobspec import (
    JOB_SPEC_ENV,
    JobSpec,
    entry_is_function,
    load_job_spec,
)
from sm_dist.vocab import Precision, Strategy


def test_round_trip_through_file(tmp_path) -> None:
    spec = JobSpec(
        entry="train.py",
        strategy="fsdp",
        precision="bf16",
        checkpoint={"mode": "s3", "uri": "s3://b/p", "interval_steps": 5},
        hyperparameters={"lr": 0.1, "name": "x", "flag": True},
        nproc_per_node=2,
    )
    path = spec.write(tmp_path)
    loaded = load_job_spec({JOB_SPEC_ENV: str(path)})
    assert loaded == spec
    assert loaded.strategy is Strategy.FSDP and loaded.precision is Precision.BF16
    assert loaded.checkpoint == CheckpointSettings(mode="s3", uri="s3://b/p", interval_steps=5)
    assert loaded.hyperparameters == {"lr": "0.1", "name": "x", "flag": "true"}


def test_no_env_means_no_spec() -> None:
    assert load_job_spec({}) is None


@pytest.mark.parametrize(
    "data",
    [
        {"entry": "t.py", "bogus": 1},
        {"entry": "t.py", "strategy": "fsdb"},
        {"entry": "t.py", "max_restarts": -1},
        {"entry": "t.py", "nproc_per_node": 0},
        {"entry": "t.py", "instance_count": 2},  # the hosts come from resourceconfig.json, not the spec
        {"entry": "t.py", "checkpoint": {"mode": "s3"}},
        {"entry": "t.py", "checkpoint": {"uri": "/local/path"}},
        {"entry": "t.py", "checkpoint": {"every": 3}},
        {"entry": ""},
    ],
)
def test_bad_values_are_config_errors(data) -> None:
    with pytest.raises(ConfigError):
        JobSpec.from_dict(data)


def test_entry_kinds() -> None:
    assert entry_is_function("pkg.mod:main")
    assert not entry_is_function("train.py")
    assert not entry_is_function("dir/train.py")
    assert not entry_is_function("C:/x")


def test_a_process_reads_its_job_spec_once(tmp_path) -> None:
    """init(), the checkpointer and the entrypoint glue each ask: one read, the same spec; a rewritten file is read again."""
    path = JobSpec(entry="train.py", seed=1).write(tmp_path)
    first = load_job_spec({JOB_SPEC_ENV: str(path)})
    assert load_job_spec({JOB_SPEC_ENV: str(path)}) is first
    path.write_text(JobSpec(entry="train.py", seed=22).to_json(), encoding="utf-8")
    again = load_job_spec({JOB_SPEC_ENV: str(path)})
    assert again is not None and again.seed == 22
