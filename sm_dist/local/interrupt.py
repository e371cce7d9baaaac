"""Stopping a local run from outside stops all of it: SIGINT (Ctrl-C, a notebook's interrupt) or SIGTERM
(`timeout`, CI, `kill`) to the process that runs it.

Every emulated host runs in a session of its own (`sm_dist.local.agent`: the terminal's Ctrl-C must not
reach the hosts behind local mode's back), so nothing but local mode can stop them: a SIGTERM's default
action ended local mode alone, and every host's PID 1, torchrun and ranks ran on, re-parented to init.
While a run lasts (`LocalRunner.run`), `StopSignals` takes both signals in the main thread: the first is
recorded (`signum`) and the runner stops every host as SageMaker stops a job — SIGTERM to each host's
first process — with at most INTERRUPT_GRACE_S of grace, then SIGKILL to everything each host started;
a second signal raises `Interrupted` at once, and the runner kills every host before it propagates.
`Interrupted` is a KeyboardInterrupt: a notebook shows it as an interrupted cell, and `sm-dist` exits
with 128 + the signal (130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType, TracebackType

#: The grace of a stop asked for from outside (SageMaker's own stop grants 120 s: a rehearsal's user
#: who pressed Ctrl-C wants the terminal back, and a hung rank would use all of it).
INTERRUPT_GRACE_S = 10.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)
_log = logging.getLogger(__name__)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; every host it started is gone."""

    def __init__(self, signum: int, where: str = "") -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"stopped by {signal.Signals(signum).name}: every emulated host was stopped{where}")


class StopSignals:
    """Within `with`: SIGINT and SIGTERM are recorded (`signum`) for the runner to act on; a second one
    raises `Interrupted`. Outside the main thread (which alone receives signals) it changes nothing."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._on_signal) for sig in SIGNALS}
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)  # type: ignore[arg-type]
        self._previous = {}

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is not None:
            raise Interrupted(signum)
        self.signum = signum
        _log.warning("%s: stopping every host (SIGTERM, at most %.0f s of grace, then SIGKILL)",
                     signal.Signals(signum).name, INTERRUPT_GRACE_S)

    def grace(self, seconds: float) -> float:
        """The grace of the stop that comes now: `seconds`, or at most INTERRUPT_GRACE_S after a signal."""
        return min(seconds, INTERRUPT_GRACE_S) if self.signum is not None else seconds


__all__ = ["INTERRUPT_GRACE_S", "Interrupted", "StopSignals"]
