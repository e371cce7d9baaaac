"""sm_dist's metric lines as TensorBoard scalars, in the folder SageMaker syncs while the job runs.

With `tensorboard=True` the job's PID 1 sets `SM_TENSORBOARD_DIR` (docs/PLATFORM.md §1.14); rank 0's
`log_metrics` then also writes each numeric metric of a step line as a scalar, into
`$SM_TENSORBOARD_DIR/sm_dist` (a run of its own, beside what the script writes itself), flushed at
once: SummaryWriter flushes every 120 s by default, longer than a short job lives. Without the
`tensorboard` package, one line says why nothing is written, and training goes on.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from sm_dist.container.script_env import TENSORBOARD_DIR_ENV

#: The folder under $SM_TENSORBOARD_DIR sm_dist's own scalars go to (TensorBoard shows it as a run).
RUN_NAME = "sm_dist"
_log = logging.getLogger(__name__)
_state: dict[str, Any] = {}  # "writer": the SummaryWriter, or None once it cannot be made; "dir": its folder


def _writer() -> Any:
    folder = os.environ.get(TENSORBOARD_DIR_ENV)
    if not folder:
        return None
    if _state.get("dir") == folder:
        return _state["writer"]
    _state["dir"], _state["writer"] = folder, None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:  # torch raises this when the tensorboard package is missing
        print(f"[sm_dist] tensorboard: scalars not written to {folder} ({exc}); pip install tensorboard "
              "(the requirements.txt of the source dir) to have them", file=sys.stderr, flush=True)
        return None
    _state["writer"] = SummaryWriter(log_dir=os.path.join(folder, RUN_NAME))
    return _state["writer"]


def write_scalars(step: int, metrics: Mapping[str, object]) -> int:
    """Add every numeric metric (not bools) at `step` and flush; the number written (0 when off)."""
    writer = _writer()
    if writer is None:
        return 0
    count = 0
    for name, value in metrics.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            writer.add_scalar(name, float(value), global_step=step)
            count += 1
    writer.flush()
    return count


def close() -> None:
    """Close the writer (its file complete); the next write opens a new one."""
    writer = _state.pop("writer", None)
    _state.pop("dir", None)
    if writer is not None:
        writer.close()


__all__ = ["RUN_NAME", "close", "write_scalars"]
