"""The script's own arguments, verbatim (`sm-dist fit train.py ... -- 3 1 --dummy`, `fit(args=[...])`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sm_dist
from sm_dist.cli import main
from sm_dist.container import pid1_env
from sm_dist.errors import ConfigError
from sm_dist.jobspec import JobSpec


def test_cli_passes_everything_after_the_double_dash(source_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fit", "train.py", "--source-dir", str(source_dir), "--local", "--instance-count", "2", "--hp", "lr=0.1",
            "--hp", "flag=", "--dry-run", "--json", "--", "3", "1", "--dummy", "--local"]
    assert main(argv) == 0
    spec = json.loads(capsys.readouterr().out)["job_spec"]
    assert spec["args"] == ["3", "1", "--dummy", "--local"]  # after --, even sm-dist's own flag names are the script's


def test_the_plan_shows_the_exact_command_line(source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), local=True, instance_count=2,
                        args=["a b", "--x"], hyperparameters={"lr": 0.1, "flag": ""})
    assert "entry        train.py 'a b' --x --lr 0.1 --flag" in str(plan)


def test_pid1_gives_the_script_args_then_hyperparameters(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    spec = JobSpec(entry="train.py", args=("3", "1", "--dummy"), hyperparameters={"lr": 0.1, "flag": ""})
    assert pid1_env.script_argv(spec, tmp_path) == [str(tmp_path / "train.py"), "3", "1", "--dummy", "--lr", "0.1",
                                                          "--flag"]


def test_args_must_be_a_list_of_strings(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match="args='3 1'.*list of strings"):
        sm_dist.plan("train.py", source_dir=str(source_dir), local=True, args="3 1")
