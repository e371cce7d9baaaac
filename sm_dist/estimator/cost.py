"""Dollars: billed hours × instances × price, on SageMaker, on EC2, and on SageMaker spot.

SageMaker bills every instance from the start of the Downloading status to the end of
Uploading (`BillableTimeInSeconds` × instance count), so the start-up below is billed too.
"""

from __future__ import annotations

from typing import NamedTuple

from sm_dist.catalog import Instance

#: Billed start-up per job start: pulling the PyTorch training image (~10-20 GB) and the code
#: and data channels. SecondaryStatusTransitions of GPU jobs typically show 3-6 minutes of
#: Downloading; an assumption.
STARTUP_SECONDS = 300.0
#: Default spot discount off the SageMaker on-demand price. AWS says managed spot saves "up to
#: 90%"; savings reported for GPU training instances are mostly 50-70%: a middle value.
DEFAULT_SPOT_DISCOUNT = 0.60
#: Expected spot interruptions per instance-hour. The EC2 Spot Instance Advisor puts large GPU
#: types in its ">20% per month" bucket; one instance lost stops the whole multi-instance job.
#: 0.01/h (one per ~100 instance-hours) is a deliberately pessimistic assumption.
SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR = 0.01
#: Time to get going again after an interruption: new capacity + start-up + loading the
#: checkpoint; an assumption.
SPOT_RESTART_SECONDS = 600.0
#: Checkpoint interval assumed for spot: on average half an interval of work is lost per
#: interruption.
CHECKPOINT_INTERVAL_SECONDS = 1800.0


# NamedTuple, not a frozen dataclass: immutable all the same, and ~7x cheaper to define,
# which matters for `sm-dist estimate-cost` start-up (tests/bench/bench_cli_startup.py).
class Cost(NamedTuple):
    """Expected dollars for the whole job."""

    sagemaker: float  #: on-demand SageMaker
    ec2: float  #: the same instance-hours on EC2 on-demand (the SageMaker premium is the gap)
    spot: float  #: SageMaker managed spot, with the expected interruption overhead
    spot_hours: float  #: wall-clock hours on spot, interruptions included

    def to_dict(self) -> dict[str, float]:
        return {"sagemaker": round(self.sagemaker, 2), "ec2": round(self.ec2, 2), "spot": round(self.spot, 2)}


def job_hours(steps: int, step_seconds: float, startup_seconds: float = STARTUP_SECONDS) -> float:
    """Billed wall-clock hours: every step plus the start-up."""
    return (steps * step_seconds + startup_seconds) / 3600.0


def spot_overhead_hours(hours: float, count: int, rate: float = SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR) -> float:
    """Expected hours lost to interruptions: interruptions × (restart + half a checkpoint interval)."""
    interruptions = hours * count * rate
    return interruptions * (SPOT_RESTART_SECONDS + CHECKPOINT_INTERVAL_SECONDS / 2) / 3600.0


def job_cost(hours: float, count: int, inst: Instance, spot_discount: float = DEFAULT_SPOT_DISCOUNT) -> Cost:
    """Expected cost of `count` instances of `inst` for `hours` of billed time."""
    sagemaker = hours * count * inst.sagemaker_usd_per_hour
    ec2 = hours * count * inst.ec2_usd_per_hour
    spot_hours = hours + spot_overhead_hours(hours, count)
    spot = spot_hours * count * inst.sagemaker_usd_per_hour * (1.0 - spot_discount)
    return Cost(sagemaker, ec2, spot, spot_hours)


__all__ = ["Cost", "job_cost", "job_hours", "spot_overhead_hours", "STARTUP_SECONDS", "DEFAULT_SPOT_DISCOUNT"]
