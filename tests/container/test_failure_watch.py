"""PID 1's decision whether a restart can help (sm_dist.container.failure_watch) and the
failure message SageMaker shows (pid1.outcome), on torchrun's output as it prints it."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest
from _torchrun_lines import USERS_OWN

from sm_dist.container import failure_watch, pid1
from sm_dist.container.failure_watch import FailureWatch

FAILED = "E1124 14:41:13.491000 8114 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: {code}) local_rank: 0 (pid: 8119) of binary: /usr/bin/python3"


def traceback(last: str, rank: int = 1) -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):", f'[rank{rank}]:   File "train.py", line 9, in <module>',
            f"[rank{rank}]:     main()", f"[rank{rank}]: {last}"]


#: The end of torchrun's output after PID 1 SIGTERMed it (torch 2.13, shortened).
TORCHRUN_STOPPED = [
    "W1126 14:45:38.015000 10839 torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal, "
    "shutting down workers",
    "Traceback (most recent call last):",
    '  File "<frozen runpy>", line 198, in _run_module_as_main',
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 1032, in <module>',
    "    main()",
    '  File "/root/.pyenv/versions/3.11.7/lib/python3.11/inspect.py", line 1755, in stack',
    "    return getouterframes(sys._getframe(1), context)",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 10839 got signal: 15",
]


def feed(watch: FailureWatch, lines: list[str]) -> list[str | None]:
    return [v for v in (watch.feed(line) for line in lines) if v is not None]


def test_an_error_no_restart_can_fix_stops_at_the_first_failure() -> None:
    watch = FailureWatch("algo-2")
    verdicts = feed(watch, [*traceback("ModuleNotFoundError: No module named 'torchvision'"), FAILED.format(code=1)])
    assert verdicts == ["ModuleNotFoundError: No module named 'torchvision'  at train.py:9 in <module>  (algo-2, rank 1); "
                        "not restarted: a restart cannot fix it"]
    usage = FailureWatch("algo-1")
    assert feed(usage, ["usage: train.py [-h]", "train.py: error: unrecognized arguments: --bogus 1",
                        FAILED.format(code=2)])


def test_the_same_error_twice_without_a_new_checkpoint_stops(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    watch = FailureWatch("algo-2", ckpt)
    nan = traceback("ValueError: loss went NaN at step 3")
    assert feed(watch, [*nan, FAILED.format(code=1)]) == []  # once: maybe transient, restart
    (ckpt / "snapshot.pt").write_bytes(b"epoch 4")  # progress between the failures: restart again
    os.utime(ckpt / "snapshot.pt", (time.time() + 5, time.time() + 5))
    assert feed(watch, [*nan, FAILED.format(code=1)]) == []
    [verdict] = feed(watch, [*nan, FAILED.format(code=1)])
    assert verdict.endswith("not restarted: the same error again, with no new checkpoint since (1 restart spent on it)")


def test_signals_and_a_peers_death_restart_as_torchrun_would() -> None:
    watch = FailureWatch("algo-1")
    for _ in range(3):
        assert feed(watch, [FAILED.format(code=-9)]) == []  # SIGKILL: OOM, spot, chaos
        gone = traceback("RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer")
        assert feed(watch, [*gone, FAILED.format(code=1)]) == []
    assert watch.error() is not None and watch.error().collateral


def test_the_failure_reason_starts_with_the_workers_error(tmp_path: Path) -> None:
    """FailureReason (1024 characters): the error with the user's file and line, the log stream, then the
    script's traceback, never torchrun's; the host that stopped torchrun after its error exits 1."""
    watch = FailureWatch("algo-2")
    lines = [*USERS_OWN, FAILED.format(code=1), *TORCHRUN_STOPPED, "x" * 3000]
    feed(watch, lines)
    code, text = pid1.outcome(1, [], tmp_path / "marker", "algo-2", lines, watch.error(), None, "job-7")
    assert code == 1 and text is not None and len(text) <= pid1.FAILURE_MAX_CHARS
    assert text.splitlines()[:3] == [
        "ValueError: shape mismatch in batch 3 on rank 1  at raises.py:22 in check_batch  (algo-2, rank 1)",
        "torchrun exited with code 1", "logs: CloudWatch /aws/sagemaker/TrainingJobs, stream job-7/algo-2-*"]
    assert text.splitlines()[3:] == ["Traceback (most recent call last):", '  File "raises.py", line 16, in main',
                                     "    check_batch(step, rank)", '  File "raises.py", line 22, in check_batch',
                                     '    raise ValueError(f"shape mismatch in batch {step} on rank {rank}")',
                                     "ValueError: shape mismatch in batch 3 on rank 1"]
    # PID 1 gave up and SIGTERMed torchrun, which died of it (-15): the host's code is its error's, 1
    stopped = pid1.outcome(-15, [], tmp_path / "marker", "algo-2", lines, watch.error(),
                               f"{watch.error().line()}; not restarted: a restart cannot fix it", "job-7",
                               local_log="/tmp/root/run/logs/algo-2.log")
    assert stopped[0] == 1 and stopped[1].splitlines()[1:3] == ["not restarted: a restart cannot fix it",
                                                                 "logs: /tmp/root/run/logs/algo-2.log"]
    assert "SignalException" not in stopped[1] and "CloudWatch" not in stopped[1]


def test_a_host_stopped_from_outside_after_its_own_error_shows_that_error(tmp_path: Path) -> None:
    watch = FailureWatch("algo-3")
    lines = [*USERS_OWN, FAILED.format(code=1), *TORCHRUN_STOPPED]
    feed(watch, lines)
    code, text = pid1.outcome(1, [15], tmp_path / "marker", "algo-3", lines, watch.error(), None, "job-7")
    assert text is not None and text.splitlines()[:2] == [
        "ValueError: shape mismatch in batch 3 on rank 1  at raises.py:22 in check_batch  (algo-3, rank 1)",
        "then stopped by SIGTERM before a checkpoint was committed"]
    quiet = FailureWatch("algo-1")  # no error of its own: what stopped it, and torchrun's traceback left out
    code, text = pid1.outcome(1, [15], tmp_path / "marker", "algo-1", TORCHRUN_STOPPED, quiet.error(), None)
    assert text is not None and text.startswith("stopped by SIGTERM before a checkpoint was committed\n")
    assert "SignalException" not in text and "inspect.py" not in text
    peer = FailureWatch("algo-1")  # its rank saw the peer go, then torchrun was stopped: the rank's error, not torchrun's
    lines = [*traceback("RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:37015", rank=0),
             FAILED.format(code=1), *TORCHRUN_STOPPED]
    feed(peer, lines)
    code, text = pid1.outcome(1, [15], tmp_path / "marker", "algo-1", lines, peer.error(), None)
    assert text is not None and text.startswith("stopped by SIGTERM before a checkpoint was committed\n")
    assert text.splitlines()[-1].startswith("RuntimeError: [pair.cc:553] Connection closed by peer")
    assert "SignalException" not in text


def test_without_a_traceback_the_end_of_the_output_has_none_of_torchruns(tmp_path: Path) -> None:
    """A usage error has no traceback of its own: the end of the output is shown, less torchrun's
    SignalException traceback even when the kept tail begins in its middle."""
    watch = FailureWatch("algo-2")
    lines = ["usage: train.py [-h]", "train.py: error: unrecognized arguments: --bogus 1", FAILED.format(code=2),
             *TORCHRUN_STOPPED[3:]]
    feed(watch, lines)
    code, text = pid1.outcome(-15, [], tmp_path / "marker", "algo-2", lines, watch.error(),
                                  f"{watch.error().line()}; not restarted: a restart cannot fix it")
    assert code == 1 and text is not None
    assert text.splitlines()[3:] == ["sm_dist launcher on algo-2; last output:", "usage: train.py [-h]",
                                     "train.py: error: unrecognized arguments: --bogus 1"], text


def test_torchruns_child_failed_error_never_stands_in_for_the_scripts_output(tmp_path: Path) -> None:
    """`raise SystemExit("boom: ...")` prints no traceback: torchrun's ChildFailedError is the only exception
    in the output, and the failure shows the script's line instead of torchrun's frames."""
    watch = FailureWatch("algo-1")
    lines = ["boom: the script failed on purpose", FAILED.format(code=1), "Traceback (most recent call last):",
             '  File "/venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent',
             "    raise ChildFailedError(", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
             "Root Cause (first observed failure):"]
    feed(watch, lines)
    code, text = pid1.outcome(1, [], tmp_path / "marker", "algo-1", lines, watch.error(), None, "job-7")
    assert code == 1 and text is not None
    assert text.splitlines() == ["torchrun exited with code 1", "logs: CloudWatch /aws/sagemaker/TrainingJobs, stream "
                                 "job-7/algo-1-*", "sm_dist launcher on algo-1; last output:",
                                 "boom: the script failed on purpose", "Root Cause (first observed failure):"]


def test_a_program_error_before_any_checkpoint_is_not_restarted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first attempt wrote nothing: a restart would replay the same steps and raise the same ValueError."""
    ckpt, code, tmp = tmp_path / "checkpoints", tmp_path / "code", tmp_path / "tmp"
    for folder in (ckpt, code, tmp):
        folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # the container's own /tmp
    (ckpt / "restored-at-start.pt").write_bytes(b"x")  # restored before PID 1 started: not new
    watch = FailureWatch("algo-2", ckpt, work_dir=code)
    [verdict] = feed(watch, [*USERS_OWN, FAILED.format(code=1)])
    assert verdict.startswith("ValueError: shape mismatch in batch 3 on rank 1  at raises.py:22 in check_batch")
    assert verdict.endswith("not restarted: a restart would replay the same steps into the same ValueError (no "
                            "checkpoint was written since the job started)")
    # a checkpoint written since, in the folder or outside it (multinode.py's snapshot.pt), or an error that
    # may be the machine's (RuntimeError: CUDA, NCCL): restarted as before
    for where in (ckpt, code, tmp):
        watch = FailureWatch("algo-2", ckpt, work_dir=code)
        (where / "snapshot.pt").write_bytes(b"epoch 2")
        os.utime(where / "snapshot.pt", (time.time() + 5, time.time() + 5))
        assert feed(watch, [*USERS_OWN, FAILED.format(code=1)]) == []
        (where / "snapshot.pt").unlink()
    cuda = FailureWatch("algo-2", ckpt, work_dir=code)
    assert feed(cuda, [*traceback("RuntimeError: CUDA error: an illegal memory access was encountered"),
                       FAILED.format(code=1)]) == []
    unknown = FailureWatch("algo-2", None, work_dir=code)  # checkpoints straight to S3: nothing to look at
    assert feed(unknown, [*USERS_OWN, FAILED.format(code=1)]) == []


def test_a_checkpoint_another_host_wrote_counts_before_calling_an_error_a_replay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 saves on algo-1 only (the common DDP pattern): algo-2's own folder stays as it started, but
    the run's checkpoint URI, which every host's folder syncs to and a restart restores from, holds
    algo-1's state.pt written since the start. algo-2's ValueError is restarted, as torchrun would; only
    a run whose URI holds nothing new since the start is a replay; one whose URI cannot be read is not
    called one (restarted: the same-error rule decides at the next failure)."""
    ckpt, code, tmp, uri = tmp_path / "checkpoints", tmp_path / "code", tmp_path / "tmp", tmp_path / "uri"
    for folder in (ckpt, code, tmp, uri):
        folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    (uri / "restored-at-start.pt").write_bytes(b"x")  # an earlier job's: older than this host's start
    os.utime(uri / "restored-at-start.pt", (time.time() - 60, time.time() - 60))
    watch = FailureWatch("algo-2", ckpt, work_dir=code, shared=failure_watch.uri_view(str(uri), {}, wait=0))
    (uri / "state.pt").write_bytes(b"step 2")  # uploaded from algo-1's folder
    (uri / "state.pt.sagemaker-uploading").write_bytes(b"")
    assert feed(watch, [*USERS_OWN, FAILED.format(code=1)]) == []
    assert watch.restarts == ["rank 1 — ValueError: shape mismatch in batch 3 on rank 1 at raises.py:22 in check_batch"]
    (uri / "state.pt").unlink()  # nothing new at the URI (a marker is not a checkpoint): a replay
    [verdict] = feed(FailureWatch("algo-2", ckpt, work_dir=code, shared=failure_watch.uri_view(str(uri), {}, wait=0)),
                     [*USERS_OWN, FAILED.format(code=1)])
    assert verdict.endswith("(no checkpoint was written since the job started, on any host)"), verdict
    for cannot_tell in (failure_watch.uri_view(str(uri), {"SM_DIST_NETWORK_ISOLATION": "1"}),  # no S3 in the container
                        failure_watch.uri_view(None, {}), failure_watch.shared_view(tmp_path, {}, hosts=2)):  # no URI
        watch = FailureWatch("algo-2", ckpt, work_dir=code, shared=cannot_tell)
        assert feed(watch, [*USERS_OWN, FAILED.format(code=1)]) == [] and watch.restarts
    assert failure_watch.shared_view(tmp_path, {}, hosts=1) is None  # one host: its folder is the run's


def test_a_restarted_worker_waits_while_pid1_asks_the_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The URI's answer takes seconds (a subprocess, a second look): torchrun would start the workers again
    meanwhile, so it is stopped while the watch asks. `deciding` exists then too: a worker started just
    before waits for it to go (restart) or for the stop file PID 1 writes after a replay's verdict,
    and does not run the script then."""
    import threading

    from sm_dist.container import worker

    ckpt, code, state = tmp_path / "checkpoints", tmp_path / "code", tmp_path / "state"
    for folder in (ckpt, code, state):
        folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    deciding, seen = state / worker.DECIDING_FILE, []

    def asked(answer: bool) -> failure_watch.SharedView:
        return lambda _since: seen.append(deciding.exists()) or answer  # type: ignore[func-returns-value]

    held: list[bool] = []  # torchrun stopped while the watch asks (PID 1's Supervisor.hold)
    restarted = FailureWatch("algo-2", ckpt, work_dir=code, shared=asked(True), deciding=deciding)
    restarted.hold = held.append
    assert feed(restarted, [*USERS_OWN, FAILED.format(code=1)]) == [] and not deciding.exists()
    assert held == [True, False]  # continued: torchrun restarts the workers
    replayed = FailureWatch("algo-2", ckpt, work_dir=code, shared=asked(False), deciding=deciding)
    replayed.hold = held.append
    assert len(feed(replayed, [*USERS_OWN, FAILED.format(code=1)])) == 1 and deciding.exists() and seen == [True, True]
    assert held == [True, False, True]  # still stopped: PID 1's stop continues it with its SIGTERM
    threading.Timer(0.2, (state / worker.STOP_FILE).write_text, ["ValueError ...; not restarted"]).start()
    with pytest.raises(SystemExit) as stopped:
        worker._exit_if_stopped(state)  # waits for PID 1's answer: the stop file
    assert stopped.value.code == 1


def test_a_checkpoint_saved_again_at_the_same_step_is_no_progress(tmp_path: Path) -> None:
    """Rank 0 saves state.pt of step 2 in every attempt and rank 1 raises at step 4: the file changes, the
    point a restart resumes from does not. The second failure from the same checkpoint stops."""
    torch = pytest.importorskip("torch")
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    watch = FailureWatch("algo-2", ckpt)
    error = traceback("ValueError: label out of range at step 4")
    torch.save({"step": 2}, ckpt / "state.pt")  # the first attempt's (restored here before the second)
    assert feed(watch, [*error, FAILED.format(code=1)]) == []
    torch.save({"step": 2}, ckpt / "state.pt")
    os.utime(ckpt / "state.pt", (time.time() + 5, time.time() + 5))  # written again: a newer file, the same step
    [verdict] = feed(watch, [*error, FAILED.format(code=1)])
    assert verdict.endswith("not restarted: the same error again, with no new checkpoint since (1 restart spent on it)")
