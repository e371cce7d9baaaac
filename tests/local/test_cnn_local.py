"""Local mode end to end: the real plan, PID 1, torchrun, runtime and checkpoints (CPU, gloo).

Kept small for 2 shared cores: the CNN at 16 steps on 1024 synthetic samples (8 steps an
epoch, a checkpoint every 4 steps, so resumes land mid-epoch and runs cross an epoch), with dropout and
a cosine schedule after a warm-up, so a resume is bit-identical only if the RNG streams, the schedule
and the sampler's place all come back. The kill and spot runs use 2 hosts × 2 processes, as the README's
main job does (4 gloo ranks: the case where DDP's bucket rebuild used to break bit-identical resume).
The uninterrupted run both must match is the `--verify` run of the kill test, whose job also serves the
checks every local job must pass; it runs under network isolation (no S3 in the containers: the restarted
hosts restore from each other, docs/PLATFORM.md §1.7.1), while the spot test's hosts restore from S3.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import sm_dist
from sm_dist.local import LocalJob, LocalOptions
from sm_dist.local import run as run_local
from sm_dist.planning.plan import Plan

pytestmark = pytest.mark.slow
CNN_HPS = {"steps": "16", "dataset-size": "1024", "dropout": "0.2", "lr-schedule": "cosine", "warmup-steps": "5"}
MLFLOW_ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"
#: Short grace in tests: the runtime commits its SIGTERM checkpoint within a second or two.
GRACE = 60.0


def make_plan(src: Path, *, entry: str = "cnn.py", hosts: int = 2, nproc: int = 2, **settings: Any) -> Plan:
    src.mkdir(parents=True, exist_ok=True)  # an empty source dir: the bundle is sm_dist + the entrypoint
    return sm_dist.plan(
        entry, source_dir=str(src), local=True, instance_type="ml.g5.xlarge", instance_count=hosts,
        nproc_per_node=nproc, checkpoint_interval_steps=4,
        hyperparameters=settings.pop("hyperparameters", CNN_HPS), **settings,
    )


def run(tmp: Path, plan: Plan, **kw: Any) -> LocalJob:
    return run_local(plan, LocalOptions(root=tmp / "root", grace_seconds=GRACE, echo=False, **kw))


def explain(job: LocalJob) -> str:
    return f"{job.summary()}\n--- logs ---\n{text(job)[-6000:]}"


def text(job: LocalJob, host: str | None = None) -> str:
    return "\n".join(job.logs(host=host))


@pytest.fixture(scope="module")
def kill_job(tmp_path_factory: pytest.TempPathFactory) -> LocalJob:
    """kill:6 with --verify on two isolated hosts: the chaos run and the uninterrupted run of the same plan
    (with tensorboard=True: its sync is the platform's, so isolation does not stop it; with mlflow=: a local
    file store, read by test_mlflow_file_store_holds_the_runs_metrics)."""
    tmp = tmp_path_factory.mktemp("kill")
    return run(tmp, make_plan(tmp / "src", network_isolation=True, tensorboard=True, mlflow=MLFLOW_ARN),
               chaos=["kill:6"], verify=True)


def test_kill_survives_with_identical_model(kill_job: LocalJob) -> None:
    s = kill_job.summary()
    assert s.status == "Completed", explain(kill_job)
    assert s.chaos_fired == ("kill:6",)
    assert "kill:6: SIGKILL to rank" in s.chaos_events[0]
    assert s.in_job_restarts >= 1 and s.restarts >= 1, explain(kill_job)
    assert s.resumed_from and s.resumed_from[0] >= 4, explain(kill_job)
    assert s.steps == 16
    assert s.verified is True, explain(kill_job)
    assert s.model_sha256 == s.verify_model_sha256
    assert kill_job.verify_run is not None and kill_job.verify_run.progress.resumed_from == []
    # without S3 in the containers, both restarted hosts restored their folders from the other host
    logs = text(kill_job)
    restored = re.findall(r"(algo-\d): checkpoint folder restored from the other hosts .*: (\d+) file\(s\) fetched", logs)
    assert {host for host, _ in restored} == {"algo-1", "algo-2"}, explain(kill_job)
    assert any(host == "algo-2" and int(n) > 0 for host, n in restored)  # rank 0's checkpoint, from algo-1
    assert "credentials" not in logs.lower()  # nothing in the containers asked S3


def test_a_crash_in_save_then_a_spot_interruption_with_s3_faults(kill_job: LocalJob, tmp_path: Path) -> None:
    """--chaos crash-in-save:8 reaches the workers' checkpointer: a rank dies while saving step 8 and the
    restarted workers resume from step 4, never from the half-written 8 (what a torn save leaves on disk
    and that resuming skips it are tests/checkpoint/test_runs.py's). Then sigterm:10 stops the job (a spot
    interruption) under S3 faults, and the new "instances" restore from the URI. The model is still the
    uninterrupted run's. (The checkpointer's fault hook is armed in the job's first attempt only.)"""
    job = run(tmp_path, make_plan(tmp_path / "src"), chaos=["crash-in-save:8", "s3-faults:3", "sigterm:10"])
    s = job.summary()
    assert s.status == "Completed", explain(job)
    assert "crash-in-save:8" in s.chaos_fired and not s.chaos_missed, explain(job)
    assert s.in_job_restarts >= 1 and s.job_restarts == 1 and s.restarts >= 2, explain(job)
    assert s.resumed_from and s.resumed_from[0] == 4, explain(job)  # the half-written step 8 was never used
    # every host saw the checkpoint committed and its PID 1 exited 143 (EXIT_INTERRUPTED)
    assert set(job.run.outcome.exit_codes[0].values()) == {143}, explain(job)
    assert job.run.outcome.restored_files[1] > 0  # the new "instances" got the checkpoints from the URI
    assert 10 <= s.resumed_from[-1] < 16 and s.steps == 16, explain(job)  # the SIGTERM checkpoint
    assert s.s3_faults_injected > 0
    assert "stopped after step" in text(job)  # the checkpointer says why the workers exited
    assert s.model_sha256 == kill_job.summary().verify_model_sha256, explain(job)


def test_two_hosts_two_processes(kill_job: LocalJob) -> None:
    """What any local job shows, read from the kill test's job (2 hosts x 2 processes, 16 steps): one
    job serves both, the kill changes none of it."""
    job = kill_job
    s = job.summary()
    assert s.status == "Completed", explain(job)
    assert (s.hosts, s.processes_per_host, s.steps) == (2, 2, 16)
    for host in ("algo-1", "algo-2"):
        assert f"host {host} (" in text(job, host)  # PID 1 ran as each host's first process
        assert "--nproc-per-node=2" in text(job, host)
    assert "[algo-1] " in text(job) and "[algo-2] " in text(job)
    models = [job.model_dir(h) / "model.pt" for h in ("algo-1", "algo-2")]
    assert any(m.is_file() for m in models), explain(job)
    checkpoints = job.checkpoints()  # as the cloud Job lists them: CheckpointInfo, newest first
    assert checkpoints and checkpoints[0].committed and checkpoints[0].step == 16, checkpoints
    assert checkpoints[0].uri.startswith("s3://sm-dist-local/") and checkpoints[0].total_bytes > 0
    status = job.status()
    assert (status.status, status.done, status.failure_reason) == ("Completed", True, None)
    assert s.cost.local_usd == 0.0 and s.cost.sagemaker_usd > 0 and job.cost().usd == 0.0


def test_tensorboard_is_synced_while_it_runs(kill_job: LocalJob) -> None:
    """tensorboard=True (docs/PLATFORM.md §1.14): rank 0 writes the metric lines as scalars to $SM_TENSORBOARD_DIR,
    local mode syncs the folder to the job's S3 TensorBoard prefix while the job runs (uploads before the last
    pass), and the event files read back from S3 with TensorBoard's own reader hold the loss of every step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_ = kill_job.run
    assert run_.tensorboard_uri == f"s3://sm-dist-local/sm-dist/{kill_job.name}/tensorboard"
    assert run_.outcome.tensorboard_uploads_running >= 1, explain(kill_job)  # synced before the job ended
    assert run_.tensorboard_keys and all(k.startswith("sm_dist/events.out.tfevents.") for k in run_.tensorboard_keys)
    acc = EventAccumulator(str(kill_job.root / "tensorboard" / "sm_dist"))
    acc.Reload()
    steps = {e.step for e in acc.Scalars("loss")}  # the killed workers' file and the restarted ones'
    assert steps == set(range(1, 17)), steps
    assert kill_job.tensorboard() == f"tensorboard --logdir {kill_job.root / 'tensorboard'} --port 6006"
    assert f"tensorboard --logdir {kill_job.root / 'tensorboard'}" in str(kill_job.summary())
    assert kill_job.verify_run is not None and kill_job.verify_run.tensorboard_uri == f"{run_.tensorboard_uri}-verify"


def test_mlflow_file_store_holds_the_runs_metrics(kill_job: LocalJob, monkeypatch: pytest.MonkeyPatch) -> None:
    """mlflow=: rank 0 logged the metric lines into a file store under the run's folder, in one run that the
    restarted rank 0 (after kill:6) continued; the summary says where and how to look (PLATFORM §1.15)."""
    from mlflow.tracking import MlflowClient

    uri = kill_job.mlflow_uri
    assert uri == (kill_job.root / "mlflow").resolve().as_uri(), uri
    assert f"mlflow ui --backend-store-uri {uri}" in str(kill_job.summary())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("sm-dist")
    assert experiment is not None, explain(kill_job)
    [mlrun] = client.search_runs([experiment.experiment_id])
    assert mlrun.info.run_name == kill_job.name and mlrun.info.status == "FINISHED"
    steps = {m.step for m in client.get_metric_history(mlrun.info.run_id, "loss")}
    # the restarted rank 0 logged every step after the resume; the killed one's lines still queued died with it
    resumed = kill_job.summary().resumed_from[0]
    assert set(range(resumed + 1, 17)) <= steps <= set(range(1, 17)), steps


def test_cli_fit_local_json_with_a_sharded_strategy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`sm-dist fit --local --json --logs`: one JSON object on stdout, the hosts' logs on stderr. The job
    is gpt.py under fsdp on 2 hosts: the plan's strategy is in every host's job spec and the runtime
    trains with it (each workload under each sharded strategy is tests/workloads/test_entrypoints.py's).
    Then, in this process, `sm-dist status | logs | checkpoints | cost NAME` find it by the name it printed, with
    no AWS region anywhere (any AWS call would fail)."""
    from sm_dist import cli

    src = tmp_path / "src"
    src.mkdir()
    argv = [sys.executable, "-m", "sm_dist.cli", "fit", "gpt.py", "--local", "--json", "--source-dir", str(src),
            "--instance-type", "ml.g5.xlarge", "--instance-count", "2", "--nproc-per-node", "1", "--strategy", "fsdp",
            "--hp", "steps=2", "--hp", "dataset-tokens=8192", "--hp", "seq-len=32", "--job-name", "gpt-fsdp-7",
            "--logs"]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-4000:]
    summary = json.loads(out.stdout)
    assert (summary["status"], summary["steps"], summary["restarts"], summary["verified"]) == ("Completed", 2, 0, None)
    assert summary["model_sha256"], summary
    assert "[algo-2] " in out.stderr
    root = tmp_path / "sm-dist-local" / "gpt-fsdp-7"
    spec = json.loads((root / "run" / "hosts" / "algo-2" / "input" / "data" / "code" / "sm_dist_job.json").read_text())
    assert spec["strategy"] == "fsdp"  # what every host's PID 1 and runtime read
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    assert cli.main(["status", "gpt-fsdp-7", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "Completed"
    assert cli.main(["logs", "gpt-fsdp-7"]) == 0
    assert "[algo-2] " in capsys.readouterr().out
    assert cli.main(["checkpoints", "gpt-fsdp-7"]) == 0
    listed = capsys.readouterr().out.splitlines()  # the final step's checkpoint, listed when the run ended
    assert len(listed) == 1 and listed[0].startswith("step         2  committed") and summary["checkpoints_committed"] == [2]
    assert cli.main(["cost", "gpt-fsdp-7", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    assert (cost["local_usd"], cost["instance_count"]) == (0.0, 2) and cost == summary["cost"]
