"""sm_dist.container.end_watch: PID 1 stops torchrun when the job is done on its host, and
when torchrun lost the stop signal; the Supervisor does it to a real process."""

from __future__ import annotations

import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sm_dist.container import worker
from sm_dist.container.end_watch import EXIT_BARRIER_GRACE_S, SIGNAL_ACK_S, EndWatch, live_children
from sm_dist.container.torchrun import Supervisor

FAILED = ("E1125 12:57:35.880000 7778 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) "
          "local_rank: 1 (pid: 7791) of binary: /usr/bin/python3")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def every_rank_finished(state: Path, local_ranks: int) -> None:
    env = {worker.STATE_ENV: str(state), "TORCHELASTIC_RUN_ID": "job", "MASTER_PORT": "41000"}
    for rank in range(local_ranks):
        worker.mark_finished({**env, "LOCAL_RANK": str(rank)})
    worker.mark_finished({**env, "LOCAL_RANK": "0"}, every_rank=True)


def test_a_worker_failing_after_every_rank_finished_is_not_restarted(tmp_path: Path) -> None:
    """A crash at teardown (-6) after the last step: restarting would train a finished job again."""
    ends = EndWatch(tmp_path, local_ranks=2)
    assert ends.feed(FAILED) is None  # mid-training: torchrun's restart is the right answer
    every_rank_finished(tmp_path, 2)
    action = ends.feed(FAILED)
    assert action is not None and action.kind == "done" and "local rank 1 exited with code -6" in action.why
    assert ends.finished and ends.feed(FAILED) is None  # said once


def test_the_exit_barrier_holds_a_finished_host_seconds_not_minutes(tmp_path: Path) -> None:
    """torchrun waits 300 s in its exit barrier for agents that may never come; once every rank
    finished and this host's workers are gone, PID 1 ends it after the grace."""
    clock = Clock()
    ends = EndWatch(tmp_path, local_ranks=1, clock=clock)
    assert ends.tick(workers_alive=False) is None  # nothing finished: torchrun decides
    every_rank_finished(tmp_path, 1)
    assert ends.tick(workers_alive=True) is None  # still exiting
    assert ends.tick(workers_alive=False) is None
    clock.now += EXIT_BARRIER_GRACE_S - 1
    assert ends.tick(workers_alive=False) is None
    clock.now += 1
    action = ends.tick(workers_alive=False)
    assert action is not None and action.kind == "kill" and "exit barrier" in action.why


def test_a_stop_signal_torchrun_did_not_act_on_is_sent_again_then_torchrun_is_killed(tmp_path: Path) -> None:
    clock = Clock()
    ends = EndWatch(None, local_ranks=1, clock=clock)
    ends.signalled()
    assert ends.tick(workers_alive=True) is None
    kinds = []
    for _ in range(4):
        clock.now += SIGNAL_ACK_S
        action = ends.tick(workers_alive=True)
        kinds.append(action.kind if action else None)
    assert kinds == ["term", "term", "kill", "kill"]

    acted = EndWatch(None, local_ranks=1, clock=clock)
    acted.signalled()
    acted.feed("W1125 12:57:35.896000 7778 torch/distributed/elastic/agent/server/api.py:753] Received 15 death "
               "signal, shutting down workers")
    clock.now += 10 * SIGNAL_ACK_S
    assert acted.tick(workers_alive=True) is None  # shutting down: a second signal would cut it short

    swallowed = EndWatch(None, local_ranks=1, clock=clock)
    swallowed.signalled()
    swallowed.feed("--- Logging error ---")  # SignalException raised inside a logging call: lost
    action = swallowed.tick(workers_alive=True)
    assert action is not None and action.kind == "term"  # at once


FAKE_TORCHRUN = textwrap.dedent("""
    import signal, sys, time
    seen = []
    def on_term(signum, frame):
        seen.append(signum)
        if len(seen) == 1:  # as torchrun's SignalException swallowed by logging.Handler.handleError
            print("--- Logging error ---", file=sys.stderr, flush=True)
            return
        print("W0000 api.py:753] Received 15 death signal, shutting down workers", file=sys.stderr, flush=True)
        sys.exit(1)
    signal.signal(signal.SIGTERM, on_term)
    print("ready", file=sys.stderr, flush=True)
    while True:
        time.sleep(0.05)
""")


@pytest.mark.slow
def test_the_supervisor_stops_a_torchrun_that_swallowed_the_signal(tmp_path: Path) -> None:
    """A real process that loses the first SIGTERM the way torchrun does: PID 1's second one
    ends it in seconds, not after SageMaker's 120 s grace."""
    script = tmp_path / "fake_torchrun.py"
    script.write_text(FAKE_TORCHRUN)
    sup = Supervisor([sys.executable, "-u", str(script)], {}, tmp_path, ends=EndWatch(None, local_ranks=1))
    signal.setitimer(signal.ITIMER_REAL, 1.5)  # SIGALRM: stands for the platform's SIGTERM below
    previous = signal.signal(signal.SIGALRM, lambda *_: sup._on_signal(signal.SIGTERM, None))
    started = time.monotonic()
    try:
        code = sup.run()
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert code == 1 and "--- Logging error ---" in sup.tail
    assert any("death signal" in line for line in sup.tail)
    assert time.monotonic() - started < 60  # a hang guard with a wide margin (the resend is due after ~1 s)


PARENT = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print("started", flush=True)
    sys.stdin.readline()
    child.kill()  # and never waited for: a zombie until this process ends
    time.sleep(0.5)
    print("killed", flush=True)
    sys.stdin.readline()
""")


@pytest.mark.slow
def test_live_children_counts_a_running_child_not_a_zombie() -> None:
    import subprocess

    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert parent.stdin is not None and parent.stdout is not None
    try:
        assert parent.stdout.readline().strip() == "started"
        assert live_children(parent.pid)
        parent.stdin.write("\n")
        parent.stdin.flush()
        assert parent.stdout.readline().strip() == "killed"
        assert not live_children(parent.pid)
    finally:
        parent.kill()
        parent.wait()
