"""Tests never see the developer's machine (tests/conftest.py's autouse fixtures).

The proof plants a developer's machine (a HOME with the infra.json `sm-dist infra deploy` writes
and AWS files, AWS_PROFILE naming a profile that does not exist, launcher variables) around a child
pytest, and runs the probe below plus a test that once failed on such a machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _harness import HANG_GUARD_S

from sm_dist.errors import ConfigError
from sm_dist.provision import config, outputs

REPO = Path(__file__).resolve().parents[1]
#: Failed when a real ~/.config/sm_dist/infra.json was present (it found the role there).
ONCE_LEAKED = "tests/planning/test_preflight.py::test_rule_refuses_before_creating[no role anywhere]"
PROBE = "tests/test_isolation.py::test_machine_is_hidden"
REAL_ROLE = "arn:aws:iam::999999999999:role/sm-dist-real"
#: What a developer's shell may hold, none of which a test may see.
MACHINE_VARS = {"AWS_PROFILE": "does-not-exist", "AWS_DEFAULT_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIAREAL",
                "RANK": "5", "WORLD_SIZE": "8", "MASTER_PORT": "29500", "SLURM_PROCID": "1",
                "SM_CURRENT_HOST": "algo-9", "TORCHELASTIC_RESTART_COUNT": "2", "PET_NPROC_PER_NODE": "4"}


def _plant_machine(home: Path) -> Path:
    """A developer's HOME: deployed infra and AWS profiles; returns the infra.json path."""
    entry = {"role_arn": REAL_ROLE, "bucket": "real-bucket", "checkpoint_uri": "s3://real-bucket/checkpoints",
             "artifact_uri": "s3://real-bucket/artifacts", "region": "eu-west-1"}
    infra = home / ".config" / "sm_dist" / "infra.json"
    infra.parent.mkdir(parents=True)
    infra.write_text(json.dumps({"version": 1, "default": "real", "stacks": {"real": entry}}))
    (home / ".aws").mkdir()
    (home / ".aws" / "config").write_text("[default]\nregion = ap-south-1\n[profile prod]\nregion = eu-west-1\n")
    (home / ".aws" / "credentials").write_text("[default]\naws_access_key_id = AKIAREAL\naws_secret_access_key = x\n")
    return infra


def test_machine_is_hidden(clean_env: Path) -> None:
    """Whatever this process was started with, a test sees an empty HOME and no machine variables."""
    assert os.environ["HOME"] == str(clean_env)
    assert sorted(p.name for p in clean_env.rglob("*") if p.is_file()) == ["config", "credentials"]
    assert all((clean_env / ".aws" / name).read_text() == "" for name in ("config", "credentials"))
    leaked = [k for k in os.environ if re.match(r"(AWS_(PROFILE|DEFAULT_REGION|REGION|ACCESS_KEY_ID)|RANK|WORLD_SIZE|"
                                                r"MASTER_PORT|SLURM_|SM_CURRENT|TORCHELASTIC_|PET_)", k)]
    assert leaked == []
    assert config.config_path().is_relative_to(clean_env)
    with pytest.raises(ConfigError, match="no deployed infra recorded"):
        outputs.from_config()


@pytest.mark.slow
def test_suite_passes_on_a_developer_machine(tmp_path: Path) -> None:
    home = tmp_path / "developer"
    infra = _plant_machine(home)
    machine = {k: v for k, v in os.environ.items() if not k.startswith(("SM_DIST_", "XDG_", "AWS_"))}
    machine.update(MACHINE_VARS, HOME=str(home))
    assert config.config_path(machine) == infra  # the plant is where sm_dist looks ...
    assert outputs.from_config(machine)["role_arn"] == REAL_ROLE  # ... and sm_dist would use it
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", PROBE, ONCE_LEAKED]
    proc = subprocess.run(argv, cwd=REPO, env=machine, capture_output=True, text=True, timeout=HANG_GUARD_S,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout
