"""The `[sm_dist] ...` lines the runtime prints and local mode reads back, written once (stdlib).

Rank 0 prints on stdout:

    [sm_dist] step=12 loss=0.4312 lr=0.001          per logged step: the metric line, which
                                                    SageMaker's MetricDefinitions also scrape
                                                    (their regexes: metric_regex)
    [sm_dist] resumed step=8 epoch=1                after a restore
    [sm_dist] final step=24 model_sha256=<64 hex>   once, after the final model is written

and a worker writes on stderr, from a signal handler or just before it is killed:

    [sm_dist] signal 15 received; stopping at the next step boundary
    [sm_dist] fault hook crash-in-save:8: SIGKILL rank 1    (the test-only SM_DIST_FAULT hook)

and each host's worker, after it restored the checkpoint folder for restarted workers (or found
one SageMaker restored at the job's start), names the checkpoint a script resuming from "the newest
in my folder" takes, and its step when the name or metadata holds one (sm_dist.contract.checkpoint_names):

    [sm_dist] restored step=20 on algo-2: /opt/ml/checkpoints/checkpoint-20
    [sm_dist] restored on algo-2: /opt/ml/checkpoints/snapshot.pt      (its step unknown)

and, when its script finished without training with the other ranks (sm_dist.runtime.run_script,
from what its process group did: the group's world size and the collectives it ran):

    [sm_dist] rank 3 trained alone: it joined no process group (WORLD_SIZE=4)

and the container's PID 1, on stderr, each time torchrun restarts its host's workers, with
the cause as far as the host can tell (sm_dist.container.failure_watch): the failed rank's error
and where in the user's code, a signal, a hang, or an error a peer's death caused (RESTART_AFTER_PEER):

    [sm_dist] restart on algo-2: rank 1 — ValueError: shape mismatch at train.py:22 in check_batch
    [sm_dist] restart on algo-1: local rank 0 killed by SIGKILL
    [sm_dist] restart on algo-1: hang: rank 1 on algo-1 made no progress for 20 s after step 10: ...

Writers use the ``*_line`` functions; readers use :func:`read_line`, which finds a line's marker
anywhere in it (a host's output may carry a prefix, e.g. torchrun's ``[rank0]:``), and
:func:`parse_metrics` for a whole metric line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import SupportsFloat, cast

from sm_dist.errors import ConfigError

#: Marker at the start of every sm_dist line.
PREFIX = "[sm_dist]"
#: Significant digits printed for floats: enough for a loss curve, short enough for the logs.
FLOAT_DIGITS = 6
#: Metric names: letters, digits and _ . : / - ; must start with a letter or _.
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.:/-]*"
NAME_RE = re.compile(NAME_PATTERN)
#: A number as printed by format_value (int, float, exponent, nan, inf).
NUMBER_PATTERN = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|nan|inf)"

_P = re.escape(PREFIX)
_METRIC_LINE_RE = re.compile(rf"^{_P}((?: {NAME_PATTERN}=\S+)+)\s*$")
_STEP_RE = re.compile(rf"{_P} step=(\d+)\b")
#: `resumed from step=N` is accepted as well.
_RESUMED_RE = re.compile(rf"{_P} resumed(?: from)? step=(\d+)")
_RESTORED_RE = re.compile(rf"{_P} restored(?: step=(\d+))? on (\S+): (.+?)\s*$")
_FINAL_RE = re.compile(rf"{_P} final step=(\d+) model_sha256=([0-9a-f]{{64}})")
_FAULT_RE = re.compile(rf"{_P} fault hook (\S+):")
_ALONE_RE = re.compile(rf"{_P} rank (\d+) trained alone: (.+)$")
_RESTART_RE = re.compile(rf"{_P} restart on (\S+): (.+?)\s*$")
#: How a restart's cause starts when the host's error followed another rank's failure (not its own cause).
RESTART_AFTER_PEER = "after another rank failed: "


# -- writing ---------------------------------------------------------------------------------------
def check_name(name: str) -> str:
    """`name` if it is a valid metric name; ConfigError otherwise."""
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        raise ConfigError("metric name", name, "use letters, digits and _ . : / - (starting with a letter or _)")
    return name


def metric_regex(name: str) -> str:
    """The regex SageMaker's MetricDefinitions use to capture `name`'s value from a metric line: SageMaker parses
    every container log line with the job's regexes and publishes the captured number to CloudWatch
    (docs/PLATFORM.md §1.6), so the writer, the parser and these regexes agree."""
    return rf"{re.escape(PREFIX)}.* {re.escape(check_name(name))}=({NUMBER_PATTERN})"


def format_value(value: object) -> str:
    """ints as ints, floats rounded to FLOAT_DIGITS significant digits, printed with repr."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    try:
        number = float(cast("SupportsFloat", value))  # also 0-d tensors and numpy scalars
    except (TypeError, ValueError):
        raise ConfigError("metric value", value, "expected a number") from None
    if math.isnan(number) or math.isinf(number):
        return repr(number)
    return repr(float(f"{number:.{FLOAT_DIGITS}g}"))


def step_line(step: int, metrics: Mapping[str, object]) -> str:
    """`[sm_dist] step=<step> name=value ...` in the mapping's order (the metric line)."""
    parts = [f"step={int(step)}"]
    for name, value in metrics.items():
        if check_name(name) == "step":
            raise ConfigError("metric name", name, '"step" is written by sm_dist itself; rename the metric')
        parts.append(f"{name}={format_value(value)}")
    return f"{PREFIX} " + " ".join(parts)


def resumed_line(step: int, epoch: int) -> str:
    """`[sm_dist] resumed step=N epoch=E`."""
    return f"{PREFIX} resumed step={int(step)} epoch={int(epoch)}"


def restored_line(host: str, path: str, step: int | None) -> str:
    """`[sm_dist] restored step=N on HOST: PATH` (no `step=` when the checkpoint names none)."""
    return f"{PREFIX} restored" + (f" step={int(step)}" if step is not None else "") + f" on {host}: {path}"


def final_line(step: int, model_sha256: str) -> str:
    """`[sm_dist] final step=N model_sha256=<hex>`."""
    return f"{PREFIX} final step={int(step)} model_sha256={model_sha256}"


def fault_line(fault: str, rank: int) -> str:
    """`[sm_dist] fault hook KIND:STEP: SIGKILL rank R`; `fault` is the spec as given (contract.faults)."""
    return f"{PREFIX} fault hook {fault}: SIGKILL rank {int(rank)}"


def alone_line(rank: int, why: str) -> str:
    """`[sm_dist] rank R trained alone: WHY` (WHY: what its process group did, e.g. "it joined no process group")."""
    return f"{PREFIX} rank {int(rank)} trained alone: {why}"


def restart_line(host: str, cause: str) -> str:
    """`[sm_dist] restart on HOST: CAUSE` (one line: CAUSE's line breaks become spaces)."""
    return f"{PREFIX} restart on {host}: " + " ".join(cause.split())


@dataclass(frozen=True)
class RestartLine:
    """torchrun restarted `host`'s workers, for `cause`."""

    host: str
    cause: str

    @property
    def after_peer(self) -> bool:
        """The host's workers failed because another rank did: that rank's host names the cause."""
        return self.cause.startswith(RESTART_AFTER_PEER)


def read_restart(line: str) -> RestartLine | None:
    """The restart line in `line` (its marker may stand after a prefix), or None."""
    match = _RESTART_RE.search(line) if PREFIX in line else None
    return RestartLine(match.group(1), match.group(2)) if match else None


def signal_line(signum: int) -> str:
    """What a worker writes when it gets a stop signal (from the handler: no logging there)."""
    return f"{PREFIX} signal {int(signum)} received; stopping at the next step boundary"


# -- reading ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepLine:
    """A metric line: `step` optimizer steps are done."""

    step: int


@dataclass(frozen=True)
class ResumedLine:
    """A restore: training continues after `step`."""

    step: int


@dataclass(frozen=True)
class RestoredLine:
    """A host's checkpoint folder was restored: the checkpoint a script resumes from, its step or None."""

    host: str
    path: str
    step: int | None


@dataclass(frozen=True)
class FinalLine:
    """The end of training: the final model's step and weights' sha256."""

    step: int
    model_sha256: str


@dataclass(frozen=True)
class FaultLine:
    """The fault hook killed a rank; `fault` is its spec, e.g. "crash-in-save:8"."""

    fault: str


@dataclass(frozen=True)
class AloneLine:
    """A rank whose script finished without training with the others; `why` says what its group did."""

    rank: int
    why: str


LogLine = StepLine | ResumedLine | RestoredLine | FinalLine | FaultLine | AloneLine


def read_line(line: str) -> LogLine | None:
    """The sm_dist line in `line` (its marker may stand after a prefix), or None for any other."""
    if PREFIX not in line:
        return None
    if match := _FINAL_RE.search(line):
        return FinalLine(int(match.group(1)), match.group(2))
    if match := _RESTORED_RE.search(line):
        step = match.group(1)
        return RestoredLine(match.group(2), match.group(3), int(step) if step is not None else None)
    if match := _RESUMED_RE.search(line):
        return ResumedLine(int(match.group(1)))
    if match := _STEP_RE.search(line):
        return StepLine(int(match.group(1)))
    if match := _FAULT_RE.search(line):
        return FaultLine(match.group(1))
    if match := _ALONE_RE.search(line):
        return AloneLine(int(match.group(1)), match.group(2))
    return None


def parse_metrics(line: str) -> dict[str, float] | None:
    """The metrics of a whole metric line (step as a float too), or None for any other line."""
    match = _METRIC_LINE_RE.match(line.rstrip("\n"))
    if match is None:
        return None
    out: dict[str, float] = {}
    for pair in match.group(1).split():
        name, _, raw = pair.partition("=")
        try:
            out[name] = float(raw)
        except ValueError:
            return None
    return out if "step" in out else None


__all__ = [
    "metric_regex",
    "AloneLine",
    "FLOAT_DIGITS",
    "NAME_RE",
    "NUMBER_PATTERN",
    "PREFIX",
    "RESTART_AFTER_PEER",
    "FaultLine",
    "FinalLine",
    "LogLine",
    "RestartLine",
    "RestoredLine",
    "ResumedLine",
    "StepLine",
    "alone_line",
    "check_name",
    "fault_line",
    "final_line",
    "format_value",
    "parse_metrics",
    "read_line",
    "read_restart",
    "restart_line",
    "restored_line",
    "resumed_line",
    "signal_line",
    "step_line",
]
