"""Fixtures of the infra tests: an in-process moto AWS, a private config home and a user's project."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def aws_session(aws_credentials: str) -> Iterator[Any]:
    """A boto3 Session talking to moto's in-process mock of every AWS service."""
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    with moto.mock_aws():
        yield boto3.Session(region_name=aws_credentials)


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """$SM_DIST_CONFIG_HOME pointed at an empty temporary folder."""
    home = tmp_path / "sm_dist_config"
    monkeypatch.setenv("SM_DIST_CONFIG_HOME", str(home))
    yield home


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A user's project folder with a training script that prints one step line."""
    src = tmp_path / "project"
    src.mkdir()
    (src / "train.py").write_text("print('[sm_dist] step=1 loss=0.5')\n")
    yield src
