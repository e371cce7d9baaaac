"""sm_dist's log lines (contract.log_lines): format, read back, and the request's SageMaker regexes that really match them."""

from __future__ import annotations

import math
import re

import pytest

from sm_dist.contract.log_lines import (
    FaultLine,
    FinalLine,
    ResumedLine,
    StepLine,
    fault_line,
    final_line,
    parse_metrics,
    read_line,
    resumed_line,
    signal_line,
    step_line,
)
from sm_dist.errors import ConfigError
from sm_dist.planning.request import metric_definitions


def test_line_round_trips() -> None:
    line = step_line(12, {"loss": 0.43123456789, "lr": 1e-3, "tokens": 4096, "grad_norm": float("nan")})
    assert line == "[sm_dist] step=12 loss=0.431235 lr=0.001 tokens=4096 grad_norm=nan"
    parsed = parse_metrics(line)
    assert parsed["step"] == 12 and parsed["loss"] == 0.431235 and parsed["tokens"] == 4096
    assert math.isnan(parsed["grad_norm"])
    assert parse_metrics("epoch 3 loss=0.1") is None
    assert parse_metrics("[sm_dist] loss=0.1") is None  # no step


def test_metric_definitions_capture_each_value_and_not_a_similar_name() -> None:
    line = step_line(7, {"val_loss": 2.5, "loss": 1.25e-7, "lr": 3e-4})
    defs = {d["Name"]: d["Regex"] for d in metric_definitions(["loss", "val_loss", "lr"])}
    assert list(defs) == ["step", "loss", "val_loss", "lr"]
    got = {name: float(re.search(rx, line).group(1)) for name, rx in defs.items()}
    assert got == {"step": 7.0, "loss": 1.25e-7, "val_loss": 2.5, "lr": 3e-4}
    assert re.search(defs["loss"], "INFO some other line loss=3") is None


def test_limits_and_bad_names() -> None:
    with pytest.raises(ConfigError, match="at most 40"):
        metric_definitions([f"m{i}" for i in range(40)])
    with pytest.raises(ConfigError, match="metric name"):
        step_line(1, {"bad name": 1.0})
    with pytest.raises(ConfigError, match="step"):
        step_line(1, {"step": 2})
    with pytest.raises(ConfigError, match="metric value"):
        step_line(1, {"loss": "high"})


@pytest.mark.parametrize("prefix", ["", "[rank0]:", "algo-1 | "])
def test_every_line_the_runtime_writes_reads_back(prefix: str) -> None:
    sha = "0123456789abcdef" * 4
    assert read_line(prefix + step_line(12, {"loss": 0.5})) == StepLine(12)
    assert read_line(prefix + resumed_line(8, 1)) == ResumedLine(8)
    assert read_line(prefix + final_line(24, sha)) == FinalLine(24, sha)
    assert read_line(prefix + fault_line("crash-in-save:8", 1)) == FaultLine("crash-in-save:8")
    assert read_line(prefix + signal_line(15)) is None  # written for people, read by nobody
    assert read_line(prefix + "step=3 loss=1") is None and read_line("[sm_dist] final step=2 model_sha256=abc") is None
