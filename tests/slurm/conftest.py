"""Fixtures of the Slurm backend's tests: one real two-node cluster per session (tests/_slurm.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _harness import skip_or_fail
from _slurm import SlurmCluster, missing_programs

INSTALLED_BY = ".ci/run installs slurm-wlm and munge and runs as root"


#: The session's cluster once started; stopped when the session finishes (`pytest_sessionfinish`), outside any
#: test: a session fixture's teardown would run inside the last test's, where the process guard
#: (tests/_process_guard.py) refuses the scancel a fast test must not start.
_STARTED: list[SlurmCluster] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    while _STARTED:
        cluster = _STARTED.pop()
        cluster.stop()
        shutil.rmtree(cluster.root.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    """The session's cluster, started on first use and stopped (every daemon, by PID) when the session ends."""
    missing = missing_programs()
    if missing:
        skip_or_fail(f"no {', '.join(missing)} on PATH: apt-get install slurm-wlm munge", INSTALLED_BY)
    if os.geteuid() != 0:
        skip_or_fail("the test cluster's daemons run as root (unshare --uts, SlurmdUser=root)", INSTALLED_BY)
    root = Path(tempfile.mkdtemp(prefix="sm-dist-slurm-"))
    cluster = SlurmCluster(root / "cluster")
    _STARTED.append(cluster)  # stopped even when it fails to start
    return cluster.start()


@pytest.fixture
def slurm_conf(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """SLURM_CONF of the session's cluster, set for this test; every node back in service after it."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    yield slurm_cluster.conf
    slurm_cluster.resume_nodes()
