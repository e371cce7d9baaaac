"""PID 1's hang watch on its own: progress, the timeout, the stacks, the stopped rank, a repeat."""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sm_dist.container import hang_watch, stacks
from sm_dist.container.hang_watch import AUTO_MAX_S, AUTO_MIN_S, MIN_GAPS, WAITING_GRACE_S, HangWatch, read_ranks
from sm_dist.container.stacks import Frame, Rank, Stack, parse_dump
from sm_dist.contract import hang
from sm_dist.runtime import liveness

TORCH = "/usr/lib/python3.12/site-packages/torch"
USER = "/opt/ml/input/data/code/train.py"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _record(state: Path, local: str, pid: int, rank: str, round_id: str = "r1") -> Path:
    """A rank's files as liveness.start leaves them: the progress file, then the record."""
    record, progress, _ = hang.rank_paths(state, local)
    record.parent.mkdir(parents=True, exist_ok=True)
    progress.touch()
    record.write_text(json.dumps({"pid": pid, "rank": rank, "round": round_id, "thread": 1}), encoding="utf-8")
    _touch(progress, 1.0)
    _touch(record, 2.0)
    return progress


def _touch(path: Path, at: float) -> None:
    os.utime(path, (at, at))


def _stack(rank: Rank, *frames: tuple[str, int, str]) -> Stack:
    return Stack(rank, tuple(Frame(f, line, func) for f, line, func in frames), "Current thread 0x1 ...")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _watch(state: Path, clock: Clock, said: list[str], stacks_of: dict[str, tuple[tuple[str, int, str], ...]],
           timeout: int | None = 15) -> HangWatch:
    def dump(ranks: list[Rank]) -> list[Stack]:
        return [_stack(r, *stacks_of[r.rank]) for r in ranks]

    return HangWatch(state, "algo-2", timeout, clock=clock, dump=dump, say=said.append)


def test_a_rank_stopped_outside_a_collective_is_named_then_a_repeat_stops_the_job(state: Path) -> None:
    clock, said = Clock(), []
    progress = _record(state, "0", os.getpid(), "1")
    frames = {"1": ((f"{sysconfig.get_paths()['stdlib']}/threading.py", 320, "wait"), (USER, 41, "load_batch"),
                    (USER, 80, "main"))}
    watch = _watch(state, clock, said, frames)
    assert watch.check() is None  # the first look: the baseline, not progress
    clock.now += 100
    assert watch.check() is None  # never progressed: not armed (start-up is not timed)
    _touch(progress, 5.0)
    assert watch.check() is None  # its collectives went up: armed now
    clock.now += 14
    assert watch.check() is None
    clock.now += 1
    found = watch.check()
    assert found is not None and not found.give_up
    assert said[0].startswith(hang.HANG_PREFIX + "rank 1 on algo-2 made no progress for 15 s: stopped outside "
                              "any collective (rank 1 at train.py, line 41, in load_batch)")
    assert said[0].endswith("restarting the workers (they resume from the last checkpoint)")
    assert any("rank 1 (local rank 0, pid" in line for line in said)
    assert found.verdict.startswith(hang.FAILURE_PREFIX + "rank 1 on algo-2")
    assert "Stack, most recent call first: rank 1: threading.py, line 320, in wait < train.py, line 41" in found.verdict
    assert watch.check() is None  # disarmed until it progresses again
    _touch(progress, 6.0)
    watch.check()
    assert watch.last_verdict is None  # progress again: the hang was recovered from
    clock.now += 15
    again = watch.check()
    assert again is not None and again.give_up and "the same place as the hang before it: not restarted" in again.verdict


def test_every_rank_waiting_says_the_stopped_one_is_elsewhere_and_steps_tell_hangs_apart(state: Path) -> None:
    clock, said = Clock(), []
    progress = _record(state, "0", os.getpid(), "0")
    frames = {"0": ((f"{TORCH}/autograd/graph.py", 829, "_engine_run_backward"), (f"{TORCH}/_tensor.py", 625, "backward"),
                    (USER, 12, "step"))}
    watch = _watch(state, clock, said, frames)
    watch.check()
    feed = watch.reader()
    feed(b"[sm_dist] step=4 loss=0.5\n[sm_dist] st")  # a line cut between two reads
    feed(b"ep=5 loss=0.4\n")
    assert watch.step == 5
    clock.now += 15
    assert watch.check() is None  # said, and held: the host of the rank that stopped acts first
    clock.now += WAITING_GRACE_S
    first = watch.check()  # its rank still lives: this host restarts it
    assert first is not None and not first.give_up
    assert said[0].startswith(hang.HANG_WAITING_PREFIX + "rank 0 on algo-2 made no progress for 15 s after step 5, "
                              "waiting in a collective: the rank that stopped is on another host")
    assert said[0].endswith("restarting the workers in 10 s, unless the host of the rank that stopped does first "
                            "(they resume from the last checkpoint)")
    assert first.verdict.startswith(hang.FAILURE_WAITING_PREFIX)
    _touch(progress, 7.0)
    watch.check()
    feed(b"[sm_dist] step=6 loss=0.3\n")
    clock.now += 15
    watch.check()
    clock.now += WAITING_GRACE_S
    second = watch.check()
    assert second is not None and not second.give_up  # another step: restarted again
    _touch(progress, 8.0)
    watch.check()
    clock.now += 15
    watch.check()
    progress.parent.joinpath("0.json").unlink()  # its rank ended meanwhile (the other host restarted the job)
    clock.now += WAITING_GRACE_S
    assert watch.check() is None


def test_a_rank_that_counted_collectives_before_the_first_look_is_watched(state: Path) -> None:
    clock = Clock()
    progress = _record(state, "0", os.getpid(), "0")
    _touch(progress, 3.0)  # touched after it recorded itself, before PID 1 looked
    watch = _watch(state, clock, [], {"0": ((USER, 1, "main"),)})
    assert watch.check() is None
    clock.now += 15
    assert watch.check() is not None


def test_progress_bars_arm_the_watch_and_finished_ranks_are_not_watched(state: Path) -> None:
    clock = Clock()
    _record(state, "0", os.getpid(), "0")
    watch = _watch(state, clock, [], {"0": ((USER, 1, "main"),)})
    watch.check()
    watch.reader()(b"train:  40%|####      | 4/10 [00:04<00:06]\r")  # a tqdm redraw, no newline
    clock.now += 15
    assert watch.check() is not None
    (state / "finished").mkdir()
    (state / "finished" / "0").write_text("r1")  # its script finished in its round: not watched
    assert read_ranks(state) == []
    _record(state, "1", 2 ** 22 + 12345, "1")  # a pid that is not running
    assert read_ranks(state) == []


def test_the_timeout_comes_from_the_step_time_within_bounds_and_0_turns_it_off(state: Path) -> None:
    clock = Clock()
    watch = HangWatch(state, "algo-1", None, clock=clock)
    assert watch.timeout() == AUTO_MAX_S  # too few steps seen to tell
    for _ in range(MIN_GAPS + 1):
        clock.now += 2.0
        watch.feed("[sm_dist] step=1 loss=1.0")
    assert watch.timeout() == AUTO_MIN_S  # 10 x 2 s, raised to the floor
    for _ in range(40):
        clock.now += 100.0
        watch.feed("[sm_dist] step=1 loss=1.0")
    assert watch.timeout() == 1000.0  # 10 x the median step time
    assert HangWatch(state, "algo-1", 0).timeout() is None
    assert HangWatch(state, "algo-1", 15).timeout() == 15.0


def test_the_stopped_rank_heuristic() -> None:
    rank = Rank("0", "3", 1, 1, Path("x"))
    in_collective = _stack(rank, (f"{TORCH}/distributed/distributed_c10d.py", 2800, "all_reduce"), (USER, 9, "sync"))
    in_loader = _stack(rank, (f"{TORCH}/utils/data/dataloader.py", 1100, "_try_get_data"), (USER, 30, "main"))
    chaos = _stack(rank, ("/x/sm_dist/runtime/liveness.py", 70, "_hang"),
                   (f"{TORCH}/distributed/distributed_c10d.py", 2810, "all_reduce"), (USER, 9, "sync"))
    assert in_collective.waiting and not in_loader.waiting
    assert in_loader.where == Frame(f"{TORCH}/utils/data/dataloader.py", 1100, "_try_get_data")
    assert not chaos.waiting  # stopped by chaos hang: where the handler interrupted it
    assert chaos.where is not None and chaos.where.func == "all_reduce" and chaos.chaos and not in_loader.chaos
    assert not _stack(rank).waiting and _stack(rank).where is None


def test_a_faulthandler_dump_is_read_for_the_main_thread(tmp_path: Path) -> None:
    path = tmp_path / "dump"
    release = threading.Event()
    helper = threading.Thread(target=release.wait, daemon=True)
    helper.start()
    try:
        with open(path, "w", encoding="utf-8") as f:
            faulthandler.dump_traceback(file=f, all_threads=True)
    finally:
        release.set()
    text = path.read_text(encoding="utf-8")
    assert text.count("(most recent call first):") >= 2
    frames = parse_dump(text, threading.main_thread().ident)
    assert frames[0].func == "test_a_faulthandler_dump_is_read_for_the_main_thread"
    assert frames[0].file == __file__
    other = parse_dump(text, helper.ident)
    assert other and other[0].func == "wait" and other[0].stdlib


@pytest.fixture
def armed(tmp_path: Path) -> Iterator[Path]:
    """This process as a rank of a PID 1 whose state folder is returned (liveness started here)."""
    state = tmp_path / "state"
    previous = signal.getsignal(signal.SIGUSR2)
    liveness.STOP.clear()
    assert liveness.start({"SM_DIST_WORKER_STATE": str(state), "LOCAL_RANK": "0", "RANK": "5",
                           hang.CHAOS_HANG_ENV: "1"})
    try:
        yield state
    finally:
        liveness.STOP.set()
        faulthandler.unregister(signal.SIGUSR1)
        signal.signal(signal.SIGUSR2, previous)


def test_a_rank_records_itself_and_writes_its_stack_on_pid1s_signal(armed: Path) -> None:
    assert signal.getsignal(signal.SIGUSR2) is liveness._hang  # chaos hang:STEP's handler, asked for
    ranks = read_ranks(armed)
    assert [(r.rank, r.pid, r.thread) for r in ranks] == [("5", os.getpid(), threading.main_thread().ident)]
    found = stacks.dump(ranks)
    assert found[0].frames, found[0].text
    assert any(f.func == "test_a_rank_records_itself_and_writes_its_stack_on_pid1s_signal"
               for f in found[0].frames)
    assert found[0].text.count("(most recent call first):") >= 2  # every thread: the counting one too


def test_the_nccl_flight_recorder_is_on_unless_the_job_set_it() -> None:
    env: dict[str, str] = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}
    hang_watch.nccl_flight_recorder(env, Path("/opt/ml/output/data/nccl-trace-algo-1-rank"))
    assert env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "0" and "TORCH_FR_BUFFER_SIZE" not in env  # the job's own
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == env["TORCH_FR_DUMP_ON_TIMEOUT"] == "1"
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == "/opt/ml/output/data/nccl-trace-algo-1-rank"


def test_ranks_that_write_no_stack_are_reported_only_when_the_next_timeout_finds_them_so_again(state: Path) -> None:
    clock, said = Clock(), []
    progress = _record(state, "0", os.getpid(), "0")
    watch = _watch(state, clock, said, {"0": ()})  # alive, no stack: ending, or its faulthandler gone
    watch.check()
    _touch(progress, 5.0)
    watch.check()
    clock.now += 15
    assert watch.check() is None and said == []  # ending, most likely: another host restarted the job
    clock.now += 14
    assert watch.check() is None and said == []
    clock.now += 1
    assert watch.check() is None  # a waiting host's hold: no stack names a rank here
    assert said[0].startswith(hang.HANG_WAITING_PREFIX + "no rank on algo-2 wrote its stack after 15 s")
    clock.now += WAITING_GRACE_S
    found = watch.check()
    assert found is not None and not found.give_up  # nothing to compare the next one with: restarted


def test_the_automatic_timeout_ends_where_gloos_own_collective_timeout_does() -> None:
    """docs/PLATFORM.md §2.7: torch's default for a gloo group is 30 minutes (NCCL's 10); past it the
    collective fails by itself, so the watch's automatic timeout never waits longer."""
    from datetime import timedelta

    from torch.distributed import constants

    assert constants.default_pg_timeout == timedelta(seconds=AUTO_MAX_S)
