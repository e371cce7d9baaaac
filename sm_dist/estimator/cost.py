"""Dollars: billed hours × instances × price, on SageMaker, on EC2, and on SageMaker spot.

SageMaker bills every instance from the start of the Downloading status to the end of
Uploading (`BillableTimeInSeconds` × instance count), so the start-up below is billed too.
"""

from __future__ import annotations

from sm_dist._records import Record
from sm_dist.catalog import Instance

#: Billed start-up per job start: the instances and pulling the PyTorch training image (~10-20 GB)
#: and the code. SecondaryStatusTransitions of GPU jobs typically show 3-6 minutes of Downloading;
#: an assumption. Data channels come on top when their size is known (`DataLoad`).
STARTUP_SECONDS = 300.0
#: Which rates price a run on a Slurm cluster, HyperPod's or another (a --slurm plan, `estimate-cost --slurm`):
#: HyperPod's per-instance rates were not found in any source (docs/PLATFORM.md §12).
SLURM_PRICE_BASIS = ("SageMaker training's on-demand rates for the instance type, a stand-in: HyperPod's per-instance "
                     "rates are not in sm_dist's price table (no published source found, docs/PLATFORM.md §12), and "
                     "a Slurm cluster's price is its owner's")
#: What one instance gets from S3 at most: "up to 100 Gb/s" per EC2 instance with parallel
#: connections (AWS S3 performance guidelines), never more than its own network.
S3_MAX_GBPS = 100.0
#: The share of that a File-mode download reaches (many objects, one instance): an assumption.
DOWNLOAD_EFFICIENCY = 0.5
#: Default spot discount off the SageMaker on-demand price. AWS says managed spot saves "up to
#: 90%"; savings reported for GPU training instances are mostly 50-70%: a middle value.
DEFAULT_SPOT_DISCOUNT = 0.60
#: Expected spot interruptions per instance-hour. The EC2 Spot Instance Advisor puts large GPU
#: types in its ">20% per month" bucket; one instance lost stops the whole multi-instance job.
#: 0.01/h (one per ~100 instance-hours) is a deliberately pessimistic assumption.
SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR = 0.01
#: SageMaker's infra check (InfraCheckConfig: the instances' hardware and the cluster network, before the
#: script). AWS publishes no figure for its time: 10 minutes is an assumption, billed as start-up
#: (docs/PLATFORM.md §1.16).
INFRA_CHECK_SECONDS = 600.0
#: infra_check=None turns it on from this many instances (a cluster network to check, and more to lose).
INFRA_CHECK_MIN_INSTANCES = 4
#: The families the check is assumed offered on: AWS documents it for accelerated training instances
#: without a list (docs/PLATFORM.md §1.16); GPU (p, g) and Trainium (trn) families.
INFRA_CHECK_FAMILIES = ("p", "g", "trn")


# NamedTuple, not a frozen dataclass: immutable all the same, and ~7x cheaper to define,
# which matters for `sm-dist estimate-cost` start-up (tests/bench/bench_cli_startup.py).
class Cost(Record):
    """Expected dollars for the whole job."""

    sagemaker: float  #: on-demand SageMaker
    ec2: float  #: the same instance-hours on EC2 on-demand (the SageMaker premium is the gap)
    spot: float  #: SageMaker managed spot, with its interruptions (goodput.py)
    spot_hours: float  #: billed hours on spot, interruptions included

    def to_dict(self) -> dict[str, float]:
        return {"sagemaker": round(self.sagemaker, 2), "ec2": round(self.ec2, 2), "spot": round(self.spot, 2)}


class DataLoad(Record):
    """The data channels' bytes by how they reach the instances before step 0 (docs/PLATFORM.md §1.9)."""

    replicated_bytes: float = 0.0  #: File mode, FullyReplicated: every instance downloads all of it
    sharded_bytes: float = 0.0  #: File mode, ShardedByS3Key: each instance downloads its share (1/N)
    streamed_bytes: float = 0.0  #: FastFile: streamed while training, nothing up front
    unknown: tuple[str, ...] = ()  #: channels whose size is not known (not counted)

    def per_instance(self, count: int) -> float:
        """Bytes one of `count` instances downloads before the script starts."""
        return self.replicated_bytes + self.sharded_bytes / max(1, count)


def download_gbps(inst: Instance) -> float:
    """The File-mode download rate assumed for one instance of `inst`, Gb/s."""
    return min(inst.network_gbps, S3_MAX_GBPS) * DOWNLOAD_EFFICIENCY


def startup_seconds(inst: Instance, count: int, data: DataLoad | None = None, infra_check: bool | None = False) -> float:
    """Billed start-up: the image (STARTUP_SECONDS), the infra check when it runs (`infra_check_on`) and,
    when known, the data each instance downloads."""
    base = STARTUP_SECONDS + (INFRA_CHECK_SECONDS if infra_check_on(infra_check, inst.name, count) else 0.0)
    if data is None:
        return base
    return base + data.per_instance(count) * 8 / (download_gbps(inst) * 1e9)


def infra_check_offered(instance_type: str) -> bool:
    """Whether SageMaker's infra check is assumed offered on `instance_type` (an accelerated family)."""
    family = instance_type.removeprefix("ml.").split(".")[0]
    return any(family.startswith(f) and family[len(f):][:1].isdigit() for f in INFRA_CHECK_FAMILIES)


def infra_check_on(setting: bool | None, instance_type: str, count: int) -> bool:
    """Whether a job runs the infra check: as set, or (None) from INFRA_CHECK_MIN_INSTANCES instances where offered."""
    if setting is not None:
        return setting
    return count >= INFRA_CHECK_MIN_INSTANCES and infra_check_offered(instance_type)


def job_hours(steps: int, step_seconds: float, startup_seconds: float = STARTUP_SECONDS) -> float:
    """Billed wall-clock hours: every step plus the start-up."""
    return (steps * step_seconds + startup_seconds) / 3600.0


def job_cost(hours: float, count: int, inst: Instance, spot_discount: float = DEFAULT_SPOT_DISCOUNT,
             spot_hours: float | None = None) -> Cost:
    """Expected cost of `count` instances of `inst` for `hours` of billed time on demand and
    `spot_hours` on spot (its interruptions included: goodput.py; None: as on demand)."""
    sagemaker = hours * count * inst.sagemaker_usd_per_hour
    ec2 = hours * count * inst.ec2_usd_per_hour
    spot_hours = hours if spot_hours is None else spot_hours
    spot = spot_hours * count * inst.sagemaker_usd_per_hour * (1.0 - spot_discount)
    return Cost(sagemaker, ec2, spot, spot_hours)


__all__ = ["INFRA_CHECK_SECONDS", "INFRA_CHECK_MIN_INSTANCES", "infra_check_offered", "infra_check_on", "Cost", "DataLoad", "job_cost", "job_hours", "startup_seconds", "STARTUP_SECONDS",
           "SLURM_PRICE_BASIS", "DEFAULT_SPOT_DISCOUNT", "SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR"]
