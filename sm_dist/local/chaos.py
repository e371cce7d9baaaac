"""Chaos specs: how local mode interrupts a job the way the cloud does.

  kill:STEP           SIGKILL one random worker rank once a log line shows step >= STEP
  kill:SECONDSs       the same, SECONDS after the first worker process started (any script:
                      no step lines needed), e.g. kill:20s
  sigterm:STEP        spot interruption: SIGTERM to every host's first process, the grace
  sigterm:SECONDSs    period, SIGKILL, then the whole job restarts from the checkpoint URI
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
_SPEC_RE = re.compile(r"^(?P<kind>[a-z0-9-]+)(?::(?P<arg>[0-9.]+)(?P<unit>s?))?$")
#: Kinds that may be timed (`kill:20s`) instead of triggered by a step line.
TIMED_KINDS = ("kill", "sigterm")
_EXPECTED = "expected kill:STEP, kill:SECONDSs, sigterm:STEP, sigterm:SECONDSs, crash-in-save:STEP or s3-faults[:SECONDS]"


@dataclass(frozen=True)
class Fault:
    """One parsed chaos spec: step-triggered (`step`), timed (`at_seconds`) or, for s3-faults, a
    duration (`seconds`)."""

    kind: str
    step: int = 0
    seconds: float = 0.0
    at_seconds: float | None = None

    @property
    def timed(self) -> bool:
        return self.at_seconds is not None

    def __str__(self) -> str:
        if self.kind == "s3-faults":
            return f"s3-faults:{self.seconds:g}"
        if self.at_seconds is not None:
            return f"{self.kind}:{self.at_seconds:g}s"
        return f"{self.kind}:{self.step}"


def parse_fault(text: str) -> Fault:
    """Parse one `--chaos` value, e.g. 'kill:5' or 'sigterm:20s'."""
    match = _SPEC_RE.match(str(text).strip().lower())
    kind = match.group("kind") if match else str(text)
    if match is None or kind not in KINDS:
        raise ConfigError("chaos", text, _EXPECTED)
    arg = match.group("arg")
    if match.group("unit"):
        if kind not in TIMED_KINDS:
            raise ConfigError("chaos", text, f"only kill and sigterm take seconds (e.g. kill:20s); {kind} does not")
        try:
            at = float(arg)
        except ValueError:
            raise ConfigError("chaos", text, f"give a number of seconds > 0, e.g. {kind}:20s") from None
        if at <= 0:
            raise ConfigError("chaos", text, f"give a number of seconds > 0, e.g. {kind}:20s")
        return Fault(kind, at_seconds=at)
    if kind == "s3-faults":
        seconds = float(arg) if arg else DEFAULT_S3_FAULT_SECONDS
        if seconds <= 0:
            raise ConfigError("chaos", text, "give s3-faults a positive number of seconds")
        return Fault(kind, seconds=seconds)
    if arg is None or not arg.isdigit() or int(arg) < 1:
        hint = f"{kind}:5 or {kind}:20s" if kind in TIMED_KINDS else f"{kind}:5"
        raise ConfigError("chaos", text, f"give a step number >= 1, e.g. {hint}")
    return Fault(kind, step=int(arg))


def parse_faults(specs: Iterable[str | Fault]) -> tuple[Fault, ...]:
    """Parse several specs; a kind may appear once per step."""
    faults = tuple(s if isinstance(s, Fault) else parse_fault(s) for s in specs)
    if len(set(faults)) != len(faults):
        raise ConfigError("chaos", [str(f) for f in faults], "each chaos spec may be given once")
    if sum(f.kind == "crash-in-save" for f in faults) > 1:
        raise ConfigError("chaos", [str(f) for f in faults], "give crash-in-save once (one SM_DIST_FAULT hook)")
    return faults
