"""Apply chaos faults to a running attempt, and watch torchrun's in-job restarts.

The log readers report steps (`on_step`, any thread); the attempt's main loop calls `tick()`
a few times a second, which fires what is due: a SIGKILL to one random worker, or a request to
interrupt the whole job (spot). The same loop samples TORCHELASTIC_RESTART_COUNT of the live
workers: the largest value seen on any host is the number of in-job restarts (torchrun counts
per agent; a host restarted by a membership change keeps 0 — FACTS §2.3).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
from collections.abc import Sequence

from sm_dist.local import procs
from sm_dist.local.agent import HostAgent
from sm_dist.local.chaos import Fault

_log = logging.getLogger(__name__)


class ChaosDriver:
    """Fires step-triggered faults once per job and counts in-job restarts."""

    def __init__(self, faults: Sequence[Fault], rng: random.Random | None = None) -> None:
        self._pending = [f for f in faults if f.kind in ("kill", "sigterm")]
        self._due: list[Fault] = []
        self._lock = threading.Lock()
        self._rng = rng or random.Random()
        self.fired: list[str] = []
        self._earlier_attempts = 0  # in-job restarts of finished attempts
        self._this_attempt = 0

    def on_step(self, step: int) -> None:
        """Called for every step line; marks faults whose step has been reached."""
        with self._lock:
            for fault in [f for f in self._pending if step >= f.step]:
                self._pending.remove(fault)
                self._due.append(fault)

    @property
    def in_job_restarts(self) -> int:
        """torchrun restarts of all workers, summed over the job's attempts."""
        return self._earlier_attempts + self._this_attempt

    def new_attempt(self) -> None:
        """A whole-job restart begins: torchrun's counters start again at 0."""
        self._earlier_attempts += self._this_attempt
        self._this_attempt = 0

    def tick(self, agents: Sequence[HostAgent]) -> bool:
        """Fire due faults; return True when the whole job must be interrupted (spot)."""
        with self._lock:
            due, self._due = self._due, []
        interrupt = False
        for fault in due:
            if fault.kind == "kill":
                self._kill_one(agents, fault)
            else:
                _log.warning("chaos %s: spot interruption, SIGTERM to every host", fault)
                self.fired.append(str(fault))
                interrupt = True
        self._sample_restarts(agents)
        return interrupt

    def _kill_one(self, agents: Sequence[HostAgent], fault: Fault) -> None:
        candidates = [(a.host, w) for a in agents for w in procs.workers(a.token)]
        if not candidates:
            # between restarts there may be no worker; try again on the next tick
            with self._lock:
                self._due.append(fault)
            return
        host, worker = self._rng.choice(candidates)
        try:
            os.kill(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            with self._lock:
                self._due.append(fault)
            return
        _log.warning("chaos %s: SIGKILL rank %s (pid %d on %s)", fault, worker.env.get("RANK"), worker.pid, host)
        self.fired.append(str(fault))

    def _sample_restarts(self, agents: Sequence[HostAgent]) -> None:
        for agent in agents:
            for worker in procs.workers(agent.token):
                count = worker.env.get("TORCHELASTIC_RESTART_COUNT", "0")
                if count.isdigit():
                    self._this_attempt = max(self._this_attempt, int(count))
