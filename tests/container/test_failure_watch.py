"""The launcher's decision whether a restart can help (sm_dist.container.failure_watch) and the
failure message SageMaker shows (launcher.outcome), on torchrun's output as it prints it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sm_dist.container import launcher
from sm_dist.container.failure_watch import FailureWatch

FAILED = "E1124 14:41:13.491000 8114 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: {code}) local_rank: 0 (pid: 8119) of binary: /usr/bin/python3"


def traceback(last: str, rank: int = 1) -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):", f'[rank{rank}]:   File "train.py", line 9, in <module>',
            f"[rank{rank}]:     main()", f"[rank{rank}]: {last}"]


def feed(watch: FailureWatch, lines: list[str]) -> list[str | None]:
    return [v for v in (watch.feed(line) for line in lines) if v is not None]


def test_an_error_no_restart_can_fix_stops_at_the_first_failure() -> None:
    watch = FailureWatch("algo-2")
    verdicts = feed(watch, [*traceback("ModuleNotFoundError: No module named 'torchvision'"), FAILED.format(code=1)])
    assert verdicts == ["ModuleNotFoundError: No module named 'torchvision'  (algo-2, rank 1); not restarted: "
                        "a restart cannot fix it"]
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
    assert "the same error again, with no new checkpoint since" in verdict


def test_signals_and_a_peers_death_restart_as_torchrun_would() -> None:
    watch = FailureWatch("algo-1")
    for _ in range(3):
        assert feed(watch, [FAILED.format(code=-9)]) == []  # SIGKILL: OOM, spot, chaos
        gone = traceback("RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer")
        assert feed(watch, [*gone, FAILED.format(code=1)]) == []
    assert watch.error() is not None and watch.error().collateral


def test_the_failure_reason_starts_with_the_workers_error(tmp_path: Path) -> None:
    watch = FailureWatch("algo-2")
    lines = [*traceback("ValueError: loss went NaN at step 3"), FAILED.format(code=1), "x" * 3000]
    feed(watch, lines)
    code, text = launcher.outcome(1, [], tmp_path / "marker", "algo-2", lines, watch.error(), None, "job-7")
    assert code == 1 and text is not None and len(text) <= launcher.FAILURE_MAX_CHARS
    assert text.startswith("ValueError: loss went NaN at step 3  (algo-2, rank 1); torchrun exited with code 1. "
                           "logs: CloudWatch /aws/sagemaker/TrainingJobs, stream job-7/algo-2-*.")
    stopped = launcher.outcome(-15, [], tmp_path / "marker", "algo-2", lines, watch.error(), "ValueError: x; not restarted")
    assert stopped[0] == 143 and stopped[1].startswith("ValueError: x; not restarted.")
