"""Metrics averaged over all ranks, and logging that only rank 0 does.

`AvgMetric` accumulates a local (sum, count) and all-reduces both when computed, so the mean is
over every sample of every rank (averaging the ranks' means would weight a short last batch
wrong). `log_metrics` prints the metric line (sm_dist.contract.log_lines) on rank 0 only: SageMaker
scrapes every rank's stdout, and one line per step is what its MetricDefinitions expect; with
tensorboard=True it also writes the line's numbers as TensorBoard scalars (`runtime.tensorboard`), and
with `mlflow=` logs them to MLflow (`runtime.mlflow_log`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import TextIO

import torch
import torch.distributed as dist

from sm_dist.contract.log_lines import step_line
from sm_dist.runtime import tensorboard
from sm_dist.runtime.mlflow_log import log_step as mlflow_step

_log = logging.getLogger(__name__)


def get_rank() -> int:
    """This process's global rank (0 without a process group)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _reduce_device() -> torch.device:
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class AvgMetric:
    """Mean of a value over every sample on every rank."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything accumulated (start of an epoch or a logging window)."""
        self._sum = 0.0
        self._count = 0
        self.last_count = 0
        """The global sample count behind the last compute()."""

    def update(self, value: float | torch.Tensor, n: int = 1) -> None:
        """Add a mean `value` over `n` samples (e.g. a batch's mean loss and its size)."""
        if isinstance(value, torch.Tensor):
            value = value.detach().float().item()
        self._sum += float(value) * n
        self._count += n

    def compute(self) -> float:
        """Global mean (NaN if nothing was added anywhere). Collective: every rank calls it."""
        totals = torch.tensor([self._sum, float(self._count)], dtype=torch.float64, device=_reduce_device())
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(totals)
        total, count = totals.tolist()
        self.last_count = int(count)
        return total / count if count else float("nan")


def all_reduce_mean(value: float | torch.Tensor) -> float:
    """Mean of a scalar over ranks (collective)."""
    metric = AvgMetric()
    metric.update(value)
    return metric.compute()


def log_metrics(step: int, metrics: Mapping[str, object], *, stream: TextIO | None = None) -> str | None:
    """On rank 0, print `[sm_dist] step=N name=value ...` and return it (and log it into MLflow when the
    plan set `mlflow=`: sm_dist.runtime.mlflow_log); elsewhere do nothing."""
    if get_rank() != 0:
        return None
    line = step_line(step, metrics)
    out = stream or sys.stdout
    print(line, file=out, flush=True)
    tensorboard.write_scalars(step, metrics)  # with tensorboard=True: $SM_TENSORBOARD_DIR/sm_dist
    mlflow_step(step, metrics)
    return line


def rank0_print(*values: object, sep: str | None = " ", end: str | None = "\n", file: TextIO | None = None,
                flush: bool = True) -> None:
    """print() on rank 0 only (flushed by default, so logs interleave sensibly)."""
    if get_rank() == 0:
        print(*values, sep=sep, end=end, file=file, flush=flush)


__all__ = ["AvgMetric", "all_reduce_mean", "get_rank", "log_metrics", "rank0_print"]
