"""The quiet live view of `sm-dist fit --local`: one compact line for all hosts.

Per host: its state (starting, running, waiting: its workers are gone but its first process
is not, done, exit code), its step when its logs show one, and the newest entry of its
checkpoint folder; for the job: elapsed time and restarts. (Chaos events are logged as they
fire, by the chaos driver.) On a terminal the line is redrawn in place; elsewhere (a pipe,
CI) a new line is printed when a state or the restart count changes, and at most every
`PRINT_EVERY` seconds otherwise. The hosts' full output stays in the log files (`--logs` streams it).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from sm_dist.local.runner import LocalRunner

#: Seconds between two printed lines when only steps or checkpoints moved (not a terminal).
PRINT_EVERY = 10.0


def newest_entry(folder: Path) -> str | None:
    """The most recently modified entry of a checkpoint folder (ignoring sync markers)."""
    try:
        entries = [p for p in folder.iterdir() if not p.name.endswith((".sagemaker-uploaded", ".sagemaker-ignore"))]
    except OSError:
        return None
    if not entries:
        return None
    return max(entries, key=lambda p: (p.stat().st_mtime if p.exists() else 0.0, p.name)).name


class ProgressView:
    """Prints the view of one run; `tick(runner)` is called by the runner's supervise loop."""

    def __init__(self, stream: TextIO, label: str = "") -> None:
        self._stream = stream
        self._tty = bool(getattr(stream, "isatty", lambda: False)())
        self._label = f"{label} " if label else ""
        self._had_workers: set[str] = set()
        self._attempt = 0
        self._last_key: tuple[object, ...] | None = None
        self._last_line = ""
        self._last_print = 0.0
        self._started = time.monotonic()

    def _host_text(self, runner: LocalRunner, index: int) -> tuple[str, str]:
        agent, layout = runner.agents[index], runner.layouts[index]
        if runner.outcome.job_restarts != self._attempt:  # a new set of "instances"
            self._attempt, self._had_workers = runner.outcome.job_restarts, set()
        code = agent.poll()
        workers = runner.chaos.live.get(agent.host, 0)
        if workers:
            self._had_workers.add(agent.host)
        idle = "waiting" if agent.host in self._had_workers else "starting"
        state = ("done" if code == 0 else f"exit {code}") if code is not None else ("running" if workers else idle)
        host = runner.progress.hosts.get(agent.host)
        step = f" step {host.step}" if host is not None and host.step is not None else ""
        ckpt = newest_entry(layout.container_path(runner.config.checkpoint_local_path))
        return state, f"{agent.host} {state}{step}" + (f" ckpt {ckpt}" if ckpt else "")

    def tick(self, runner: LocalRunner, *, final: bool = False) -> None:
        """Print the view line if it is due (`final`: the last line, unless it was just printed)."""
        if not runner.agents:
            return
        hosts = [self._host_text(runner, i) for i in range(len(runner.agents))]
        restarts = runner.outcome.job_restarts + runner.chaos.in_job_restarts
        # "waiting" (between torchrun's restarts, or workers ending one by one) is not worth a line
        key = (tuple("running" if state == "waiting" else state for state, _ in hosts), restarts)
        elapsed = time.monotonic() - self._started
        line = (f"{self._label}[{elapsed:5.0f} s] " + " | ".join(text for _, text in hosts)
                + f" | restarts {restarts}")
        now = time.monotonic()
        due = key != self._last_key or (line != self._last_line and now - self._last_print >= PRINT_EVERY)
        if final and key == self._last_key and not self._tty:
            return
        if self._tty:
            if line == self._last_line and not final:
                return
            self._write(line, newline=final)
        elif due or final:
            self._write(line, newline=True)
        else:
            return
        self._last_key, self._last_line, self._last_print = key, line, now

    def _write(self, text: str, *, newline: bool) -> None:
        if self._tty:
            self._stream.write("\r\033[K" + text + ("\n" if newline else ""))
        else:
            self._stream.write(text + "\n")
        self._stream.flush()
