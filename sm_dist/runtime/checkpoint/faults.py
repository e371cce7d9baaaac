"""Test-only fault hook: SIGKILL this process at a chosen point of a save.

``SM_DIST_FAULT`` holds comma-separated ``KIND:STEP`` items. Local mode's ``--chaos
crash-in-save`` and the checkpoint tests use it to prove that a crash while saving never
leaves a loadable half checkpoint. Kinds:

* ``crash-in-save:STEP`` — rank 1 (rank 0 when alone) is killed at step STEP after its own
  files are written and published, before the manifest is committed;
* ``crash-in-commit:STEP`` — rank 0 is killed halfway through writing the manifest's
  temporary file.

A fault fires only in the first attempt (TORCHELASTIC_RESTART_COUNT absent or 0), so a
restarted worker resumes instead of crashing again. Never set this in a real job.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping

from sm_dist.errors import ConfigError

_log = logging.getLogger(__name__)

FAULT_ENV = "SM_DIST_FAULT"
KINDS = ("crash-in-save", "crash-in-commit")


def parse_faults(environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """kind -> step from SM_DIST_FAULT; empty when unset or in a restarted attempt."""
    env = os.environ if environ is None else environ
    text = env.get(FAULT_ENV, "").strip()
    if not text or env.get("TORCHELASTIC_RESTART_COUNT", "0") not in ("", "0"):
        return {}
    faults = {}
    for item in text.split(","):
        kind, _, step = item.strip().partition(":")
        if kind not in KINDS or not step.isdigit():
            raise ConfigError(FAULT_ENV, text, f"expected KIND:STEP items with KIND in {', '.join(KINDS)}")
        faults[kind] = int(step)
    return faults


class FaultHook:
    """Kills the process at the configured points; does nothing when no fault is set."""

    def __init__(self, faults: Mapping[str, int], rank: int, world_size: int) -> None:
        self._faults = dict(faults)
        self._victim = 1 if world_size > 1 else 0
        self._rank = rank

    def after_shards(self, step: int) -> None:
        """Called once this rank's files are published, before the commit."""
        if self._faults.get("crash-in-save") == step and self._rank == self._victim:
            self._die("crash-in-save", step)

    def midway_commit(self, step: int) -> None:
        """Called by rank 0 halfway through writing the manifest."""
        if self._faults.get("crash-in-commit") == step and self._rank == 0:
            self._die("crash-in-commit", step)

    def _die(self, kind: str, step: int) -> None:
        os.write(2, f"[sm_dist] fault hook {kind}:{step}: SIGKILL rank {self._rank}\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["FAULT_ENV", "FaultHook", "parse_faults"]
