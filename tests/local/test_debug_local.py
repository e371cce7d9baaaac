"""`sm-dist debug` / `sm-dist stacks` for a local job, without starting one: how a job is found (its name or its
run folder), the shell's command and environment, and the stacks report's words (the run itself:
tests/local/test_hang_local.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sm_dist.container import shell as shell_mod
from sm_dist.container.stacks import Frame, Rank, Stack
from sm_dist.container.stacks_now import report
from sm_dist.contract.container import OPT_ML_ENV
from sm_dist.errors import ConfigError
from sm_dist.local import debug as local_debug
from sm_dist.local import mountns


def _run_folder(base: Path, hosts: int = 2) -> Path:
    for index in range(1, hosts + 1):
        config = base / "run" / "hosts" / f"algo-{index}" / "input" / "config"
        config.mkdir(parents=True)
        (config / "resourceconfig.json").write_text(json.dumps(
            {"current_host": f"algo-{index}", "hosts": [f"algo-{i}" for i in range(1, hosts + 1)],
             "current_instance_type": "ml.g5.xlarge", "network_interface_name": "lo"}))
    return base / "run"


def test_a_local_job_is_found_by_its_folder_or_by_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run_folder(tmp_path / "sm-dist-20260101-000000-000")
    assert local_debug.find_run(str(tmp_path / "sm-dist-20260101-000000-000")) == run
    assert local_debug.find_run(str(run)) == run
    monkeypatch.setattr(local_debug, "default_base", lambda: tmp_path)
    assert local_debug.find_run("sm-dist-20260101-000000-000") == run
    assert local_debug.find_run("sm-dist-elsewhere") is None
    assert local_debug.hosts(run) == ["algo-1", "algo-2"]


def test_the_shell_runs_in_the_hosts_folder_where_no_namespace_is_allowed(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run_folder(tmp_path / "job")
    monkeypatch.setattr(mountns, "unshare_prefix", lambda: None)
    argv, env = local_debug.shell_argv(run, "algo-2", "echo $SM_CURRENT_HOST")
    assert argv[1:] == ["-m", "sm_dist.container.shell", "--", "echo $SM_CURRENT_HOST"]
    assert env[OPT_ML_ENV] == str((run / "hosts" / "algo-2").resolve())
    monkeypatch.setattr(mountns, "unshare_prefix", lambda: ("unshare", "--mount"))
    wrapped, env = local_debug.shell_argv(run, "algo-1", None)
    assert wrapped[:2] == ["unshare", "--mount"] and str((run / "hosts" / "algo-1").resolve()) in wrapped
    assert OPT_ML_ENV not in env and wrapped[-2:] == ["-m", "sm_dist.container.shell"]
    with pytest.raises(ConfigError, match=r"--host='algo-3': the local job has hosts algo-1, algo-2"):
        local_debug.shell_argv(run, "algo-3", None)


def test_stacks_of_a_job_that_is_not_running_are_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"is not running \(its ranks' stacks went with them"):
        local_debug.stacks(_run_folder(tmp_path / "job"))


def test_the_shells_environment_is_the_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _run_folder(tmp_path / "job") / "hosts" / "algo-2"
    monkeypatch.setattr(shell_mod, "count_gpus", lambda: 0)
    env = shell_mod.host_environment(root, {"PYTHONPATH": "/elsewhere"})
    assert env["SM_CURRENT_HOST"] == "algo-2" and json.loads(env["SM_HOSTS"]) == ["algo-1", "algo-2"]
    assert env["SM_CURRENT_HOST_RANK"] == "1" and env["SM_MODEL_DIR"] == f"{root}/model"
    assert env["PYTHONPATH"].split(":") == [f"{root}/input/data/code", "/elsewhere"]
    assert env["PS1"].startswith("(algo-2)")
    assert "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY" not in env  # off a warm pool the platform sets none
    (root / "sagemaker" / "warmpoolcache").mkdir(parents=True)  # local mode's link to the kept pool
    env = shell_mod.host_environment(root, {})
    assert env["SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"] == f"{root}/sagemaker/warmpoolcache"


def _stack(rank: str, *files: str) -> Stack:
    frames = tuple(Frame(f, 10 + i, f"f{i}") for i, f in enumerate(files))
    return Stack(Rank("0", rank, 100 + int(rank), 1, Path("/dev/null")), frames, "dump")


def test_the_report_names_the_rank_that_stopped_and_those_that_wait() -> None:
    waiting = _stack("0", "/x/site-packages/torch/distributed/distributed_c10d.py", "/opt/ml/code/train.py")
    stopped = _stack("1", "/opt/ml/code/train.py", "/opt/ml/code/train.py")
    text = report({"algo-1": [waiting], "algo-2": [stopped], "algo-3": []})
    lines = text.splitlines()
    assert lines[0] == "algo-1: 1 rank(s)" and "rank 0 (local 0, pid 100): waiting in a collective" in lines[1]
    assert "rank 1 (local 0, pid 101): STOPPED here (not in a collective) at train.py, line 10, in f0" in text
    assert "algo-3: no live rank" in text and "every rank waits" not in text
    assert "every rank waits in a collective" in report({"algo-1": [waiting]})
