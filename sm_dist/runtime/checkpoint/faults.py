"""Test-only fault hook: SIGKILL this process at a chosen point of a save.

``SM_DIST_FAULT`` holds comma-separated ``KIND:STEP`` items (the grammar of
``sm_dist.contract.faults``, shared with local mode's ``--chaos``). Local mode's ``--chaos
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

import os
import signal
from collections.abc import Mapping

from sm_dist.contract.faults import FAULT_ENV, Fault, hook_faults
from sm_dist.contract.log_lines import fault_line


def parse_faults(environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """kind -> step from SM_DIST_FAULT (default: this process's environment); empty when unset or
    in a restarted attempt."""
    return hook_faults(os.environ if environ is None else environ)


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
        os.write(2, f"{fault_line(str(Fault(kind, step=step)), self._rank)}\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["FAULT_ENV", "FaultHook", "parse_faults"]
