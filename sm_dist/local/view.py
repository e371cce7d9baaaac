"""The quiet live view of a local run: every host's state in one line, or one notebook display.

Per host: its state (starting, running, waiting: its workers are gone but its first process
is not, done, exit code), its step when its logs show one, and the newest entry of its
checkpoint folder; for the job: elapsed time, restarts and the last one's cause (which host and
rank, its error and line, a signal or a hang: sm_dist.local.restarts). (Chaos events are logged as they
fire, by the chaos driver.) The view is a `Snapshot` of the runner, shown through
`sm_dist.notebook.live.LiveDisplay`: on a terminal the line is redrawn in place; in a notebook
one display is updated in place (the line, and the same facts as an HTML table); elsewhere (a
pipe, CI) a new line is printed when a state, the restart count or its cause changes, and at most every
`PRINT_EVERY` seconds otherwise. The hosts' full output stays in the log files (`--logs` or
`LocalOptions(echo=True)` streams it, `job.logs()` reads it).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from sm_dist.contract.checkpoint import parse_step
from sm_dist.contract.checkpoint_names import name_step, save_number
from sm_dist.markup import escape, table
from sm_dist.notebook.live import PRINT_EVERY, LiveDisplay, in_notebook

if TYPE_CHECKING:
    from sm_dist.local.runner import LocalRunner

_NUMBER = re.compile(r"\d")
#: SageMaker's sync markers beside a checkpoint: never one themselves.
_MARKERS = (".sagemaker-uploaded", ".sagemaker-uploading", ".sagemaker-ignore")
#: The last restart's cause is cut to this many characters in the live line (the summary has it whole).
CAUSE_CHARS = 120


def newest_entry(folder: Path, depth: int = 3) -> str | None:
    """The newest entry of a checkpoint folder (ignoring sync markers): the highest step or save number
    in a name (sm_dist's step folders, checkpoint-860, step_8, Accelerate's checkpoint_2: see
    sm_dist.contract.checkpoint_names), else the most recently modified entry (a restored folder is newer than the
    step it holds: modification times alone would show an older step). A folder whose name holds no
    number only groups checkpoints (Accelerate's `checkpoints/`): its own newest entry is named,
    "checkpoints/checkpoint_3", down to `depth` levels."""
    try:
        entries = [p for p in folder.iterdir() if not p.name.endswith(_MARKERS)]
    except OSError:
        return None
    if not entries:
        return None
    steps = [(number, p.name) for p in entries if (number := _number(p.name)) is not None]
    if steps:
        return max(steps)[1]
    newest = max(entries, key=lambda p: (p.stat().st_mtime if p.exists() else 0.0, p.name))
    inner = newest_entry(newest, depth - 1) if depth > 1 and newest.is_dir() and not _NUMBER.search(newest.name) else None
    return f"{newest.name}/{inner}" if inner else newest.name


def _number(name: str) -> int | None:
    """The step (sm_dist's step folders, another community's name) or Accelerate's save number in a name."""
    for read in (parse_step, name_step, save_number):
        number = read(name)
        if number is not None:
            return number
    return None


@dataclass(frozen=True)
class HostState:
    """One host as the view shows it."""

    host: str
    state: str
    step: int | None = None
    checkpoint: str | None = None
    """The newest entry of its checkpoint folder."""

    def text(self) -> str:
        step = f" step {self.step}" if self.step is not None else ""
        return f"{self.host} {self.state}{step}" + (f" ckpt {self.checkpoint}" if self.checkpoint else "")


@dataclass(frozen=True)
class Snapshot:
    """The run at one tick: what the terminal line and the notebook table both show."""

    label: str
    elapsed: float
    hosts: tuple[HostState, ...]
    restarts: int
    events: tuple[str, ...] = ()
    """Chaos events so far (the terminal has them as log lines)."""
    last_restart: str = ""
    """The last in-job restart's cause, "restart N: HOST CAUSE" (sm_dist.local.restarts); "" before one."""

    def _restarts(self) -> str:
        cause = self.last_restart.split(": ", 1)[-1]
        if len(cause) > CAUSE_CHARS:
            cause = cause[:CAUSE_CHARS - 1] + "…"
        return f"restarts {self.restarts}" + (f" (last: {cause})" if cause else "")

    def line(self) -> str:
        prefix = f"{self.label} " if self.label else ""
        return (f"{prefix}[{self.elapsed:5.0f} s] " + " | ".join(h.text() for h in self.hosts)
                + f" | {self._restarts()}")

    def key(self) -> tuple[object, ...]:
        """What deserves a new line: states and restarts ("waiting", between torchrun's restarts
        or while workers end one by one, is not worth a line)."""
        return (tuple("running" if h.state == "waiting" else h.state for h in self.hosts), self.restarts,
                self.last_restart)

    def html(self) -> str:
        rows = [(h.host, h.state, "" if h.step is None else h.step, h.checkpoint or "") for h in self.hosts]
        head = f"{self.label or 'run'} · {self.elapsed:.0f} s · {self._restarts()}"
        events = "".join(f"<li>{escape(e)}</li>" for e in self.events)
        return (table(("host", "state", "step", "checkpoint"), rows, caption=head, numeric=(2,))
                + (f'<ul style="margin:0.2em 0">{events}</ul>' if events else ""))


class ProgressView:
    """Shows the view of one run; `tick(runner)` is called by the runner's supervise loop."""

    def __init__(self, stream: TextIO | None = None, label: str = "", *, hosts: int | None = None,
                 logs: Path | None = None, notebook: bool | None = None) -> None:
        """`stream` None: a notebook's display in a kernel, else stdout; `hosts` and `logs` make
        the heading (where the logs are and how to see them)."""
        notebook = (stream is None and in_notebook()) if notebook is None else notebook
        heading = ""
        if logs is not None:
            hint = "job.logs() reads them, LocalOptions(echo=True) streams them" if notebook else "--logs streams them"
            heading = f"{label or 'run'}: {hosts} hosts; logs in {logs} ({hint})"
        self.display = LiveDisplay(stream, heading=heading, notebook=notebook, every=PRINT_EVERY)
        self._label = label
        self._had_workers: set[str] = set()
        self._attempt = 0
        self._started = time.monotonic()

    def start(self) -> None:
        """The heading: where the logs are."""
        self.display.start()

    def _host(self, runner: LocalRunner, index: int) -> HostState:
        agent, layout = runner.agents[index], runner.layouts[index]
        if runner.outcome.job_restarts != self._attempt:  # a new set of "instances"
            self._attempt, self._had_workers = runner.outcome.job_restarts, set()
        code = agent.poll()
        workers = runner.chaos.live.get(agent.host, 0)
        if workers:
            self._had_workers.add(agent.host)
        idle = "waiting" if agent.host in self._had_workers else "starting"
        state = ("done" if code == 0 else f"exit {code}") if code is not None else ("running" if workers else idle)
        if agent.host in runner.outcome.stopped_hosts:  # stopped because another host failed: not its own exit
            state = "stopped"
        host = runner.progress.hosts.get(agent.host)
        return HostState(agent.host, state, host.step if host is not None else None,
                         newest_entry(layout.container_path(runner.config.checkpoint_local_path)))

    def snapshot(self, runner: LocalRunner) -> Snapshot:
        return Snapshot(self._label, time.monotonic() - self._started,
                        tuple(self._host(runner, i) for i in range(len(runner.agents))),
                        runner.outcome.job_restarts + runner.chaos.in_job_restarts,
                        tuple(runner.chaos.events),
                        runner.outcome.restart_causes[-1] if runner.outcome.restart_causes else "")

    def tick(self, runner: LocalRunner, *, final: bool = False) -> None:
        """Show the view if it is due (`final`: the last state, unless it was just shown)."""
        if not runner.agents:
            return
        snap = self.snapshot(runner)
        self.display.show(snap.line(), key=snap.key(), html=snap.html(), final=final)


__all__ = ["CAUSE_CHARS", "HostState", "ProgressView", "Snapshot", "newest_entry"]
