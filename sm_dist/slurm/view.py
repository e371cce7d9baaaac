"""The live view of a waiting Slurm job: what Slurm says and each node's step, in one display.

`sm_dist.fit(..., slurm=...)` in a notebook shows it instead of echoing every node's lines (they stay in
the job's logs folder: `job.logs()`), as local mode's hosts view does (`sm_dist.local.view`), through the
same `sm_dist.notebook.live.LiveDisplay`: one display updated in place, as a line and an HTML table. It
is fed by `SlurmJob.wait`: each node's new lines (`line`), then the status once per poll (`show`).
Per node: its last step line (a node that prints none, where rank 0 does not run, is named alone); for the
job: Slurm's state and the chain's word (`SlurmJob.status`), the newest step folder of the shared checkpoint
folder, elapsed time, attempts (1 + requeues) and the worker restarts torchrun made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from sm_dist.contract import log_lines
from sm_dist.contract.checkpoint import parse_step
from sm_dist.contract.job import JobStatus
from sm_dist.contract.slurm_layout import ATTEMPT_RE, LOGS_FOLDER
from sm_dist.markup import escape, table
from sm_dist.notebook.live import PRINT_EVERY, LiveDisplay

#: The batch script's log (logs/batch.log): its lines count attempts, never a node.
BATCH = "batch"


def newest_step(folder: Path | None) -> int | None:
    """The highest step folder's step in a shared checkpoint folder (None: none, or not a folder here)."""
    try:
        steps = [step for p in folder.iterdir() if (step := parse_step(p.name)) is not None] if folder else []
    except OSError:
        return None
    return max(steps, default=None)


class SlurmView:
    """Shows one Slurm job while `SlurmJob.wait` follows it; `notebook` None: a display in a kernel."""

    def __init__(self, name: str, job_id: str, job_dir: Path, *, nodes: int, checkpoint_dir: Path | None = None,
                 stream: TextIO | None = None, notebook: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        heading = (f"{name}: Slurm job {job_id} on {nodes} nodes; logs in {job_dir / LOGS_FOLDER} "
                   "(job.logs() reads them)")
        self.display = LiveDisplay(stream, heading=heading, notebook=notebook, every=PRINT_EVERY, clock=clock)
        self.name, self.job_id = name, job_id
        self.checkpoint_dir = checkpoint_dir
        self.steps: dict[str, int | None] = {}
        self.restarts = 0
        self.attempts: set[str] = set()
        self._clock = clock
        self._started = clock()

    def start(self) -> None:
        self.display.start()

    def line(self, node: str, text: str) -> None:
        """One new line of a node's log (or the batch script's)."""
        if node == BATCH:
            if match := ATTEMPT_RE.match(text):
                self.attempts.add(match.group(2))
            return
        self.steps.setdefault(node, None)
        parsed = log_lines.read_line(text)
        if isinstance(parsed, (log_lines.StepLine, log_lines.FinalLine)):
            self.steps[node] = parsed.step
        elif log_lines.read_restart(text) is not None:
            self.restarts += 1

    def _state(self, status: JobStatus) -> str:
        state = status.secondary if status.secondary and status.secondary != status.status else status.status
        return f"{status.status}/{state}" if state != status.status else status.status

    def text(self, status: JobStatus) -> str:
        nodes = " | ".join(node if step is None else f"{node} step {step}" for node, step in sorted(self.steps.items()))
        checkpoint = newest_step(self.checkpoint_dir)
        parts = [f"{self.name} [{self._clock() - self._started:5.0f} s] {self._state(status)}",
                 *([nodes] if nodes else []), *([f"ckpt step {checkpoint}"] if checkpoint is not None else []),
                 f"attempts {max(len(self.attempts), 1)}, restarts {self.restarts}"]
        message = f"\n  {status.message}" if status.message else ""
        failure = f"\n  failure: {status.failure_reason}" if status.failure_reason else ""
        return " | ".join(parts) + message + failure

    def html(self, status: JobStatus) -> str:
        rows = [(node, "" if step is None else step) for node, step in sorted(self.steps.items())]
        checkpoint = newest_step(self.checkpoint_dir)
        head = (f"{self.name} · Slurm job {self.job_id} · {self._state(status)} · "
                f"{self._clock() - self._started:.0f} s · attempts {max(len(self.attempts), 1)}, "
                f"restarts {self.restarts}" + (f" · checkpoint step {checkpoint}" if checkpoint is not None else ""))
        notes = [text for text in (status.message, status.failure_reason and f"failure: {status.failure_reason}") if text]
        items = "".join(f"<li>{escape(text)}</li>" for text in notes)
        return (table(("node", "step"), rows, caption=head, numeric=(1,))
                + (f'<ul style="margin:0.2em 0">{items}</ul>' if items else ""))

    def show(self, status: JobStatus) -> None:
        """Show the job now, if due (the last time when it is done)."""
        key = (status.status, status.secondary, status.message, len(self.attempts), self.restarts)
        self.display.show(self.text(status), key=key, html=self.html(status), final=status.done)


__all__ = ["SlurmView", "newest_step"]
