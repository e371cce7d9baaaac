"""Learning-rate schedules for the shared loop, as factories `(optimizer, total_steps) -> scheduler`.

The loop builds the scheduler after the optimizer and hands it to the Checkpointer, so a resumed
run continues the schedule exactly where it stopped. LambdaLR keeps the state to a step count
(no closures are pickled: the lambda is rebuilt from the flags on resume).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from sm_dist.errors import ConfigError, check_int

SchedulerFactory = Callable[[torch.optim.Optimizer, int], torch.optim.lr_scheduler.LRScheduler]
SCHEDULES = ("constant", "cosine")
#: Cosine decays to this fraction of the peak learning rate (Chinchilla/GPT-3 use 10%,
#: Hoffmann et al. 2022 section 3; Brown et al. 2020 appendix B).
COSINE_FLOOR = 0.1


def lr_schedule(name: str, *, warmup_steps: int = 0) -> SchedulerFactory | None:
    """A factory for `name` ("constant" or "cosine") with linear warmup; None for plain constant."""
    if name not in SCHEDULES:
        raise ConfigError("lr_schedule", name, f"expected one of {', '.join(SCHEDULES)}")
    check_int("warmup_steps", warmup_steps, 0, "use an integer >= 0")
    if name == "constant" and warmup_steps == 0:
        return None

    def factory(optimizer: torch.optim.Optimizer, total_steps: int) -> torch.optim.lr_scheduler.LRScheduler:
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _factor(name, step, warmup_steps, total_steps))

    return factory


def _factor(name: str, step: int, warmup: int, total: int) -> float:
    """Multiplier of the peak lr before optimizer step `step + 1`."""
    if step < warmup:
        return (step + 1) / warmup
    if name == "constant" or total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / (total - warmup))
    return COSINE_FLOOR + (1 - COSINE_FLOOR) * 0.5 * (1 + math.cos(math.pi * progress))
