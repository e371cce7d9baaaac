"""SIGTERM → a flag the ranks agree on at a step boundary, and the grace-time budget.

SageMaker sends SIGTERM on stop, on spot interruption and at MaxRuntime, then SIGKILLs 120 s
later (docs/PLATFORM.md §1.3); torchrun forwards it to the workers and SIGKILLs them after its shutdown
timeout. Ranks on different hosts receive the signal at different times, so the handler only
records it; the checkpointer all-reduces the flag (MAX) once per step so every rank stops after
the same step.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Mapping
from types import FrameType
from typing import Any

from sm_dist.contract.log_lines import signal_line
from sm_dist.contract.torch_support import TORCHRUN_FIXED_SHUTDOWN_S, honours_shutdown_timeout

_log = logging.getLogger(__name__)

#: Seconds torchrun waits for workers after forwarding a signal (--shutdown-timeout, read by
#: torch 2.13's run.py from PET_SHUTDOWN_TIMEOUT or TORCH_ELASTIC_SHUTDOWN_TIMEOUT; sm_dist's
#: PID 1 sets the latter to 100; torchrun's default is 30 — docs/PLATFORM.md §1.3).
DEFAULT_GRACE_SECONDS = 30.0
GRACE_ENVS = ("PET_SHUTDOWN_TIMEOUT", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT")
#: A final save is attempted if predicted_duration * SAFETY + MARGIN fits in the time left.
SAFETY_FACTOR = 1.5
MARGIN_SECONDS = 2.0


def grace_seconds(environ: Mapping[str, str] | None = None, torch_version: str | None = None) -> float:
    """Seconds a worker has between SIGTERM and SIGKILL.

    The variables count only where torchrun reads them (torch 2.12+); an older torchrun kills
    its workers a fixed 30 s after forwarding the signal, whatever the environment says.
    """
    if torch_version is None:
        import torch

        torch_version = torch.__version__
    if not honours_shutdown_timeout(torch_version):
        return TORCHRUN_FIXED_SHUTDOWN_S
    env = os.environ if environ is None else environ
    for name in GRACE_ENVS:
        try:
            return float(env[name])
        except (KeyError, ValueError):
            continue
    return DEFAULT_GRACE_SECONDS


def final_save_fits(elapsed: float, predicted: float | None, grace: float) -> bool:
    """Whether a save predicted to take `predicted` s fits in what is left of `grace`.

    With no measurement yet (no save so far in this process) the save is attempted: losing the
    attempt costs nothing more than not trying.
    """
    if predicted is None:
        return True
    return elapsed + predicted * SAFETY_FACTOR + MARGIN_SECONDS <= grace


class StopSignal:
    """Records SIGTERM (and SIGINT when asked); never exits by itself."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        self._signals = signals
        self._previous: dict[int, Any] = {}
        self.received_at: float | None = None  # time.monotonic() of the first signal

    def install(self) -> bool:
        """Install the handlers (main thread only); False when that is impossible."""
        if threading.current_thread() is not threading.main_thread():
            _log.warning("checkpointer created outside the main thread: SIGTERM will not trigger a final save")
            return False
        for sig in self._signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return True

    def uninstall(self) -> None:
        """Put the previous handlers back."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received_at is None:
            self.received_at = time.monotonic()
            # logging from a signal handler can deadlock on the handler lock; os.write cannot
            os.write(2, f"{signal_line(signum)}\n".encode())

    @property
    def requested(self) -> bool:
        return self.received_at is not None

    def elapsed(self) -> float:
        """Seconds since the signal (0 when none came)."""
        return 0.0 if self.received_at is None else time.monotonic() - self.received_at

    def trigger(self) -> None:
        """Act as if the signal came now (used by callers that decide to stop themselves)."""
        self._handle(0, None)


__all__ = ["DEFAULT_GRACE_SECONDS", "StopSignal", "final_save_fits", "grace_seconds"]
