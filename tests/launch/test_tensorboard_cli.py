"""`sm-dist tensorboard JOB`: a local job's downloaded folder, else the cloud job's S3 prefix (docs/guides/live.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sm_dist import cli
from sm_dist.cloud.job import Job
from sm_dist.slurm.options import SlurmOptions


def local_run(tmp_path: Path, tensorboard: bool) -> Path:
    run = tmp_path / "job-1" / "run"
    (run / "hosts" / "algo-1").mkdir(parents=True)
    if tensorboard:
        (run / "tensorboard" / "sm_dist").mkdir(parents=True)
    return run


def test_a_local_job_gets_its_downloaded_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = local_run(tmp_path, tensorboard=True)
    assert cli.main(["tensorboard", str(tmp_path / "job-1"), "--port", "7007"]) == 0
    assert capsys.readouterr().out.strip() == f"tensorboard --logdir {run / 'tensorboard'} --port 7007"


def test_a_local_job_without_tensorboard_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    local_run(tmp_path, tensorboard=False)
    assert cli.main(["tensorboard", str(tmp_path / "job-1")]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ran locally without tensorboard=True (--tensorboard)" in err


def test_a_cloud_job_gets_its_s3_prefix(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(Job, "describe", lambda self: {"TensorBoardOutputConfig": {"S3OutputPath": f"s3://b/{self.name}/tb"}})
    assert cli.main(["tensorboard", "cloud-job-7", "--region", "us-east-1"]) == 0
    assert capsys.readouterr().out.strip() == "tensorboard --logdir s3://b/cloud-job-7/tb --port 6006"


def test_a_job_found_nowhere_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Neither a local run, a training job nor a run's first job: the name the user typed, not `<name>-1`'s, and
    every place looked in."""
    from sm_dist.cloud.run import Run
    from sm_dist.errors import ConfigError
    from sm_dist.local.clean import default_base

    def missing(*_: object, **__: object) -> None:
        raise ConfigError("job", "x", "no such training job in this region")

    monkeypatch.setattr(Job, "describe", missing)
    monkeypatch.setattr(Run, "jobs", missing)
    assert cli.main(["tensorboard", "no-such-job-42", "--region", "eu-west-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["sm-dist tensorboard: error: job='no-such-job-42': no job of that name here (no local run of that "
                   f"name under {default_base()}) or on Slurm (no job of that name under {SlurmOptions().job_root('x').parent}) "
                   "or in eu-west-1 (a training job, or a chained run's no-such-job-42-1): check the name"]
