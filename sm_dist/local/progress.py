"""Follow a job's progress from its log lines (the metric-line contract, ARCHITECTURE.md).

Rank 0 prints `[sm_dist] step=N ...` per logged step and, at the end,
`[sm_dist] final step=N model_sha256=<hex>`. Local mode needs nothing else from the workload:
a step number lower than or equal to one already seen means the run resumed from a checkpoint.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

STEP_RE = re.compile(r"\[sm_dist\] step=(\d+)\b")
FINAL_RE = re.compile(r"\[sm_dist\] final step=(\d+) model_sha256=([0-9a-f]{64})")
#: Printed by rank 0 after a restore: "[sm_dist] resumed step=N epoch=E" (sm_dist/runtime/train.py).
RESUME_RE = re.compile(r"\[sm_dist\] resumed(?: from)? step=(\d+)")


@dataclass
class Progress:
    """What the logs said so far. Thread-safe: every host's reader thread feeds it."""

    last_step: int = 0
    max_step: int = 0
    final_step: int | None = None
    model_sha256: str | None = None
    resumed_from: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _listeners: list[Callable[[int], None]] = field(default_factory=list, repr=False)

    def on_step(self, listener: Callable[[int], None]) -> None:
        """Call `listener(step)` for every step line (from the reader threads)."""
        self._listeners.append(listener)

    def feed(self, line: str) -> None:
        """Consume one log line of any host."""
        final = FINAL_RE.search(line)
        if final:
            with self._lock:
                self.final_step, self.model_sha256 = int(final.group(1)), final.group(2)
            return
        resumed = RESUME_RE.search(line)
        if resumed:
            with self._lock:
                self.resumed_from.append(int(resumed.group(1)))
            return
        match = STEP_RE.search(line)
        if match is None:
            return
        step = int(match.group(1))
        with self._lock:
            self.last_step = step
            self.max_step = max(self.max_step, step)
        for listener in list(self._listeners):
            listener(step)

    def new_attempt(self) -> None:
        """A whole-job restart: the final line of an earlier attempt no longer counts."""
        with self._lock:
            self.final_step, self.model_sha256 = None, None
