"""Fixtures shared by the whole suite. Each yields one thing.

Area-specific fixtures live in the conftest.py of that area's folder (tests/runtime/, ...).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator

import pytest

# Variables from the developer's machine that would change what sm_dist detects or talks to.
_STRIP = re.compile(
    r"^(AWS_.*|SM_.*|SLURM_.*|SAGEMAKER_.*|TRAINING_JOB_.*|TORCHELASTIC_.*|PET_.*|"
    r"RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_RANK|"
    r"ROLE_WORLD_SIZE|ROLE_NAME|MASTER_ADDR|MASTER_PORT|SM_DIST_.*)$"
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Strip AWS_*, SM_*, SLURM_*, torchrun-style variables so tests never see this machine."""
    for key in list(os.environ):
        if _STRIP.match(key):
            monkeypatch.delenv(key, raising=False)
    yield


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (never assume 29500 is)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Fake credentials and region for moto; yields the region."""
    region = "us-east-1"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    monkeypatch.setenv("AWS_REGION", region)
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")
    yield region


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's HTTP server on 127.0.0.1 (a real S3 endpoint over HTTP); yields its URL."""
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def port_factory() -> Iterator[object]:
    """Yields `free_port`, a function returning a free 127.0.0.1 TCP port per call."""
    yield free_port
