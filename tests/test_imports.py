"""The three import worlds stay apart (STYLE.md point 1), checked in fresh interpreters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "boto3", "botocore", "sagemaker", "numpy")


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in HEAVY)


def test_import_sm_dist_is_light() -> None:
    assert _heavy(_modules_after("import sm_dist")) == []


def test_cli_parsing_is_light() -> None:
    assert _heavy(_modules_after("import sm_dist.cli, sm_dist.errors, sm_dist.vocab")) == []


@pytest.mark.parametrize("command", ["estimate-cost", "fit", "status", "measure-memory"])
def test_command_help_imports_nothing_heavy(command: str) -> None:
    code = (
        "import sys, sm_dist.cli\n"
        f"try:\n    sm_dist.cli.main([{command!r}, '--help'])\nexcept SystemExit:\n    pass"
    )
    assert _heavy(_modules_after(code)) == []
