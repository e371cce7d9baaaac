"""The SageMaker MetricDefinitions that scrape sm_dist's metric line (standard library).

Rank 0 prints `[sm_dist] step=12 loss=0.4312 lr=0.001` once per logged step; the line is part of
the log-line contract (sm_dist.contract.log_lines: format, parse, and local mode's reading of
`step=`). SageMaker parses every container log line with the job's MetricDefinitions regexes and
publishes the captured number to CloudWatch (docs/PLATFORM.md §1.6); the regexes are built here
from that contract's prefix, name and number patterns, so writer, parser and regexes agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sm_dist.contract.log_lines import (
    NUMBER_PATTERN,
    PREFIX,
    check_name,
)
from sm_dist.errors import ConfigError

#: SageMaker accepts at most 40 MetricDefinitions per job (API reference, AlgorithmSpecification).
MAX_METRIC_DEFINITIONS = 40

def metric_regex(name: str) -> str:
    """The SageMaker regex capturing `name`'s value from a metric line."""
    return rf"{re.escape(PREFIX)}.* {re.escape(check_name(name))}=({NUMBER_PATTERN})"


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

    "metric_definitions",
    "metric_regex",
]
