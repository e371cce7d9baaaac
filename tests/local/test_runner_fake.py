"""The runner with a fake container command: hosts, logs, model, spot restart, failure."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sm_dist.errors import LaunchError
from sm_dist.local import mountns
from sm_dist.local.chaos import parse_faults
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.runner import LocalRunner, RunSettings
from sm_dist.local.stores import FolderStore

pytestmark = pytest.mark.slow  # starts processes (tests/_process_guard.py)


def _settings(tmp_path: Path, lines: list[tuple[str, str]], **kw: object) -> RunSettings:
    return RunSettings(job_root=tmp_path / "job", store=FolderStore(tmp_path / "uri"), grace_seconds=10,
                       sync_interval=0.1, on_line=lambda h, line: lines.append((h, line)), **kw)  # type: ignore[arg-type]


def test_two_hosts_complete(fake_config: LocalJobConfig, tmp_path: Path) -> None:
    lines: list[tuple[str, str]] = []
    runner = LocalRunner(fake_config, _settings(tmp_path, lines))
    outcome = runner.run()
    assert outcome.status == "Completed", outcome
    assert {h for h, _ in lines} == {"algo-1", "algo-2"}
    assert any("rank=1" in line for h, line in lines if h == "algo-2")
    assert (tmp_path / "job" / "hosts" / "algo-1" / "model" / "model.txt").is_file()
    assert runner.progress.final_step == 8 and runner.progress.model_sha256
    assert (tmp_path / "job" / "logs" / "algo-2.log").read_text().startswith("host=algo-2")
    assert sorted(FolderStore(tmp_path / "uri").list()) == ["step-6.txt", "step-8.txt"]


def test_spot_interruption_restarts_from_uri(fake_config: LocalJobConfig, tmp_path: Path) -> None:
    lines: list[tuple[str, str]] = []
    config = dataclasses.replace(fake_config, hyperparameters={"steps": "12", "ckpt_every": "4"})
    runner = LocalRunner(config, _settings(tmp_path, lines, faults=parse_faults(["sigterm:5"])))
    outcome = runner.run()
    assert outcome.status == "Completed", outcome
    assert outcome.job_restarts == 1
    assert outcome.exit_codes[0] == {"algo-1": 143, "algo-2": 143}  # both saw SIGTERM and exited
    resumed = runner.progress.resumed_from
    assert len(resumed) == 1 and 5 <= resumed[0] < 12  # saved on SIGTERM, restored on the new hosts
    assert outcome.restored_files[1] >= 1
    assert runner.progress.final_step == 12


def test_failing_host_fails_the_job(fake_config: LocalJobConfig, tmp_path: Path) -> None:
    config = dataclasses.replace(fake_config, container_command=(
        "python3", "-c", "import json,os,sys,time,pathlib\n"
        "root = pathlib.Path(os.environ.get('SM_DIST_OPT_ML', '/opt/ml'))\n"
        "if json.loads((root / 'input/config/resourceconfig.json').read_text())['current_host'] == 'algo-2':\n"
        "    (root / 'output/failure').write_text('boom on algo-2'); sys.exit(3)\n"
        "time.sleep(600)"))
    outcome = LocalRunner(config, _settings(tmp_path, [])).run()
    assert outcome.status == "Failed"
    # each host's own line: algo-2's error, algo-1 stopped because of it (not a SIGTERM cause of its own)
    assert outcome.failures == {"algo-2": "boom on algo-2", "algo-1": "stopped after algo-2 failed"}
    assert outcome.exit_codes[0]["algo-2"] == 3 and outcome.exit_codes[0]["algo-1"] != 0


def test_max_runtime_stops_the_job(fake_config: LocalJobConfig, tmp_path: Path) -> None:
    config = dataclasses.replace(fake_config, container_command=("python3", "-c", "import time; time.sleep(600)"))
    outcome = LocalRunner(config, _settings(tmp_path, [], max_runtime_s=1.0)).run()
    assert outcome.status == "Stopped" and outcome.stopped_reason == "MaxRuntimeExceeded"
    assert outcome.error == ("stopped at its MaxRuntime (MaxRuntimeInSeconds=1 reached): status Stopped, "
                             "MaxRuntimeExceeded, as SageMaker reports it")  # not the SIGTERM's SignalException
    assert all(code == -15 for code in outcome.exit_codes[0].values())  # SIGTERM reached the first process


def test_missing_command_is_a_launch_error(fake_config: LocalJobConfig, tmp_path: Path) -> None:
    config = dataclasses.replace(fake_config, container_command=("/no/such/launcher",))
    with pytest.raises(LaunchError, match="cannot start the container command '/no/such/launcher'"):
        LocalRunner(config, _settings(tmp_path, [])).run()


def test_a_host_that_cannot_start_names_the_cause(fake_config: LocalJobConfig, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that fails before its container command (here: its mounts) says why in the summary's error."""
    if mountns.unshare_prefix() is None:
        pytest.skip("no private mount namespace on this machine: nothing is mounted before the command")
    real = mountns.command
    monkeypatch.setattr(mountns, "command", lambda root, argv, hosts_file=None: real(root, argv, tmp_path / "none"))
    outcome = LocalRunner(fake_config, _settings(tmp_path, [])).run()
    assert outcome.status == "Failed"
    assert outcome.error is not None and outcome.error.startswith("cannot show")
    assert outcome.error.endswith("(algo-1, before the container command started)")
