"""Chaos specs: how local mode interrupts a job the way the cloud does.

  kill:STEP           SIGKILL one random worker rank once a log line shows step >= STEP
  sigterm:STEP        spot interruption: SIGTERM to every host's first process, the grace
                      period, SIGKILL, then the whole job restarts from the checkpoint URI
  crash-in-save:STEP  a rank dies while the checkpoint of step STEP is being written
                      (the checkpointer's SM_DIST_FAULT hook)
  s3-faults[:SECONDS] the S3 endpoint answers every request with 503 SlowDown for SECONDS
                      (default 5), starting when training starts (the first step line)

Each fault fires once per job (not again after the restart it causes). Several may be given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sm_dist.errors import ConfigError

KINDS = ("kill", "sigterm", "crash-in-save", "s3-faults")
#: How long s3-faults keeps the endpoint failing when no duration is given; long enough to
#: span several sync passes and the first checkpoint uploads of a small job.
DEFAULT_S3_FAULT_SECONDS = 5.0
_SPEC_RE = re.compile(r"^(?P<kind>[a-z0-9-]+)(?::(?P<arg>[0-9.]+))?$")


@dataclass(frozen=True)
class Fault:
    """One parsed chaos spec."""

    kind: str
    step: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        if self.kind == "s3-faults":
            return f"s3-faults:{self.seconds:g}"
        return f"{self.kind}:{self.step}"


def parse_fault(text: str) -> Fault:
    """Parse one `--chaos` value, e.g. 'kill:5'."""
    match = _SPEC_RE.match(str(text).strip().lower())
    kind = match.group("kind") if match else str(text)
    if match is None or kind not in KINDS:
        raise ConfigError("chaos", text, "expected kill:STEP, sigterm:STEP, crash-in-save:STEP or s3-faults[:SECONDS]")
    arg = match.group("arg")
    if kind == "s3-faults":
        seconds = float(arg) if arg else DEFAULT_S3_FAULT_SECONDS
        if seconds <= 0:
            raise ConfigError("chaos", text, "give s3-faults a positive number of seconds")
        return Fault(kind, seconds=seconds)
    if arg is None or not arg.isdigit() or int(arg) < 1:
        raise ConfigError("chaos", text, f"give a step number >= 1, e.g. {kind}:5")
    return Fault(kind, step=int(arg))


def parse_faults(specs: Iterable[str | Fault]) -> tuple[Fault, ...]:
    """Parse several specs; a kind may appear once per step."""
    faults = tuple(s if isinstance(s, Fault) else parse_fault(s) for s in specs)
    if len(set(faults)) != len(faults):
        raise ConfigError("chaos", [str(f) for f in faults], "each chaos spec may be given once")
    if sum(f.kind == "crash-in-save" for f in faults) > 1:
        raise ConfigError("chaos", [str(f) for f in faults], "give crash-in-save once (one SM_DIST_FAULT hook)")
    return faults
