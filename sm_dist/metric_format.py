"""One metric line format, and the SageMaker MetricDefinitions that scrape it (standard library).

Rank 0 prints `[sm_dist] step=12 loss=0.4312 lr=0.001` once per logged step. SageMaker parses
every container log line with the job's MetricDefinitions regexes and publishes the captured
number to CloudWatch (docs/PLATFORM.md §1.6); local mode reads `step=` from the same lines. Keeping the
writer, the parser and the regexes in one module keeps the three in agreement.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import SupportsFloat, cast

from sm_dist.errors import ConfigError

#: Marker at the start of every metric line.
PREFIX = "[sm_dist]"
#: SageMaker accepts at most 40 MetricDefinitions per job (API reference, AlgorithmSpecification).
MAX_METRIC_DEFINITIONS = 40
#: Significant digits printed for floats: enough for a loss curve, short enough for the logs.
FLOAT_DIGITS = 6
#: Metric names: letters, digits and _ . : / - ; must start with a letter or _.
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]*")
#: A number as printed by format_value (int, float, exponent, nan, inf).
_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|nan|inf)"
_LINE_RE = re.compile(r"^\[sm_dist\]((?: [A-Za-z_][A-Za-z0-9_.:/-]*=\S+)+)\s*$")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        raise ConfigError("metric name", name, "use letters, digits and _ . : / - (starting with a letter or _)")
    return name


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


def format_line(step: int, metrics: Mapping[str, object]) -> str:
    """`[sm_dist] step=<step> name=value ...` in the mapping's order."""
    parts = [f"step={int(step)}"]
    for name, value in metrics.items():
        if _check_name(name) == "step":
            raise ConfigError("metric name", name, '"step" is written by sm_dist itself; rename the metric')
        parts.append(f"{name}={format_value(value)}")
    return f"{PREFIX} " + " ".join(parts)


def parse_line(line: str) -> dict[str, float] | None:
    """The metrics of one metric line (step as float too), or None for any other line."""
    match = _LINE_RE.match(line.rstrip("\n"))
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


def metric_regex(name: str) -> str:
    """The SageMaker regex capturing `name`'s value from a metric line."""
    return rf"\[sm_dist\].* {re.escape(_check_name(name))}=({_NUMBER})"


def metric_definitions(names: Iterable[str]) -> list[dict[str, str]]:
    """SageMaker MetricDefinitions ([{"Name", "Regex"}]) for `names`, plus "step" if absent."""
    ordered = list(dict.fromkeys(["step", *names]))
    if len(ordered) > MAX_METRIC_DEFINITIONS:
        raise ConfigError(
            "metrics", len(ordered), f"SageMaker accepts at most {MAX_METRIC_DEFINITIONS} metric definitions; log fewer"
        )
    return [{"Name": name, "Regex": metric_regex(name)} for name in ordered]


__all__ = [
    "MAX_METRIC_DEFINITIONS",
    "PREFIX",
    "format_line",
    "format_value",
    "metric_definitions",
    "metric_regex",
    "parse_line",
]
