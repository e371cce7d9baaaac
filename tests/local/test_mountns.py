"""Each emulated host's /opt/ml (sm_dist.local.mountns): a private mount namespace where the OS allows it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sm_dist.local import mountns

pytestmark = pytest.mark.slow  # starts processes (tests/_process_guard.py)


@pytest.fixture
def prefix() -> tuple[str, ...]:
    """The `unshare` prefix; skips where this machine refuses private mount namespaces."""
    found = mountns.unshare_prefix()
    if found is None:
        pytest.skip("no private mount namespace here (unshare refused): local mode falls back to SM_DIST_OPT_ML")
    return found


def test_a_host_sees_its_own_folder_at_opt_ml(prefix: tuple[str, ...], tmp_path: Path) -> None:
    existed = Path("/opt/ml").exists()
    hosts = {name: tmp_path / name for name in ("algo-1", "algo-2")}
    for name, root in hosts.items():
        root.mkdir()
        argv = mountns.command(root, ["sh", "-c", f"mkdir -p /opt/ml/checkpoints && echo {name} > /opt/ml/checkpoints/who"])
        assert argv is not None
        subprocess.run(argv, check=True, timeout=60)
    assert {name: (root / "checkpoints" / "who").read_text().strip() for name, root in hosts.items()} == {
        "algo-1": "algo-1", "algo-2": "algo-2"}
    assert Path("/opt/ml").exists() == existed  # the machine's own /opt/ml neither created nor written
    if Path("/opt").is_dir():  # what /opt held is still there inside the namespace
        inside = subprocess.run(mountns.command(tmp_path, ["ls", "/opt"]), capture_output=True, text=True, check=True)
        assert set(inside.stdout.split()) >= {p.name for p in Path("/opt").iterdir()}


def test_a_missing_command_is_one_line_and_exit_127(prefix: tuple[str, ...], tmp_path: Path) -> None:
    out = subprocess.run(mountns.command(tmp_path, ["/no/such/launcher"]), capture_output=True, text=True, timeout=60)
    assert out.returncode == 127 and "cannot start '/no/such/launcher'" in out.stderr
