"""`attach(name)` and the job commands on it: a local job found by name (its kept record) needs no region and no
AWS call; a name found nowhere is one line naming every place looked in; a backend joins with one entry."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from sm_dist import cli
from sm_dist.contract.checkpoint import Manifest
from sm_dist.contract.job import JobHandle
from sm_dist.errors import ConfigError
from sm_dist.launch import attach as attach_mod
from sm_dist.local import kept_job
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.job import LocalJob
from sm_dist.local.progress import Progress
from sm_dist.local.run_records import Outcome, RunRecord


@pytest.fixture
def local_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temp dir local runs go under (`<temp>/sm-dist-local`), and no AWS region or profile anywhere: a
    command that asked AWS would fail."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens: any AWS call would fail
    return tmp_path / "sm-dist-local"


def _finished_job(base: Path, config: LocalJobConfig, name: str) -> LocalJob:
    """A finished 2-host local job in `base` (as local mode leaves one): logs, two step folders, one committed."""
    root = base / "run"
    (root / "hosts" / "algo-1").mkdir(parents=True)
    (root / "logs").mkdir()
    (root / "logs" / "algo-1.log").write_text("[sm_dist] step=4 loss=0.5\n")
    (root / "logs" / "algo-2.log").write_text("worker 2 done\n")
    record = RunRecord(Outcome(status="Completed", started=100.0, ended=160.0), Progress(), 0, [], root,
                       checkpoint_keys={"step-000000004/manifest.json": 10, "step-000000004/model.pt": 90,
                                        "step-000000008/model.pt": 90},
                       checkpoint_manifests={"step-000000004": Manifest(step=4, epoch=0, world_size=2,
                                                                         sharded=False).to_json().encode()})
    from dataclasses import replace

    return LocalJob(config=replace(config, job_name=name), run=record, checkpoint_uri="s3://sm-dist-local/ck")


def test_status_logs_checkpoints_cost_of_a_local_job_by_name_ask_no_region(
        local_base: Path, fake_config: LocalJobConfig, capsys: pytest.CaptureFixture[str]) -> None:
    base = local_base / "rehearsal-7"
    job = _finished_job(base, fake_config, "rehearsal-7")
    kept_job.keep_record(base, job)
    assert cli.main(["status", "rehearsal-7"]) == 0
    assert capsys.readouterr().out.strip() == "rehearsal-7: Completed / Completed — local: 2 hosts, 0 restart(s)"
    assert cli.main(["logs", "rehearsal-7"]) == 0
    assert capsys.readouterr().out.splitlines() == ["[algo-1] [sm_dist] step=4 loss=0.5", "[algo-2] worker 2 done"]
    assert cli.main(["checkpoints", "rehearsal-7", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(c["step"], c["committed"]) for c in listed] == [(8, False), (4, True)]
    assert cli.main(["cost", "rehearsal-7"]) == 0
    assert capsys.readouterr().out == ("cost here       $0.00\non SageMaker    $0.0469 for the same 60 s on 2 × "
                                       "ml.g5.xlarge ($1.408/h, prices of 2025-06)\n")
    assert cli.main(["cost", "rehearsal-7", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(job.cost().to_dict()))
    handle = attach_mod.attach("rehearsal-7")
    assert isinstance(handle, JobHandle) and str(handle.summary()) == str(job.summary())
    assert cli.main(["cost", "rehearsal-7", "--calibration-out", str(local_base / "c.json")]) == 2
    assert "--calibration-out=" in capsys.readouterr().err and not (local_base / "c.json").exists()


def test_a_chained_local_run_is_found_by_the_runs_name(local_base: Path, fake_config: LocalJobConfig,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    base = local_base / "pretrain-1"  # a chain keeps its first job's folder
    job = _finished_job(base, fake_config, "pretrain-1")
    job.run_name = "pretrain"
    kept_job.keep_record(base, job)
    assert cli.main(["status", "pretrain"]) == 0
    assert capsys.readouterr().out.startswith("pretrain: Completed")
    assert kept_job.find("pretrai") == f"here (no local run of that name under {local_base})"


def test_a_running_local_job_says_so_and_a_name_found_nowhere_is_one_line(
        local_base: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    run = local_base / "live-1" / "run"
    (run / "hosts" / "algo-1").mkdir(parents=True)
    (run / "tmp" / "algo-1").mkdir(parents=True)
    assert cli.main(["status", "live-1"]) == 0
    assert capsys.readouterr().out.startswith("live-1: InProgress / Training — local: running on this machine")
    assert cli.main(["cost", "live-1"]) == 2
    assert "still runs on this machine" in capsys.readouterr().err

    def cloud(name: str, region: str | None) -> str:
        return f"in {region}"

    def slurm(name: str, region: str | None) -> str:
        return "on Slurm (no job of that name under /fsx/sm-dist)"

    monkeypatch.setattr(attach_mod, "finder", lambda target: kept_job.find if target.startswith("sm_dist.local")
                        else slurm if target.startswith("sm_dist.slurm") else cloud)
    with pytest.raises(ConfigError) as refused:
        attach_mod.attach("nowhere", region="eu-west-1")
    assert str(refused.value) == (f"job='nowhere': no job of that name here (no local run of that name under "
                                  f"{local_base}) or on Slurm (no job of that name under /fsx/sm-dist) or in "
                                  "eu-west-1: check the name")


def test_every_backend_entry_resolves_to_a_finder_in_a_world_the_facade_may_import() -> None:
    """A backend joins `BACKENDS` with one "module:function" string; the static import walk cannot see a string,
    so this does: each names a function in a backend package, never in the facade or the core."""
    assert list(attach_mod.BACKENDS)[-1] == "cloud"  # the one that needs AWS is asked last
    for name, target in attach_mod.BACKENDS.items():
        module = target.partition(":")[0]
        assert module.startswith(("sm_dist.local.", "sm_dist.cloud.", f"sm_dist.{name}.")), target
        assert callable(attach_mod.finder(target))
