"""PID 1's hang watch: no progress for `hang_timeout_s` → every rank's stack, the rank that stopped
named, and an in-job restart — or, when it stops at the same place again, the job stopped.

A rank stuck in a collective or a data loader makes torch wait for its collective timeout (30 minutes
for gloo, 10 for NCCL: docs/PLATFORM.md §2.7) while the whole cluster is billed and nothing is said.
Progress on a host is what the host can see (standard library only: PID 1, before torch):

- its output (`feed`): the runtime's step lines, a tqdm bar's update, Hugging Face Trainer's log dicts
  (`contract.log_lines`, `contract.third_party_lines`) — on the host of the rank that prints them;
- its ranks' collectives (`check`, once a second): each rank touches its `.progress` file when the
  collectives of its process groups went up (`sm_dist.runtime.liveness`), on every host.

The watch is armed by the first progress of a round of workers (a new round — new pids — disarms it until
it makes progress: start-up, restore and resume are not timed) and ignores ranks whose script finished.
When nothing moved for the timeout — `hang_timeout_s` of the job spec; 0: off; None: 10 × the median
time between two progress signs, at least AUTO_MIN_S and at most AUTO_MAX_S (until MIN_GAPS were seen,
AUTO_MAX_S), so a job whose steps take minutes is not cut short — it dumps every rank's stacks
(`sm_dist.container.stacks`), prints them and a `[sm_dist] hang: ...` line naming the rank that stopped
and its line (`contract.hang`), and SIGKILLs this host's ranks: torchrun restarts the workers (the
other hosts follow, as after any failure) and the script resumes from its last checkpoint. A host whose
ranks all wait in a collective holds its action WAITING_GRACE_S: the host of the rank that stopped acts
first, so the restart follows the stacks that name it. A hang at the same place as the one before (the
same step when this host sees steps, and the same stopped ranks and lines, or every rank waiting) is
not restarted: PID 1 stops torchrun and `output/failure` starts with the hang and the stack.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sm_dist.container import stacks as stacks_mod
from sm_dist.container import worker
from sm_dist.container.stacks import Rank, Stack
from sm_dist.contract import hang
from sm_dist.contract.log_lines import ResumedLine, StepLine, read_line
from sm_dist.contract.third_party_lines import tqdm_position, trainer_log

#: The automatic timeout: AUTO_FACTOR × the median time between two progress signs, within these bounds.
AUTO_FACTOR = 10.0
AUTO_MIN_S = 300.0
#: torch's own collective timeout for gloo (docs/PLATFORM.md §2.7): past it the collective fails anyway.
AUTO_MAX_S = 1800.0
MIN_GAPS = 5
GAPS_KEPT = 200
#: How long a host whose ranks all wait in a collective holds its restart (or stop): the host of the rank
#: that stopped, whose watch fires within a second or two, acts first, and its stacks name that rank.
WAITING_GRACE_S = 10.0


@dataclass(frozen=True)
class Hang:
    """A hang this host saw: the failure text when the job stops on it, and whether it does (`give_up`)."""

    verdict: str
    give_up: bool


def read_ranks(state_dir: Path) -> list[Rank]:
    """This host's live ranks whose script has not finished, from their records."""
    out = []
    for record in sorted((state_dir / hang.RANKS_DIR).glob(f"*{hang.RECORD_SUFFIX}")):
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            local, pid = record.name[: -len(hang.RECORD_SUFFIX)], int(data["pid"])
            rank = Rank(local, str(data.get("rank", "?")), pid, int(data.get("thread") or 0),
                        hang.rank_paths(state_dir, local)[2])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(pid) and not _finished(state_dir, local, str(data.get("round", ""))):
            out.append(rank)
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[:1] != ["Z"]


def _finished(state_dir: Path, local_rank: str, round_id: str) -> bool:
    try:
        return (state_dir / worker.FINISHED_DIR / local_rank).read_text(encoding="utf-8") == round_id
    except OSError:
        return False


class HangWatch:
    """Feed it every output line and call `check` once a second; `kill` the ranks it found hung."""

    def __init__(self, state_dir: Path, host: str, timeout_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, dump: Callable[[list[Rank]], list[Stack]] = stacks_mod.dump,
                 say: Callable[[str], None] | None = None) -> None:
        self.state_dir, self.host, self.setting = state_dir, host, timeout_s
        self._clock, self._dump = clock, dump
        self._say = say or (lambda text: print(text, file=sys.stderr, flush=True))
        self._lock = threading.Lock()
        self._since: float | None = None  # the last progress; None: not armed
        self._gaps: collections.deque[float] = collections.deque(maxlen=GAPS_KEPT)
        self._pids: frozenset[int] = frozenset()
        self._mtimes: dict[int, float] = {}
        self._marks: list[tuple[object, ...]] = []
        self._hung: list[Rank] = []
        self._pending: tuple[float, Hang] | None = None  # a waiting host's hang, acted on at that time
        self._blind = False  # the last timeout found no stack
        self.step: int | None = None
        """The last step this host's output showed."""
        self.last_verdict: str | None = None
        """The last hang's failure text, until the workers make progress again."""

    def timeout(self) -> float | None:
        """Seconds without progress that make a hang; None: the watch is off."""
        if self.setting is not None:
            return float(self.setting) if self.setting > 0 else None
        if len(self._gaps) < MIN_GAPS:
            return AUTO_MAX_S
        return min(AUTO_MAX_S, max(AUTO_MIN_S, AUTO_FACTOR * statistics.median(self._gaps)))

    def feed(self, line: str) -> None:
        """Take one output line of torchrun's (workers' stdout and stderr)."""
        parsed = read_line(line)
        if isinstance(parsed, (StepLine, ResumedLine)):
            self.step = parsed.step
        elif tqdm_position(line) is None and trainer_log(line) is None:
            return
        with self._lock:
            self._progress(self._clock())

    def reader(self) -> Callable[[bytes], None]:
        """A feed for one output stream's chunks as they come: each line ended by a newline or a carriage
        return (a progress bar's redraw) is `feed`."""
        pending = b""

        def take(chunk: bytes) -> None:
            nonlocal pending
            *lines, pending = re.split(rb"\r\n|\r|\n", pending + chunk)
            for raw in lines:
                self.feed(raw.decode("utf-8", "replace"))

        return take

    def _progress(self, now: float) -> None:
        if self._since is not None:
            self._gaps.append(now - self._since)
        self._since, self._blind = now, False
        self.last_verdict = None

    def check(self) -> Hang | None:
        """Look at the ranks; on a hang dump their stacks and say what they show; the hang to act on now."""
        ranks = read_ranks(self.state_dir)
        with self._lock:
            now = self._clock()
            if self._pending is not None:
                return self._due(now, ranks)
            pids = frozenset(rank.pid for rank in ranks)
            if pids != self._pids:  # new workers (a restart), or a rank finished: armed by their progress
                self._pids, self._mtimes, self._since, self._blind = pids, {}, None, False
            if self._moved(ranks):
                self._progress(now)
            limit = self.timeout()
            if not ranks or self._since is None or limit is None or now - self._since < limit:
                return None
            silent, self._since = now - self._since, None
        return self._report(ranks, silent)

    def _moved(self, ranks: list[Rank]) -> bool:
        """Whether a rank touched its progress file since the last look (at the first look of a rank:
        since it recorded itself, which it did after creating the file)."""
        moved = False
        for rank in ranks:
            record, progress, _ = hang.rank_paths(self.state_dir, rank.local_rank)
            try:
                mtime = os.stat(progress).st_mtime
                before = self._mtimes[rank.pid] if rank.pid in self._mtimes else os.stat(record).st_mtime
            except OSError:
                continue
            moved = moved or mtime > before
            self._mtimes[rank.pid] = mtime
        return moved

    def _due(self, now: float, ranks: list[Rank]) -> Hang | None:
        """A waiting host's hang, WAITING_GRACE_S after it was seen: acted on while its ranks still run."""
        assert self._pending is not None
        deadline, found = self._pending
        if now < deadline:
            return None
        self._pending = None
        hung = {rank.pid for rank in self._hung}
        return found if any(rank.pid in hung for rank in ranks) else None

    def _report(self, ranks: list[Rank], silent: float) -> Hang | None:
        found = [s for s in self._dump(ranks) if s.frames or _alive(s.rank.pid)]
        if not found:  # they ended while asked: another host's watch restarted the job first
            return None
        if not any(s.frames for s in found) and not self._blind:  # ending (a peer's restart reached them), or
            with self._lock:  # unreadable: said and acted on only when the next timeout finds them so again
                self._blind, self._since = True, self._clock()
            return None
        stuck = [s for s in found if s.frames and not s.waiting]
        waiting = [s for s in found if s.waiting] if not stuck else []
        after = f" after step {self.step}" if self.step is not None else ""
        quiet = f"made no progress for {silent:.0f} s{after}"
        if stuck:
            where = "; ".join(f"rank {s.rank.rank} at {s.where.short() if s.where else '?'}"
                              + (", held there by chaos hang" if s.chaos else "") for s in stuck)
            others = [s for s in found if s.waiting]
            text = (f"{_ranks(stuck)} on {self.host} {quiet}: stopped outside any collective ({where})"
                    + (f"; {_ranks(others)} waited in a collective" if others else ""))
        elif waiting:
            text = (f"{_ranks(waiting)} on {self.host} {quiet}, waiting in a collective: the rank that stopped "
                    "is on another host (its log names it)")
        else:
            text = f"no rank on {self.host} wrote its stack after {silent:.0f} s without progress{after}"
        # the same place: the same step (when seen here) and the same stopped ranks and lines, or all waiting
        mark = (self.step, tuple(sorted((s.rank.rank, str(s.where)) for s in stuck)) or bool(waiting))
        give_up = (stuck or waiting) and mark in self._marks
        self._marks.append(mark)
        later = "" if stuck else f" in {WAITING_GRACE_S:.0f} s, unless the host of the rank that stopped does first"
        text += (f"; the same place as the hang before it: not restarted{later}" if give_up
                 else f"; restarting the workers{later} (they resume from the last checkpoint)")
        self._say((hang.HANG_PREFIX if stuck else hang.HANG_WAITING_PREFIX) + text)
        for stack in found:
            self._say(f"[sm_dist launcher] rank {stack.rank.rank} (local rank {stack.rank.local_rank}, pid "
                      f"{stack.rank.pid}), every thread, most recent call first:")
            for line in (stack.text.strip() or "(no stack written)").splitlines():
                self._say(f"[sm_dist launcher]   {line}")
        shown = "; ".join(f"rank {s.rank.rank}: {s.excerpt()}" for s in (stuck or waiting)[:2])
        verdict = (hang.FAILURE_PREFIX if stuck else hang.FAILURE_WAITING_PREFIX) + text + (
            f". Stack, most recent call first: {shown}" if shown else "")
        result = Hang(verdict, bool(give_up))
        with self._lock:
            self._hung, self.last_verdict = ranks, verdict
            if not stuck:  # let the host of the rank that stopped act first: its stacks name it
                self._pending = (self._clock() + WAITING_GRACE_S, result)
                return None
        return result

    def kill(self) -> None:
        """SIGKILL the ranks of the last hang (torchrun then restarts the workers, or ends on a stop)."""
        for rank in self._hung:
            try:
                os.kill(rank.pid, signal.SIGKILL)
            except OSError:
                continue


#: torch's NCCL flight recorder, each setting under its name and the older one torch still reads (the first
#: set wins): ring buffer entries, dump when NCCL's watchdog times out, where (docs/PLATFORM.md §2.7).
FLIGHT_RECORDER = ((("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"), "2000"),
                   (("TORCH_FR_DUMP_ON_TIMEOUT", "TORCH_NCCL_DUMP_ON_TIMEOUT"), "1"),
                   (("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"), None))


def nccl_flight_recorder(env: dict[str, str], prefix: Path) -> None:
    """Turn on NCCL's flight recorder (the last collectives of each rank, written at `prefix`<rank> when a
    collective times out: which rank stopped, and in which collective) unless the job set it itself."""
    for names, value in FLIGHT_RECORDER:
        if not any(name in env for name in names):
            env.update(dict.fromkeys(names, value or str(prefix)))


def _ranks(found: list[Stack]) -> str:
    numbers = [s.rank.rank for s in found]
    return f"rank {numbers[0]}" if len(numbers) == 1 else f"ranks {', '.join(numbers)}"


__all__ = ["AUTO_FACTOR", "AUTO_MAX_S", "AUTO_MIN_S", "FLIGHT_RECORDER", "MIN_GAPS", "WAITING_GRACE_S", "Hang",
           "HangWatch", "nccl_flight_recorder", "read_ranks"]
