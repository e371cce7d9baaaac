"""Follow a job's progress from its log lines, whatever script runs.

sm_dist's own entrypoints print `[sm_dist] step=N ...` per logged step, `[sm_dist] resumed
step=N` after a restore and `[sm_dist] final step=N model_sha256=<hex>` at the end (the
log-line contract, sm_dist.contract.log_lines, which reads them here too). For any script whose
checkpoint folder is restored (an in-job restart, or a job started again), each host's worker
prints `[sm_dist] restored step=N on HOST: PATH`, the checkpoint it resumes from
(sm_dist.contract.checkpoint_names): `restores` (resumed_from where no resumed line was printed). Other scripts print none of these, so two common loggers
are read too (sm_dist.contract.third_party_lines), cheaply and per host:
- a tqdm bar (`…| 12/100 [00:03<…`), which Hugging Face's Trainer also draws for its steps. The
  first bar total a host shows is taken as the training bar; bars of other totals (evaluation,
  downloads) are ignored. A bar described `Epoch N` is one per epoch (Lightning's): its step is
  N × total + n;
- Hugging Face Trainer's log dicts (`{'loss': 0.69, ..., 'epoch': 0.5}`): the last loss and epoch.
What is not seen stays unknown (None): no figure is guessed. A host whose step goes backwards
resumed (or restarted from scratch): both steps are recorded — only when nothing else can explain
it: the same kind of line (sm_dist's step lines on stdout, a tqdm bar on stderr; two pipes, so one
kind may arrive late behind the other) went back after the host's workers were seen starting
again (`new_workers`, from what local mode sees in /proc). Without a restart in between, a lower
step is lines arriving out of order, or several ranks drawing a bar.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sm_dist.contract.log_lines import FinalLine, RestoredLine, ResumedLine, StepLine, read_line
from sm_dist.contract.third_party_lines import bar_epoch, tqdm_position, trainer_log


@dataclass
class HostProgress:
    """What one host's log said so far."""

    step: int | None = None
    bar_total: int | None = None
    loss: str | None = None
    epoch: str | None = None
    workers: int = 0
    """How many times this host's workers were seen starting (a new set of processes)."""
    last_by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Kind of line ("sm_dist", "tqdm") -> (its latest step, `workers` when it was printed)."""


@dataclass
class Progress:
    """What the logs said so far. Thread-safe: every host's reader thread feeds it."""

    last_step: int | None = None
    max_step: int | None = None
    final_step: int | None = None
    model_sha256: str | None = None
    resumed_from: list[int] = field(default_factory=list)
    restored: list[RestoredLine] = field(default_factory=list)
    """Each host's `[sm_dist] restored` lines: the checkpoint its worker restored, and its step."""
    went_back: list[tuple[str, int, int]] = field(default_factory=list)
    """(host, step before, step after) each time a host's step went backwards."""
    hosts: dict[str, HostProgress] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _listeners: list[Callable[[int], None]] = field(default_factory=list, repr=False)

    def on_step(self, listener: Callable[[int], None]) -> None:
        """Call `listener(step)` for every step line (from the reader threads)."""
        self._listeners.append(listener)

    def feed(self, line: str, host: str = "") -> None:
        """Consume one log line of `host`."""
        ours = read_line(line)
        if isinstance(ours, FinalLine):
            with self._lock:
                self.final_step, self.model_sha256 = ours.step, ours.model_sha256
            return
        if isinstance(ours, RestoredLine):
            with self._lock:
                self.restored.append(ours)
            return
        if isinstance(ours, ResumedLine):
            with self._lock:
                self.resumed_from.append(ours.step)
            return
        if isinstance(ours, StepLine):
            self._record(host, ours.step, "sm_dist")
            return
        step = self._other_step(line, host)
        if step is not None:
            self._record(host, step, "tqdm")

    def _other_step(self, line: str, host: str) -> int | None:
        """The step a tqdm bar shows (and a Trainer log dict's loss and epoch), for any script."""
        with self._lock:
            state = self.hosts.setdefault(host, HostProgress())
            logged = trainer_log(line)  # may share a line with the bar (tqdm ends its updates with \r)
            if logged is not None and "loss" in logged:
                state.loss, state.epoch = str(logged["loss"]), str(logged["epoch"])
            bar = tqdm_position(line)
            if bar is None:
                return None
            done, total = bar
            if state.bar_total is None:
                state.bar_total = total
            if total != state.bar_total or done <= 0:
                return None
            epoch = bar_epoch(line)  # a bar per epoch (Lightning's): steps before this epoch count too
            return epoch * total + done if epoch is not None else done

    def _record(self, host: str, step: int, kind: str) -> None:
        with self._lock:
            state = self.hosts.setdefault(host, HostProgress())
            before = state.last_by_kind.get(kind)
            if before is not None and step < before[0] and state.workers > before[1]:
                self.went_back.append((host, before[0], step))  # same pipe, and a restart in between
            state.last_by_kind[kind] = (step, state.workers)
            state.step = step
            self.last_step = step
            self.max_step = step if self.max_step is None else max(self.max_step, step)
        for listener in list(self._listeners):
            listener(step)

    @property
    def steps(self) -> int | None:
        """The job's last step: the final line's, else the largest seen; None when no step was seen."""
        return self.final_step if self.final_step is not None else self.max_step

    @property
    def restores(self) -> list[tuple[str, int | None]]:
        """(checkpoint, step or None) of each restore: the lines of the host that printed most (every
        host restores on each restart; the first host in order on a tie)."""
        by_host: dict[str, list[tuple[str, int | None]]] = {}
        with self._lock:
            for line in self.restored:
                by_host.setdefault(line.host, []).append((line.path, line.step))
        return max((by_host[h] for h in sorted(by_host)), key=len, default=[])

    def new_workers(self, host: str) -> None:
        """`host`'s workers were seen starting (again): a later lower step is a resume."""
        with self._lock:
            self.hosts.setdefault(host, HostProgress()).workers += 1

    def new_attempt(self) -> None:
        """A whole-job restart: the final line of an earlier attempt no longer counts."""
        with self._lock:
            self.final_step, self.model_sha256 = None, None
            for state in self.hosts.values():
                state.workers += 1
