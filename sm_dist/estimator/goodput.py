"""Goodput: the share of a run's billed time that trains, once failures, checkpoints and restarts count.

At the scales the estimator plans for, interruptions decide part of the bill: a job of N GPUs stops
whenever any of its GPUs, hosts or links fails, so its mean time between failures falls as 1/N.
Each interruption costs the work since the last checkpoint and a restart; each checkpoint costs a
stall. The interval that loses least balances the two (Young 1974, Daly 2006):

    interval = sqrt(2 × stall × MTBF)

and with it (first order, as Daly): wall = work × (1 + stall/interval) / (1 − (restart +
(interval + stall)/2) / MTBF), goodput = work / billed time. Kokolis et al. (HPCA 2025) call the
same ratio the Effective Training Time Ratio.

- Failures: unexpected interruptions per GPU-hour from published fleet data (docs/PLATFORM.md §11):
  Hopper GPUs at Llama 3's pre-training rate, A100 and other GPUs at the rate Kokolis et al. project
  for Meta's A100 research clusters; spot adds SageMaker's interruptions per instance-hour (cost.py);
  a run longer than one job (28 days) adds a planned restart per job, which loses no work.
- Checkpoint size per rank: the weights and optimizer state the runtime saves (memory.py's bytes per
  parameter, gradients excluded), split over every rank by a sharded strategy, one full copy from
  rank 0 otherwise (sm_dist.contract.checkpoint's layout).
- Save: staged on the instance's disk, then each rank uploads its files with the runtime's transfer
  settings (sm_dist.contract.transfer), at AWS's per-connection S3 rate, capped by the instance's
  rate from S3 (cost.download_gbps); "local" storage (sagemaker-sync) stalls for the disk write only:
  SageMaker uploads in the background. An async save stalls for the copy to host memory only, and the
  interval is never shorter than the background write.
- Restart: noticing the failure, the billed start-up again, reading the checkpoint back.

Standard library only (core world).
"""

from __future__ import annotations

import math

from sm_dist._records import TYPE_CHECKING, Record
from sm_dist.catalog import Instance
from sm_dist.contract.transfer import MAX_CONCURRENCY
from sm_dist.estimator.cost import SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR, download_gbps
from sm_dist.vocab import Strategy

if TYPE_CHECKING:
    from typing import Any

#: Llama 3's pre-training on 16,384 H100s: 419 unexpected interruptions in a 54-day snapshot, about
#: 78% of them hardware (Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4, Table 5).
HOPPER_INTERRUPTIONS_PER_GPU_HOUR = 419 / (16_384 * 54 * 24)
#: Kokolis et al. 2025 ("Revisiting Reliability in Large-Scale Machine Learning Research Clusters",
#: HPCA, arXiv:2410.21680), 11 months of two A100 clusters: projected mean time to failure 1.8 h for a
#: 16,384-GPU job (0.23 h at 131,072: failures independent per node, MTTF ∝ 1/GPUs).
A100_INTERRUPTIONS_PER_GPU_HOUR = 1 / (1.8 * 16_384)
#: GPU family -> unexpected interruptions per GPU-hour; families without published fleet data get
#: DEFAULT_INTERRUPTIONS_PER_GPU_HOUR.
INTERRUPTIONS_PER_GPU_HOUR = {"H100": HOPPER_INTERRUPTIONS_PER_GPU_HOUR, "H200": HOPPER_INTERRUPTIONS_PER_GPU_HOUR,
                              "A100": A100_INTERRUPTIONS_PER_GPU_HOUR}
#: The higher of the two published rates, for GPU families no fleet study covers.
DEFAULT_INTERRUPTIONS_PER_GPU_HOUR = A100_INTERRUPTIONS_PER_GPU_HOUR
#: SageMaker's StoppingCondition.MaxRuntimeInSeconds is at most 28 days (CreateTrainingJob API
#: reference): a longer run is several jobs, each a planned restart from a checkpoint.
MAX_JOB_HOURS = 28 * 24.0
#: From a failure to the job stopping: a dead rank's collectives time out or sm_dist's hang watch
#: fires (its hang_timeout_s is at least 300 s); an assumption.
DETECT_SECONDS = 300.0
#: What one S3 connection moves: AWS's S3 performance guidelines size "one concurrent request for
#: each 85-90 MB/s of desired network throughput" (docs/PLATFORM.md §11).
S3_BYTES_PER_S_PER_CONNECTION = 85e6
#: Sequential write to the instance's disk before the upload: local NVMe instance storage, or the
#: EBS training volume (gp2/gp3 baseline throughput tops out near 250 MB/s); assumptions.
NVME_BYTES_PER_S = 2e9
EBS_BYTES_PER_S = 250e6
#: An async save copies each rank's state to host memory and returns: device-to-host over PCIe, a
#: third of a Gen4 x16 link's 32 GB/s for pageable memory; an assumption.
DEVICE_TO_HOST_BYTES_PER_S = 10e9
#: Below this, the run cannot get ahead of its failures: the goodput stops at this floor.
GOODPUT_FLOOR = 0.01
#: Checkpoint storage: "s3" (the runtime uploads) or "local" (sagemaker-sync, local mode: the disk).
STORAGES = ("s3", "local")
_SHARDED = (Strategy.ZERO2, Strategy.FSDP, Strategy.HSDP)


# NamedTuple, not a frozen dataclass: immutable all the same, and cheaper to define, which matters
# for `sm-dist estimate-cost` start-up (tests/bench/bench_cli_startup.py).
class Goodput(Record):
    """Failures, checkpoints and restarts of one plan, and what they leave of its billed time."""

    interruptions: float  #: expected unplanned interruptions over the run (hardware, and spot when chosen)
    planned_restarts: int  #: jobs after the first when the run is longer than one job (no work lost)
    mtbf_hours: float  #: mean time between unplanned interruptions for the job's GPUs (and instances on spot)
    checkpoint_bytes: float  #: what the most loaded rank writes per checkpoint
    checkpoint_save_s: float  #: seconds a checkpoint stalls training (sync: write + upload; async: the copy)
    checkpoint_write_s: float  #: seconds until a checkpoint is safe (equal to the stall unless async)
    restore_s: float  #: seconds to read the checkpoint back after a restart
    restart_s: float  #: seconds an interruption costs besides the lost work: detect, start-up, restore
    checkpoint_interval_s: float  #: the Young/Daly interval: sqrt(2 × save × MTBF), at least a step and a write
    goodput: float  #: training seconds ÷ billed seconds (Kokolis et al.'s effective training time ratio)
    seconds: float  #: billed seconds, failures, saves and restarts included (start-up too)

    def interval_steps(self, step_seconds: float) -> int:
        """The interval in whole steps of `step_seconds` (at least 1)."""
        return max(1, round(self.checkpoint_interval_s / step_seconds)) if step_seconds > 0 else 1

    def to_dict(self) -> dict[str, Any]:
        return {"interruptions": round(self.interruptions, 2), "planned_restarts": self.planned_restarts,
                "mtbf_hours": round(self.mtbf_hours, 3), "checkpoint_bytes": int(self.checkpoint_bytes),
                "checkpoint_save_s": round(self.checkpoint_save_s, 2),
                "checkpoint_write_s": round(self.checkpoint_write_s, 2), "restore_s": round(self.restore_s, 2),
                "restart_s": round(self.restart_s, 1), "checkpoint_interval_s": round(self.checkpoint_interval_s, 1),
                "goodput": round(self.goodput, 4)}


def interruptions_per_gpu_hour(gpu_model: str) -> float:
    """Unexpected interruptions per GPU-hour assumed for `gpu_model` (published fleet data)."""
    return INTERRUPTIONS_PER_GPU_HOUR.get(gpu_model, DEFAULT_INTERRUPTIONS_PER_GPU_HOUR)


def mtbf_seconds(inst: Instance, count: int, spot: bool = False) -> float:
    """Mean seconds between unplanned interruptions of `count` × `inst` (spot: with spot's)."""
    per_hour = interruptions_per_gpu_hour(inst.gpu_model) * inst.gpus * count
    if spot:
        per_hour += SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR * count
    return 3600.0 / per_hour


def young_daly_interval(save_s: float, mtbf_s: float) -> float:
    """Young's optimal checkpoint interval, sqrt(2 × save × MTBF) (Daly 2006's first order)."""
    return math.sqrt(2.0 * save_s * mtbf_s)


def s3_bytes_per_s(inst: Instance, writers: int) -> float:
    """What `writers` ranks on one instance move to or from S3 together, bytes/s."""
    connections = writers * MAX_CONCURRENCY * S3_BYTES_PER_S_PER_CONNECTION
    return min(connections, download_gbps(inst) * 1e9 / 8)


def checkpoint_bytes(params: int, bytes_per_param: float, strategy: Strategy, world: int) -> tuple[float, int]:
    """(bytes the most loaded rank writes, ranks per instance that write): sharded strategies split the
    state over every rank; the others write one full copy from rank 0."""
    total = params * bytes_per_param
    if strategy in _SHARDED:
        return total / world, 0  # 0: every rank of the instance
    return total, 1


def disk_bytes_per_s(inst: Instance) -> float:
    """The write rate assumed for the disk a checkpoint is staged on: NVMe where the family has it."""
    return NVME_BYTES_PER_S if inst.local_nvme else EBS_BYTES_PER_S


def estimate_goodput(
    inst: Instance, count: int, strategy: Strategy, *, params: int, bytes_per_param: float, train_s: float,
    step_s: float, startup_s: float, spot: bool = False, async_checkpoint: bool = False, storage: str = "s3",
    interval_s: float | None = None,
) -> Goodput:
    """The failures, checkpoints and restarts of `count` × `inst` training for `train_s` seconds of
    steps (`step_s` each) after `startup_s` of billed start-up, and the goodput they leave, checkpointing
    every `interval_s` (None: the Young/Daly interval)."""
    times = _checkpoint_times(inst, count, strategy, params, bytes_per_param, async_checkpoint, storage)
    return _goodput(times, mtbf_seconds(inst, count, spot), train_s, step_s, startup_s, async_checkpoint, interval_s)


def on_demand_and_spot(
    inst: Instance, count: int, strategy: Strategy, *, params: int, bytes_per_param: float, train_s: float,
    step_s: float, startup_s: float, async_checkpoint: bool = False, storage: str = "s3",
) -> tuple[Goodput, Goodput]:
    """`estimate_goodput` on demand and on spot, the checkpoint's times computed once (a row needs both)."""
    times = _checkpoint_times(inst, count, strategy, params, bytes_per_param, async_checkpoint, storage)
    per_hour = interruptions_per_gpu_hour(inst.gpu_model) * inst.gpus * count  # mtbf_seconds' sums, once for both
    return (_goodput(times, 3600.0 / per_hour, train_s, step_s, startup_s, async_checkpoint, None),
            _goodput(times, 3600.0 / (per_hour + SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR * count), train_s, step_s,
                     startup_s, async_checkpoint, None))


def _checkpoint_times(inst: Instance, count: int, strategy: Strategy, params: int, bytes_per_param: float,
                      async_checkpoint: bool, storage: str) -> tuple[float, float, float, float]:
    """(bytes the most loaded rank writes, stall, write, restore seconds) of one checkpoint."""
    per_rank, writers = checkpoint_bytes(params, bytes_per_param, strategy, inst.gpus * count)
    writers = writers or inst.gpus
    per_instance = per_rank * writers
    rate = s3_bytes_per_s(inst, writers)
    disk_s = per_instance / disk_bytes_per_s(inst)
    write_s = disk_s + (per_instance / rate if storage == "s3" else 0.0)
    stall_s = per_rank / DEVICE_TO_HOST_BYTES_PER_S if async_checkpoint else write_s
    return per_rank, stall_s, write_s, per_instance / rate + disk_s


def _goodput(times: tuple[float, float, float, float], mtbf: float, train_s: float, step_s: float, startup_s: float,
             async_checkpoint: bool, interval_s: float | None) -> Goodput:
    per_rank, stall_s, write_s, restore_s = times
    restart_s = DETECT_SECONDS + startup_s + restore_s
    interval = interval_s or max(young_daly_interval(stall_s, mtbf), step_s, write_s if async_checkpoint else 0.0)
    if train_s < interval:  # a run shorter than the interval saves at its end only
        interval = train_s
    lost_share = (restart_s + (interval + stall_s) / 2) / mtbf
    wall = train_s * (1 + stall_s / interval) / max(1.0 - lost_share, GOODPUT_FLOOR)
    planned = int(wall / 3600.0 // MAX_JOB_HOURS)
    wall += planned * (startup_s + restore_s)
    seconds = wall + startup_s
    return Goodput(wall / mtbf, planned, mtbf / 3600.0, per_rank, stall_s, write_s, restore_s, restart_s, interval,
                   max(train_s / seconds, GOODPUT_FLOOR) if seconds > 0 else 1.0, seconds)


__all__ = ["A100_INTERRUPTIONS_PER_GPU_HOUR", "DEFAULT_INTERRUPTIONS_PER_GPU_HOUR", "DETECT_SECONDS", "GOODPUT_FLOOR",
           "HOPPER_INTERRUPTIONS_PER_GPU_HOUR", "INTERRUPTIONS_PER_GPU_HOUR", "MAX_JOB_HOURS", "STORAGES", "Goodput",
           "checkpoint_bytes", "disk_bytes_per_s", "estimate_goodput", "interruptions_per_gpu_hour", "mtbf_seconds", "on_demand_and_spot", "s3_bytes_per_s",
           "young_daly_interval"]
