"""sm_dist.container.worker: what a restarted worker does before it becomes the script, and when
PID 1 puts it in front of the script."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _harness import HANG_GUARD_S, child_env

from sm_dist.container import pid1_env, worker
from sm_dist.contract.checkpoint import CheckpointSettings
from sm_dist.contract.worker_errors import cannot_recover, errors_in
from sm_dist.jobspec import JobSpec


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
    """The restore commands run (instead of running them, each succeeds); yields the list."""
    seen: list[list[str]] = []
    monkeypatch.setattr(worker, "_run_helper", lambda argv, env: (seen.append(argv), (0, ""))[1])
    return seen


def test_the_first_start_restores_nothing_a_restart_restores_the_folder(tmp_path: Path, calls) -> None:
    first = worker.prepare(host_env(tmp_path, port="41000"))
    assert calls == []  # SageMaker restored the folder before the job started
    assert first == {worker.NOT_RESTORING_ENV: "job-1-41000"}  # run_script says so at the meeting
    # torchrun restarted this host's workers without counting a restart here (algo-1's worker
    # failed): a new rendezvous round, a new MASTER_PORT
    assert worker.prepare(host_env(tmp_path, port="41007")) == {}
    [argv] = calls
    assert argv[1:3] == ["-m", "sm_dist.runtime.restore.folder_restore"]
    opts = dict(zip(argv[3::2], argv[4::2]))
    assert opts["--folder"] == str(tmp_path / "algo-2" / "checkpoints")  # /opt/ml remapped
    assert opts["--uri"] == "s3://bucket/ckpt" and opts["--hosts"] == "algo-1,algo-2"
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


def test_a_worker_pid1_gave_up_on_does_not_run_the_script_again(tmp_path: Path, calls) -> None:
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
    topo = pid1_env.Topology(hosts=("algo-1",), current_host="algo-1", node_rank=0, rdzv_host="algo-1",
                                 rdzv_port=29400, nproc_per_node=1, num_gpus=0, local_addr="algo-1")
    synced = JobSpec(entry="train.py", checkpoint=CheckpointSettings(mode="sagemaker-sync", uri="s3://b/c"))
    direct = JobSpec(entry="train.py", checkpoint=CheckpointSettings(mode="s3", uri="s3://b/c"))
    function = JobSpec(entry="pkg.mod:main", checkpoint=CheckpointSettings(mode="sagemaker-sync", uri="s3://b/c"))
    for spec in (synced, direct, function):
        argv = pid1_env.torchrun_argv(topo, spec, tmp_path, "job")
        assert argv[argv.index("--module") + 1] == "sm_dist.container.worker"
    assert pid1_env.torchrun_argv(topo, synced, tmp_path, "job")[-1] == str(tmp_path / "train.py")

    def restores(spec: JobSpec) -> bool:
        env = pid1_env.worker_env({}, topo, tmp_path, tmp_path, tmp_path / "m", tmp_path / "state", spec)
        return env.get(worker.RESTORE_ENV) == "1"

    assert restores(synced) and not restores(direct) and not restores(function)


def test_a_restore_that_keeps_failing_never_starts_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Tried again, then the worker exits with the reason, in the line PID 1's failure watch
    reads as an error no restart can fix; a refusal (exit 3) is not tried again."""
    answers = iter([(1, "DistNetworkError: connection refused"), (1, "algo-1 did not reach the restore in 600 s"),
                    (1, "algo-1 did not reach the restore in 600 s")])
    monkeypatch.setattr(worker, "_run_helper", lambda argv, env: next(answers))
    monkeypatch.setattr(worker, "RESTORE_RETRY_S", 0.0)
    worker.prepare(host_env(tmp_path, port="41000"))
    with pytest.raises(SystemExit) as stopped:
        worker.prepare(host_env(tmp_path, port="41001"))
    assert stopped.value.code == 1 and next(answers, None) is None  # three tries
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == ("sm_dist.container.worker: error: the checkpoint folder of algo-2 was not restored (algo-1 did not "
                         "reach the restore in 600 s); not starting the script on it")
    [error] = errors_in("algo-2", lines[-1:])
    assert cannot_recover(error)

    refused = iter([(worker.RESTORE_REFUSED, "hosts would resume from different files")])
    monkeypatch.setattr(worker, "_run_helper", lambda argv, env: next(refused))
    with pytest.raises(SystemExit):
        worker.prepare(host_env(tmp_path, port="41002"))
    assert next(refused, None) is None  # once


def test_the_ranks_marks_say_when_every_rank_finished(tmp_path: Path) -> None:
    """run_script marks each rank whose script finished, and the round in which every rank had;
    PID 1 asks `finished` (the marks of one round only)."""
    state = tmp_path / "state"
    env = {worker.STATE_ENV: str(state), "TORCHELASTIC_RUN_ID": "job", "MASTER_PORT": "41000"}
    worker.mark_finished({**env, "LOCAL_RANK": "0"})
    assert not worker.finished(state, 2)
    worker.mark_finished({**env, "LOCAL_RANK": "1"})
    assert not worker.finished(state, 2)  # this host's ranks, but not yet every rank of the job
    worker.mark_finished({**env, "LOCAL_RANK": "1"}, every_rank=True)
    assert worker.finished(state, 2)
    worker.mark_finished({**env, "LOCAL_RANK": "0", "MASTER_PORT": "41007"})  # a later round started
    assert not worker.finished(state, 2)


def run_script(tmp_path: Path, source: str, env: dict[str, str] | None = None, *args: str) -> Any:
    """`python -u -m sm_dist.runtime.run_script SCRIPT ARGS` on `source`; the finished process."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, "-u", "-m", worker.RUN_SCRIPT_MODULE, str(script), *args],
                          env=child_env(env), cwd=tmp_path / "..", capture_output=True, text=True, timeout=HANG_GUARD_S)


@pytest.mark.slow
def test_the_script_runs_as_python_would_run_it(tmp_path: Path) -> None:
    """As `python -u SCRIPT ARGS`: __main__, argv, its folder first on sys.path, its exit code, and
    its errors printed from its own frames (a syntax error without a Traceback header)."""
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    out = run_script(tmp_path, """
        import sys, helper
        print(__name__, sys.argv[1:], helper.VALUE)
        """, None, "--steps", "3")
    assert out.returncode == 0 and out.stdout.strip() == "__main__ ['--steps', '3'] 7", out.stderr
    assert run_script(tmp_path, "import sys; sys.exit(3)").returncode == 3
    assert run_script(tmp_path, "import sys; sys.exit(0)").returncode == 0
    failed = run_script(tmp_path, """
        def step():
            raise ValueError("boom")
        step()
        """)
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[:2] == ["Traceback (most recent call last):",
                                              f'  File "{tmp_path / "train.py"}", line 4, in <module>']
    assert failed.stderr.strip().endswith("ValueError: boom") and "run_script" not in failed.stderr
    broken = run_script(tmp_path, "def f(:\n    pass\n")
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    [error] = errors_in("algo-1", broken.stderr.splitlines())
    assert error.text == "SyntaxError: invalid syntax (train.py, line 1)" and cannot_recover(error)


@pytest.mark.slow
def test_a_finished_rank_waits_for_every_rank_and_says_so(tmp_path: Path) -> None:
    """Two ranks on two "hosts" (one rendezvous store): the first to finish waits for the second;
    then both hosts' marks say every rank finished (what PID 1 reads)."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=30), wait_for_workers=False)
    script = tmp_path / "train.py"
    script.write_text("import os, time\ntime.sleep(float(os.environ['SLEEP_S']))\n")
    procs, states = [], []
    for rank, sleep_s in ((0, "0"), (1, "2")):
        states.append(tmp_path / f"state-{rank}")
        env = child_env({worker.STATE_ENV: str(states[-1]), worker.RDZV_ENDPOINT_ENV: f"127.0.0.1:{store.port}",
                         "WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": "0", "MASTER_PORT": "41000",
                         "TORCHELASTIC_RUN_ID": "job", "SLEEP_S": sleep_s})
        procs.append(subprocess.Popen([sys.executable, "-u", "-m", worker.RUN_SCRIPT_MODULE, str(script)], env=env))
    time.sleep(1.5)
    assert procs[0].poll() is None  # finished, waiting for rank 1
    assert (states[0] / worker.FINISHED_DIR / "0").exists() and not worker.finished(states[0], 1)
    assert [p.wait(timeout=HANG_GUARD_S) for p in procs] == [0, 0]
    assert worker.finished(states[0], 1) and worker.finished(states[1], 1)


def test_a_host_starting_for_the_first_time_does_not_hold_up_a_host_that_restores(tmp_path: Path) -> None:
    """The soak's stall: a spot restart, then a kill as algo-1's worker started (before it recorded
    the round). algo-1's restarted worker had no earlier round and did not restore; algo-2's did
    and waited at the meeting for algo-1 (600 s, three times). algo-1 now comes as NOT_RESTORING."""
    from datetime import timedelta

    from _harness import free_port
    from torch.distributed import TCPStore

    from sm_dist.runtime import run_script
    from sm_dist.runtime.restore import meeting

    port = free_port()
    master = TCPStore("127.0.0.1", port, is_master=True, timeout=timedelta(seconds=30))
    endpoint = f"127.0.0.1:{port}"
    met: list[tuple[list[str], dict[str, str]]] = []
    waiter = threading.Thread(target=lambda: met.append(meeting.meet(
        endpoint, "job-1-41007", ["algo-1", "algo-2"], "algo-2", timeout=HANG_GUARD_S, share='["snapshot.pt"]')))
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive()  # algo-2 waits for algo-1
    run_script.not_restoring({worker.RDZV_ENDPOINT_ENV: endpoint, "SM_CURRENT_HOST": "algo-1"}, "job-1-41007")
    waiter.join(HANG_GUARD_S)
    [(missing, shared)] = met
    assert missing == [] and shared == {"algo-1": worker.NOT_RESTORING, "algo-2": '["snapshot.pt"]'}
    assert meeting.split_resume(shared) is None  # a host that did not restore splits nothing
    del master
