"""Fault specs: one grammar for local mode's ``--chaos`` and the checkpointer's ``SM_DIST_FAULT`` hook.

A spec is ``KIND:STEP`` (at a step), ``KIND:SECONDSs`` (that long after the job's first worker
started: kill and sigterm only) or ``KIND[:SECONDS]`` (a duration: s3-faults). ``str(fault)`` gives
the spec back in one spelling, and that text travels unchanged: local mode hands its crash-in-save
spec to the workers in ``SM_DIST_FAULT`` (:func:`hook_env_value`), the checkpointer reads it
(:func:`hook_faults`) and names it in its fault line when it fires (``contract.log_lines``), and
local mode matches that name against the ``--chaos`` values it was given.

Kinds (what each does is documented where it is carried out: ``sm_dist.local.chaos`` for local
mode, ``sm_dist.runtime.checkpoint.faults`` for the hook).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias, get_args

from sm_dist.errors import ConfigError

#: The environment variable of the checkpointer's test-only fault hook.
FAULT_ENV = "SM_DIST_FAULT"
#: What local mode's --chaos takes: a spec's kind, as a user's type checker sees it, and the tuple of them.
ChaosKind: TypeAlias = Literal["kill", "sigterm", "hang", "crash-in-save", "kill-in-save", "s3-faults", "capacity",
                               "max-wait"]
CHAOS_KINDS: tuple[str, ...] = get_args(ChaosKind)
#: What the checkpointer's fault hook carries out (crash-in-save is a chaos kind too).
HOOK_KINDS = ("crash-in-save", "crash-in-commit")
#: Kinds that may be timed (`kill:20s`) instead of triggered by a step line.
TIMED_KINDS = ("kill", "sigterm")
#: Kinds whose argument is a duration in seconds, optional.
DURATION_KINDS = ("s3-faults",)
#: Kinds whose argument is a count, not a step: `capacity:2` (a chain's next job gets no instances
#: twice), `max-wait:1` (a chain's first job that runs ends by its MaxWait), `kill-in-save:2` (every
#: worker killed as the script's second checkpoint save begins); the count's name.
COUNT_KINDS = ("capacity", "max-wait", "kill-in-save")
_COUNT_NAMES = {"capacity": ("TRIES", "a number of tries"), "max-wait": ("LINK", "a link number"),
                "kill-in-save": ("N", "a save number")}
#: How long s3-faults keeps the endpoint failing when no duration is given; long enough to
#: span several sync passes and the first checkpoint uploads of a small job.
DEFAULT_S3_FAULT_SECONDS = 5.0
#: The hook fires only in a worker's first attempt (torchrun's restart count absent or 0).
RESTART_COUNT_ENV = "TORCHELASTIC_RESTART_COUNT"

_SPEC_RE = re.compile(r"^(?P<kind>[a-z0-9-]+)(?::(?P<arg>[0-9.]+)(?P<unit>s?))?$")


@dataclass(frozen=True)
class Fault:
    """One parsed spec: step-triggered (`step`), timed (`at_seconds`) or, for s3-faults, a
    duration (`seconds`)."""

    kind: str
    step: int = 0
    seconds: float = 0.0
    at_seconds: float | None = None

    @property
    def timed(self) -> bool:
        return self.at_seconds is not None

    def __str__(self) -> str:
        if self.kind in DURATION_KINDS:
            return f"{self.kind}:{self.seconds:g}"
        if self.at_seconds is not None:
            return f"{self.kind}:{self.at_seconds:g}s"
        return f"{self.kind}:{self.step}"


def _expected(kinds: Iterable[str]) -> str:
    forms = []
    for kind in kinds:
        if kind in DURATION_KINDS:
            forms.append(f"{kind}[:SECONDS]")
        elif kind in COUNT_KINDS:
            forms.append(f"{kind}:{_COUNT_NAMES[kind][0]}")
        elif kind in TIMED_KINDS:
            forms += [f"{kind}:STEP", f"{kind}:SECONDSs"]
        else:
            forms.append(f"{kind}:STEP")
    return "expected " + ", ".join(forms[:-1]) + f" or {forms[-1]}" if len(forms) > 1 else f"expected {forms[0]}"


def parse_fault(text: str, kinds: tuple[str, ...] = CHAOS_KINDS, field: str = "chaos") -> Fault:
    """Parse one spec, e.g. 'kill:5' or 'sigterm:20s', of one of `kinds`; ConfigError naming `field`."""
    match = _SPEC_RE.match(str(text).strip().lower())
    kind = match.group("kind") if match else str(text)
    if match is None or kind not in kinds:
        raise ConfigError(field, text, _expected(kinds))
    arg = match.group("arg")
    if match.group("unit"):
        if kind not in TIMED_KINDS:
            raise ConfigError(field, text, f"only kill and sigterm take seconds (e.g. kill:20s); {kind} does not")
        try:
            at = float(arg)
        except ValueError:
            raise ConfigError(field, text, f"give a number of seconds > 0, e.g. {kind}:20s") from None
        if at <= 0:
            raise ConfigError(field, text, f"give a number of seconds > 0, e.g. {kind}:20s")
        return Fault(kind, at_seconds=at)
    if kind in DURATION_KINDS:
        seconds = float(arg) if arg else DEFAULT_S3_FAULT_SECONDS
        if seconds <= 0:
            raise ConfigError(field, text, f"give {kind} a positive number of seconds")
        return Fault(kind, seconds=seconds)
    if kind in COUNT_KINDS and (arg is None or not arg.isdigit() or int(arg) < 1):
        raise ConfigError(field, text, f"give {_COUNT_NAMES[kind][1]} >= 1, e.g. {kind}:2")
    if arg is None or not arg.isdigit() or int(arg) < 1:
        hint = f"{kind}:5 or {kind}:20s" if kind in TIMED_KINDS else f"{kind}:5"
        raise ConfigError(field, text, f"give a step number >= 1, e.g. {hint}")
    return Fault(kind, step=int(arg))


def hook_env_value(faults: Iterable[Fault]) -> str | None:
    """The SM_DIST_FAULT value carrying the hook's share of `faults` (comma-separated), or None."""
    specs = [str(f) for f in faults if f.kind in HOOK_KINDS]
    return ",".join(specs) or None


def hook_faults(environ: Mapping[str, str]) -> dict[str, int]:
    """kind -> step from SM_DIST_FAULT; empty when unset or in a restarted attempt."""
    text = environ.get(FAULT_ENV, "").strip()
    if not text or environ.get(RESTART_COUNT_ENV, "0") not in ("", "0"):
        return {}
    faults = [parse_fault(item, HOOK_KINDS, FAULT_ENV) for item in text.split(",")]
    return {f.kind: f.step for f in faults}


__all__ = [
    "CHAOS_KINDS",
    "COUNT_KINDS",
    "DEFAULT_S3_FAULT_SECONDS",
    "DURATION_KINDS",
    "FAULT_ENV",
    "HOOK_KINDS",
    "RESTART_COUNT_ENV",
    "TIMED_KINDS",
    "Fault",
    "hook_env_value",
    "hook_faults",
    "parse_fault",
]
