"""sm_dist.container.worker: what a restarted worker does before it becomes the script, and when
the launcher puts it in front of the script."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from sm_dist.container import launcher_env, worker
from sm_dist.jobspec import CheckpointSpec, JobSpec


def host_env(tmp_path: Path, *, port: str, local_rank: str = "0", with_config: bool = True) -> dict[str, str]:
    root = tmp_path / "algo-2"
    config = root / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    if with_config:
        (config / "checkpointconfig.json").write_text(json.dumps(
            {"LocalPath": "/opt/ml/checkpoints", "S3Uri": "s3://bucket/ckpt"}))
    return {
        "SM_DIST_OPT_ML": str(root), worker.STATE_ENV: str(tmp_path / "state"),
        worker.RDZV_ENDPOINT_ENV: "127.0.0.1:29400", "SM_HOSTS": '["algo-1", "algo-2"]',
        "SM_CURRENT_HOST": "algo-2", "LOCAL_RANK": local_rank, "MASTER_PORT": port,
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_RUN_ID": "job-1", worker.RESTORE_ENV: "1",
    }


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The restore commands run (instead of running them); yields the list."""
    seen: list[list[str]] = []
    monkeypatch.setattr(worker.subprocess, "call", lambda argv, env: seen.append(argv) or 0)
    return seen


def test_the_first_start_restores_nothing_a_restart_restores_the_folder(tmp_path: Path, calls) -> None:
    worker.prepare(host_env(tmp_path, port="41000"))
    assert calls == []  # SageMaker restored the folder before the job started
    # torchrun restarted this host's workers without counting a restart here (algo-1's worker
    # failed): a new rendezvous round, a new MASTER_PORT
    worker.prepare(host_env(tmp_path, port="41007"))
    [argv] = calls
    assert argv[1:3] == ["-m", "sm_dist.runtime.checkpoint.folder_restore"]
    opts = dict(zip(argv[3::2], argv[4::2]))
    assert opts["--folder"] == str(tmp_path / "algo-2" / "checkpoints")  # /opt/ml remapped
    assert opts["--uri"] == "s3://bucket/ckpt" and opts["--hosts"] == "2"
    assert opts["--round"] == "job-1-41007" and opts["--endpoint"] == "127.0.0.1:29400"


def test_other_local_ranks_wait_for_the_restore(tmp_path: Path, calls) -> None:
    worker.prepare(host_env(tmp_path, port="41000"))
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (worker.prepare(host_env(tmp_path, port="41009", local_rank="1")),
                                              done.set()))
    waiter.start()
    assert not done.wait(0.5)  # local rank 0 has not restored yet
    worker.prepare(host_env(tmp_path, port="41009"))
    assert done.wait(10)
    waiter.join()


def test_nothing_to_restore_without_a_checkpoint_uri(tmp_path: Path, calls) -> None:
    for port in ("41000", "41001"):
        worker.prepare(host_env(tmp_path, port=port, with_config=False))
    assert calls == []


def test_a_worker_the_launcher_gave_up_on_does_not_run_the_script_again(tmp_path: Path, calls) -> None:
    env = host_env(tmp_path, port="41000")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / worker.STOP_FILE).write_text("ValueError: boom  (algo-2, rank 1); not restarted")
    with pytest.raises(SystemExit) as stopped:
        worker.prepare(env)
    assert stopped.value.code == 1 and calls == []


def test_every_worker_starts_through_the_worker_step_restore_only_for_synced_scripts(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "input" / "config").mkdir(parents=True)
    (tmp_path / "input" / "config" / "resourceconfig.json").write_text('{"current_host": "algo-1", "hosts": ["algo-1"]}')
    topo = launcher_env.Topology(hosts=("algo-1",), current_host="algo-1", node_rank=0, rdzv_host="algo-1",
                                 rdzv_port=29400, nproc_per_node=1, num_gpus=0, local_addr="algo-1")
    synced = JobSpec(entry="train.py", checkpoint=CheckpointSpec(mode="sagemaker-sync", uri="s3://b/c"))
    direct = JobSpec(entry="train.py", checkpoint=CheckpointSpec(mode="s3", uri="s3://b/c"))
    function = JobSpec(entry="pkg.mod:main", checkpoint=CheckpointSpec(mode="sagemaker-sync", uri="s3://b/c"))
    for spec in (synced, direct, function):
        argv = launcher_env.torchrun_argv(topo, spec, tmp_path, "job")
        assert argv[argv.index("--module") + 1] == "sm_dist.container.worker"
    assert launcher_env.torchrun_argv(topo, synced, tmp_path, "job")[-1] == str(tmp_path / "train.py")

    def restores(spec: JobSpec) -> bool:
        env = launcher_env.worker_env({}, topo, tmp_path, tmp_path, tmp_path / "m", tmp_path / "state", spec)
        return env.get(worker.RESTORE_ENV) == "1"

    assert restores(synced) and not restores(direct) and not restores(function)
