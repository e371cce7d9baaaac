"""Why torchrun restarted the workers, for the live view and the summary (standard library only).

Each host's PID 1 prints `[sm_dist] restart on HOST: CAUSE` when its workers failed and torchrun
restarts them (sm_dist.contract.log_lines; the cause from sm_dist.container.failure_watch): the rank's
error with the user's file and line, the signal that killed it, or the hang the hang watch named. One
failure may restart every host, and a host whose ranks failed only because a peer died (or waited in a
collective for a rank that hung elsewhere) prints its own line too: that line is left out when another
host's own cause came within `SAME_RESTART_S`, and when it would explain a restart nobody saw (the
failing host's PID 1 stopped the job instead: no restart). A kill local mode's chaos made is named
with its spec; kill-in-save kills every host's workers at once, so the other hosts' kill lines that
follow it are that one restart.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sm_dist.contract.hang import FAILURE_WAITING_PREFIX
from sm_dist.contract.log_lines import RestartLine

#: Lines of several hosts this close together are one restart (torchrun restarts every host's workers
#: within its rendezvous' join timeout).
SAME_RESTART_S = 60.0


def _secondary(line: RestartLine) -> bool:
    """A host that failed because of another: a peer's death, or a hang whose stopped rank is elsewhere."""
    return line.after_peer or line.cause.startswith(FAILURE_WAITING_PREFIX)


@dataclass
class Restarts:
    """The restart lines seen so far, and what they explain."""

    seen: list[tuple[float, RestartLine]] = field(default_factory=list)
    _chaos_seen: int = 0
    _every_host: tuple[float, str] | None = None  # (when, host) of a kill-in-save's first line

    def add(self, line: RestartLine, chaos_fired: Sequence[str] = (), now: float | None = None) -> None:
        """Take one restart line; `chaos_fired`: the chaos specs fired so far (a kill names its spec)."""
        cause = line.cause
        now = time.monotonic() if now is None else now
        if "killed by SIG" in cause and not cause.endswith(")"):
            kills = [spec for spec in chaos_fired[self._chaos_seen:] if spec.startswith("kill")]
            self._chaos_seen = len(chaos_fired)
            if kills:
                cause += f" (chaos {kills[-1]})"
                self._every_host = (now, line.host) if kills[-1].startswith("kill-in-save") else None
            elif self._every_host is not None and self._every_host[1] != line.host \
                    and now - self._every_host[0] <= SAME_RESTART_S:
                return  # the same kill-in-save, seen from another host
        self.seen.append((now, RestartLine(line.host, cause)))

    def explained(self, restarts: int | None = None) -> list[str]:
        """`restart N: HOST CAUSE` per restart, oldest first; `restarts`: how many there were (local mode
        counts them in /proc), which a line of a host that failed because of another may not go past."""
        own = [(at, line) for at, line in self.seen if not _secondary(line)]
        room = len(self.seen) if restarts is None else max(restarts - len(own), 0)
        kept = []
        for at, line in self.seen:
            if _secondary(line):
                if room <= 0 or any(other.host != line.host and abs(at - when) <= SAME_RESTART_S for when, other in own):
                    continue
                room -= 1
            kept.append(line)
        return [f"restart {n}: {line.host} {line.cause}" for n, line in enumerate(kept, 1)]


__all__ = ["SAME_RESTART_S", "Restarts"]
