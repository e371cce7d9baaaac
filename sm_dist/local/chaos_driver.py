"""Apply chaos faults to a running attempt, and watch torchrun's in-job restarts.

The log readers report steps (`on_step`, any thread) and fire a due fault at once: SIGKILL to
one random worker, SIGUSR2 to one (chaos `hang`: its handler never returns, `sm_dist.runtime.liveness`),
or SIGTERM to every host's first process (spot). A `kill-in-save:N` fault watches the hosts'
checkpoint folders (`sm_dist.local.save_watch`) and SIGKILLs every worker as the script's N-th save
begins, from the watch's thread: no rank writes another byte of that checkpoint. Timed faults (`kill:20s`) fall due that many
seconds after the job's first worker process was seen. The attempt's main
loop calls `tick()` a few times a second, which fires timed faults, retries a kill that found no
worker and reports a spot interruption, so the runner waits out the grace period and restarts
the job. The same loop samples the live workers: the largest TORCHELASTIC_RESTART_COUNT seen on
any host is the number of in-job restarts (torchrun counts per agent; a host restarted by a
membership change keeps 0 — docs/PLATFORM.md §2.3), and `pgwatch` notes which joined a process group.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sm_dist.contract import hang
from sm_dist.contract.faults import Fault
from sm_dist.local import procs
from sm_dist.local.agent import HostAgent
from sm_dist.local.pgwatch import GroupWatch
from sm_dist.local.save_watch import SaveWatch

_log = logging.getLogger(__name__)


class ChaosDriver:
    """Fires step-triggered faults once per job and counts in-job restarts."""

    def __init__(self, faults: Sequence[Fault], rng: random.Random | None = None,
                 s3_fault_switch: Callable[[float], None] | None = None) -> None:
        self._pending = [f for f in faults if f.kind in ("kill", "sigterm", "hang") and not f.timed]
        self._timed = [f for f in faults if f.timed]
        self._in_save = [f for f in faults if f.kind == "kill-in-save"]
        self._save_watch: SaveWatch | None = None
        self._saves = 0  # the script's saves seen so far, over the job's attempts
        self._live_pids: list[tuple[str, int, str | None]] = []  # (host, pid, rank) at the last tick
        self.workers_started: float | None = None  # monotonic time the first worker was seen
        self.group = GroupWatch()
        self.live: dict[str, int] = {}  # host -> its workers at the last tick
        # s3-faults start with training (the first step line), so they overlap checkpoint uploads
        self._s3 = [f for f in faults if f.kind == "s3-faults"] if s3_fault_switch else []
        self._s3_switch = s3_fault_switch
        self._due: list[Fault] = []
        self._lock = threading.Lock()
        self._rng = rng or random.Random()
        self._agents: list[HostAgent] = []
        self.fired: list[str] = []  # the specs that fired, as given
        self.events: list[str] = []  # what each did, for the summary
        self._earlier_attempts = 0  # in-job restarts of finished attempts
        self._this_attempt = 0
        self._worker_pids: dict[str, set[int]] = {}
        self.on_new_workers: Callable[[str], None] | None = None
        """Called with a host when workers never seen before start there (a start or a restart)."""

    def attach(self, agents: Sequence[HostAgent], folders: Mapping[str, Path] | None = None) -> None:
        """The hosts of the current attempt (kills pick their victim among these) and their
        checkpoint folders (where a pending kill-in-save watches the script's saves)."""
        self._agents = list(agents)
        self.detach()
        if self._in_save and folders:
            watch = SaveWatch(folders, self._on_save, self._saves)  # counted over the job's attempts
            try:
                watch.start()
            except OSError as exc:  # no inotify here: the fault cannot fire, and the run says it missed
                _log.error("chaos kill-in-save cannot watch the checkpoint folders: %s", exc)
                return
            self._save_watch = watch

    def detach(self) -> None:
        """Stop watching the checkpoint folders (the attempt ended)."""
        if self._save_watch is not None:
            self._save_watch.stop()
            self._save_watch = None

    def _on_save(self, count: int, host: str, rel: str) -> None:
        """A save begins (the watch's thread): the fault due at this count kills every worker now."""
        with self._lock:
            self._saves = count
            due = [f for f in self._in_save if f.step == count]
            self._in_save = [f for f in self._in_save if f.step != count]
            live = list(self._live_pids)
        for fault in due:
            killed = []
            for _host, pid, rank in live:  # the workers the last tick saw: no /proc scan before the kill
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(rank)
                except ProcessLookupError:
                    pass
            for agent in self._agents:  # a worker started since that tick
                for worker in procs.workers(agent.token):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(worker.pid, signal.SIGKILL)
                        killed.append(worker.env.get("RANK"))
            ranks = ", ".join(sorted({str(r) for r in killed}, key=lambda r: (len(r), r)))
            self._fire(fault, f"SIGKILL to every worker (ranks {ranks}) as save {count} began: {rel} on {host}")

    def on_step(self, step: int) -> None:
        """Called for every step line (reader thread); a due kill fires right here, so the
        worker dies within the next step rather than a supervisor tick later."""
        with self._lock:
            s3, self._s3 = self._s3, []
            for fault in [f for f in self._pending if step >= f.step]:
                self._pending.remove(fault)
                self._due.append(fault)
            kills = [f for f in self._due if f.kind in ("kill", "hang")]
            self._due = [f for f in self._due if f.kind not in ("kill", "hang")]
            spot = any(f.kind == "sigterm" for f in self._due)
        for fault in kills:
            self._kill_one(self._agents, fault)
        if spot:  # SIGTERM now; tick() then reports the interruption and the grace period runs
            for agent in self._agents:
                agent.terminate()
        for fault in s3:
            assert self._s3_switch is not None  # _s3 is empty without a switch
            self._s3_switch(fault.seconds)
            self._fire(fault, f"the S3 endpoint fails every request for {fault.seconds:g} s from step {step}")

    def _fire(self, fault: Fault | str, what: str) -> None:
        _log.warning("chaos %s: %s", fault, what)
        self.fired.append(str(fault))
        self.events.append(f"{fault}: {what}")

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
        self._sample_workers(agents)
        with self._lock:
            if self.workers_started is not None:
                elapsed = time.monotonic() - self.workers_started
                timed = [f for f in self._timed if elapsed >= (f.at_seconds or 0.0)]
                self._timed = [f for f in self._timed if f not in timed]
                self._due.extend(timed)
            due, self._due = self._due, []
        interrupt = False
        for fault in due:
            if fault.kind in ("kill", "hang"):
                self._kill_one(agents, fault)
            else:
                for agent in agents:
                    agent.terminate()
                self._fire(fault, "spot interruption: SIGTERM to every host's first process")
                interrupt = True
        return interrupt

    def _kill_one(self, agents: Sequence[HostAgent], fault: Fault) -> None:
        candidates = [(a.host, w) for a in agents for w in procs.workers(a.token)]
        if not candidates:
            # between restarts there may be no worker; try again on the next tick
            with self._lock:
                self._due.append(fault)
            return
        host, worker = self._rng.choice(candidates)
        stop = fault.kind == "hang"  # the rank's handler sleeps for ever: it stops making progress
        try:
            os.kill(worker.pid, signal.Signals[hang.CHAOS_HANG_SIGNAL] if stop else signal.SIGKILL)
        except ProcessLookupError:
            with self._lock:
                self._due.append(fault)
            return
        self._fire(fault, f"rank {worker.env.get('RANK')} (pid {worker.pid}) on {host} stops making progress "
                          f"({hang.CHAOS_HANG_SIGNAL}: its main thread sleeps in sm_dist's handler)" if stop else
                   f"SIGKILL to rank {worker.env.get('RANK')} (pid {worker.pid}) on {host}")

    def _sample_workers(self, agents: Sequence[HostAgent]) -> None:
        live: list[tuple[str, int, str | None]] = []
        for agent in agents:
            found = procs.workers(agent.token)
            live.extend((agent.host, w.pid, w.env.get("RANK")) for w in found)
            self.live[agent.host] = len(found)
            known = self._worker_pids.setdefault(agent.host, set())
            if any(worker.pid not in known for worker in found):
                known.update(worker.pid for worker in found)
                if self.on_new_workers is not None:
                    self.on_new_workers(agent.host)
            for worker in found:
                if self.workers_started is None:
                    self.workers_started = time.monotonic()
                count = worker.env.get("TORCHELASTIC_RESTART_COUNT", "0")
                if count.isdigit():
                    self._this_attempt = max(self._this_attempt, int(count))
                self.group.sample(agent.host, worker)
        with self._lock:
            self._live_pids = live
