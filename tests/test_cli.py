"""The dispatcher: unknown commands and errors are one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each test runs the CLI in a child process (tests/_process_guard.py)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sm_dist.cli", *args], capture_output=True, text=True)


def test_no_command_prints_help_and_exits_2() -> None:
    proc = _run()
    assert proc.returncode == 2
    assert "estimate-cost" in proc.stdout


def test_unknown_command_is_a_usage_error() -> None:
    proc = _run("estimate-cots")
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_version() -> None:
    proc = _run("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("sm-dist ")

