"""When PID 1 stops torchrun although torchrun would not stop by itself.

torchrun ends on its workers' exit codes, and on a signal it handles once. Three cases leave it
running for minutes where the job's outcome is already known (standard library only: PID 1):

- **every rank finished.** `sm_dist.runtime.run_script` marks each rank whose script finished,
  and the job once every rank of the round had (`worker.finished`). A worker that then fails (a
  crash at interpreter teardown, a kill while it waits for the others) would make torchrun restart
  a job whose training is over; and a host whose workers all exited waits in torchrun's exit
  barrier (300 s, not configurable) for agents that may never come. Both are stopped: the job is
  done on this host (`finished_after`).
- **the stop signal was lost.** torchrun turns SIGTERM into an exception in its main thread;
  raised inside a logging call, the logging module prints it (`--- Logging error ---`) and goes
  on, and the workers never hear of the stop. torchrun says "Received 15 death signal, shutting
  down workers" when it acts on one; without that line in `SIGNAL_ACK_S`, the signal is sent
  again (`tick`), and after `SIGNAL_TRIES` PID 1 kills torchrun.

PID 1 feeds every output line to `feed` and calls `tick` about once a second.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sm_dist.container import worker

#: torchrun's line for each failed worker (torch/distributed/elastic/multiprocessing/api.py).
WORKER_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
#: torchrun acts on a stop signal: torch/distributed/elastic/agent/server/api.py (`run`, `_exit_barrier`).
_ACKNOWLEDGED = ("death signal, shutting down workers", "Got termination signal")
#: A handler's exception swallowed by the logging module (Handler.handleError).
_LOGGING_ERROR = "--- Logging error ---"
#: How long torchrun may sit in its exit barrier once every rank finished (the others' agents
#: arrive within a monitor interval when all is well). The barrier is one blocking store call
#: that a signal does not interrupt, so torchrun is then killed (its workers are gone).
EXIT_BARRIER_GRACE_S = 10.0
#: How long torchrun may take to say it acts on a stop signal before it gets the signal again.
SIGNAL_ACK_S = 5.0
#: Signals sent before PID 1 kills torchrun.
SIGNAL_TRIES = 3


@dataclass(frozen=True)
class Action:
    """What PID 1 does now: send torchrun SIGTERM again ("term"), SIGKILL it ("kill"), or stop
    it because the job is done here while it may still start workers ("done"); `why` is the log line."""

    kind: str
    why: str


class EndWatch:
    """Reads torchrun's output and the workers' marks; says when to stop torchrun."""

    def __init__(self, state_dir: Path | None, local_ranks: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.state_dir = state_dir
        self.local_ranks = local_ranks
        self._clock = clock
        self._signalled: float | None = None
        self._tries = 0
        self._acknowledged = False
        self._swallowed = False
        self._idle_since: float | None = None
        self.done: str | None = None
        """Why PID 1 stopped torchrun after every rank finished (None: it did not)."""

    @property
    def finished(self) -> bool:
        """Every rank of the job finished its script, this host's included."""
        return self.state_dir is not None and worker.finished(self.state_dir, self.local_ranks)

    def feed(self, line: str) -> Action | None:
        """Take one output line; an Action when torchrun must be stopped now."""
        if any(text in line for text in _ACKNOWLEDGED):
            self._acknowledged = True
        elif _LOGGING_ERROR in line:
            self._swallowed = self._signalled is not None and not self._acknowledged
        failed = WORKER_FAILED.search(line)
        if failed and self.done is None and self.finished:
            self.done = (f"local rank {failed.group(2)} exited with code {failed.group(1)} after every rank had "
                         "finished its script; not restarted")
            return Action("done", self.done)
        return None

    def signalled(self) -> None:
        """PID 1 sent torchrun a stop signal."""
        if self._signalled is None:
            self._signalled, self._tries = self._clock(), 1

    def tick(self, workers_alive: bool) -> Action | None:
        """Called about once a second while torchrun runs; `workers_alive`: torchrun has a live child."""
        now = self._clock()
        if self.done is None and self.finished:
            if workers_alive:
                self._idle_since = None
            elif self._idle_since is None:
                self._idle_since = now
            elif now - self._idle_since >= EXIT_BARRIER_GRACE_S:
                self.done = (f"every rank finished its script; torchrun still waited for other hosts after "
                             f"{EXIT_BARRIER_GRACE_S:.0f} s (its exit barrier)")
                return Action("kill", self.done)
        if self._signalled is None or self._acknowledged:
            return None
        if not self._swallowed and now - self._signalled < SIGNAL_ACK_S * self._tries:
            return None
        self._swallowed = False
        if self._tries >= SIGNAL_TRIES:
            return Action("kill", f"torchrun did not act on {self._tries} stop signals")
        self._tries += 1
        return Action("term", "torchrun did not act on the stop signal; sending it again")


def live_children(pid: int) -> bool:
    """Whether process `pid` has a child that is not a zombie (Linux /proc; False elsewhere)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and ')'
        if len(fields) > 1 and fields[1] == str(pid) and fields[0] != "Z":
            return True
    return False
