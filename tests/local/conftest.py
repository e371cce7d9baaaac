"""Fixtures of the local-mode tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sm_dist.local.config import LocalJobConfig

FAKE = Path(__file__).with_name("fake_container.py")


@pytest.fixture
def fake_config(tmp_path: Path) -> Iterator[LocalJobConfig]:
    """A 2-host job whose container command is tests/local/fake_container.py."""
    code = tmp_path / "bundle"
    code.mkdir()
    (code / "fake_container.py").write_text(FAKE.read_text())
    yield LocalJobConfig(
        job_name="fake-job",
        container_command=("python3", "/opt/ml/input/data/code/fake_container.py"),
        # the test runner's job root is tmp_path / "job" (tests/local/test_runner_fake.py)
        environment={"PYTHONPATH": "/opt/ml/input/data/code", "FAKE_HOSTS_DIR": str(tmp_path / "job" / "hosts")},
        code_dir=code,
        hyperparameters={"steps": "8", "ckpt_every": "2"},
        instance_type="ml.g5.xlarge",
        instance_count=2,
        checkpoint_uri=str(tmp_path / "uri"),
    )
