"""One row of the estimate: a strategy on `count` instances of one type, fully evaluated.

A row is runnable or not (with the reason, and no numbers), fits or not (memory against GPU
capacity minus a safety margin; the reason says by how much), and — only when it fits — carries
step time, hours and dollars: a plan that does not fit has no run time to price.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from sm_dist._records import TYPE_CHECKING, Record
from sm_dist.catalog import Instance
from sm_dist.estimator.activations import block_from, loss_backward_bytes, peak_bytes
from sm_dist.estimator.cost import Cost, DataLoad, job_cost, startup_seconds
from sm_dist.estimator.goodput import Goodput, on_demand_and_spot
from sm_dist.estimator.memory import (
    MemoryBreakdown,
    breakdown,
    refusal,
    saved_bytes_per_param,
)
from sm_dist.estimator.models import ModelShape
from sm_dist.estimator.timing import OP_RECOMPUTE_FORWARD_SHARE, StepTime, step_time
from sm_dist.vocab import Precision, Strategy

if TYPE_CHECKING:
    from typing import Any

#: Share of GPU memory kept free: allocator fragmentation and caching (the PyTorch caching
#: allocator commonly reserves 5-15% above what tensors use); an assumption.
SAFETY_MARGIN = 0.10

_GB = 1e9

#: What an estimate searches when activation_checkpointing / micro_batch are not given, in order of
#: preference: least recompute first (per-operator costs +12% compute, full +33%), then the largest
#: micro-batch (fewer, larger collectives per step). "none" is left out: with flash/SDPA attention it
#: keeps what "selective" keeps (activations.py).
SEARCHED_CHECKPOINTING = ("selective", "selective-op", "full")
SEARCHED_MICRO_BATCHES = (8, 4, 2, 1)


# NamedTuple, not a frozen dataclass: immutable all the same, and ~7x cheaper to define,
# which matters for `sm-dist estimate-cost` start-up (tests/bench/bench_cli_startup.py).
class Workload(Record):
    """What is trained, independent of where: shape, data, batch and numerics."""

    shape: ModelShape
    tokens: int
    seq_len: int
    global_batch: int  #: sequences per optimizer step, as asked
    micro_batch: int  #: sequences per GPU per forward/backward
    precision: Precision
    optimizer: str
    checkpointing: str
    buffers_bytes: int = 0
    data: DataLoad | None = None  #: the data channels' bytes (None: not known, start-up is the assumption alone)
    infra_check: bool | None = False  #: SageMaker's infra check: on, off, or None (cost.infra_check_on decides per row)
    spot: bool = False  #: the rows' goodput is spot's (its interruptions too), else on demand's
    async_checkpoint: bool = False  #: checkpoints stall for the copy to host memory only (goodput.py)
    checkpoint_storage: str = "s3"  #: "s3" (the runtime uploads) or "local" (sagemaker-sync: the disk)


class Row(Record):
    """One combination of instance type × count × strategy (see the --json schema)."""

    instance_type: str
    instance_count: int
    gpus: int
    strategy: Strategy
    precision: Precision
    runnable: bool
    fits: bool
    reason: str  #: why it cannot run or does not fit ("" when it fits)
    memory: MemoryBreakdown | None
    capacity_bytes: int
    mfu: float
    step: StepTime | None = None
    steps: int = 0
    hours: float | None = None
    cost: Cost | None = None
    global_batch: int = 0  #: effective global batch in sequences
    checkpointing: str = ""  #: the activation checkpointing this row was evaluated with
    micro_batch: int = 0  #: the micro-batch this row was evaluated with
    note: str = ""  #: why a searched setting was chosen over the first one tried (the binding memory term)
    goodput: Goodput | None = None  #: failures, checkpoints and restarts (spot's when the estimate is for spot)

    @property
    def gpu_hours(self) -> float | None:
        return None if self.hours is None else self.hours * self.gpus

    @property
    def usable_bytes(self) -> int:
        return int(self.capacity_bytes * (1 - SAFETY_MARGIN))

    def to_dict(self) -> dict[str, Any]:
        """The row in the --json schema."""
        memory = None
        if self.memory is not None:
            memory = {**self.memory.to_dict(), "capacity": self.capacity_bytes, "usable": self.usable_bytes}
        return {
            "instance_type": self.instance_type,
            "instance_count": self.instance_count,
            "gpus": self.gpus,
            "strategy": self.strategy.value,
            "precision": self.precision.value,
            "runnable": self.runnable,
            "fits": self.fits,
            "reason": self.reason,
            "memory_bytes": memory,
            "mfu": self.mfu,
            "global_batch": self.global_batch or None,
            "activation_checkpointing": self.checkpointing or None,
            "micro_batch": self.micro_batch or None,
            "setting_note": self.note or None,
            "steps": self.steps or None,
            "step_seconds": None if self.step is None else round(self.step.total, 4),
            "exposed_comm_seconds": None if self.step is None else round(self.step.exposed, 4),
            "hours": None if self.hours is None else round(self.hours, 3),
            "gpu_hours": None if self.gpu_hours is None else round(self.gpu_hours, 2),
            "cost_usd": None if self.cost is None else self.cost.to_dict(),
            **_goodput_fields(self.goodput, self.step),
        }


def _goodput_fields(goodput: Goodput | None, step: StepTime | None) -> dict[str, Any]:
    """The row's failures and checkpoints in the --json schema (None when it has no run time)."""
    if goodput is None or step is None:
        return dict.fromkeys(("interruptions", "mtbf_hours", "checkpoint_save_s", "checkpoint_interval_s",
                              "checkpoint_interval_steps", "goodput", "failures"))
    detail = goodput.to_dict()
    return {"interruptions": detail["interruptions"], "mtbf_hours": detail["mtbf_hours"],
            "checkpoint_save_s": detail["checkpoint_save_s"], "checkpoint_interval_s": detail["checkpoint_interval_s"],
            "checkpoint_interval_steps": goodput.interval_steps(step.total), "goodput": detail["goodput"],
            "failures": detail}


def _not_runnable(inst: Instance, count: int, strategy: Strategy, work: Workload, reason: str, mfu: float) -> Row:
    return Row(inst.name, count, inst.gpus * count, strategy, work.precision, False, False, reason, None,
               inst.gpu_memory_bytes, mfu, None, 0, None, None, 0, work.checkpointing, work.micro_batch)


@functools.lru_cache(maxsize=64)
def _activations(work: Workload) -> int:
    """Activation bytes per GPU at their peak, the start of backward: what autograd saves, and the loss's
    backward beside it. The same for every row of one estimate, so computed once."""
    shape = work.shape
    return peak_bytes(
        shape.layers, shape.vocab, work.seq_len, work.micro_batch, work.checkpointing, work.precision,
        block_from(shape, hidden=shape.hidden, heads=shape.heads),  # kv heads, MLP width (MoE: active experts), gating, norm, head_dim
    ) + loss_backward_bytes(shape.vocab, work.seq_len * work.micro_batch)


@functools.lru_cache(maxsize=8192)
def _memory(work: Workload, strategy: Strategy, world: int, gpus_per_instance: int) -> MemoryBreakdown:
    """Memory per GPU depends on the shard group, not the instance type: shared between rows."""
    return breakdown(
        work.shape.params, strategy, work.precision, world, gpus_per_instance, optimizer=work.optimizer,
        activations_bytes=_activations(work), unit_params=work.shape.largest_unit_params,
        buffers_bytes=work.buffers_bytes,
        # ZeroRedundancyOptimizer partitions whole tensors: the embedding sets zero1's floor
        largest_tensor_params=work.shape.vocab * work.shape.hidden,
    )


def evaluate(inst: Instance, count: int, strategy: Strategy, work: Workload, mfu: float, spot_discount: float) -> Row:
    """Memory, time and cost of `strategy` on `count` × `inst` for `work`."""
    world = inst.gpus * count
    if not inst.is_cuda:
        reason = f"{inst.gpu_model} needs the Neuron SDK (torch-neuronx); the sm_dist runtime runs CUDA PyTorch"
        return _not_runnable(inst, count, strategy, work, reason, mfu)
    refused = refusal(strategy, world, inst.gpus)
    if refused:
        return _not_runnable(inst, count, strategy, work, refused, mfu)
    return _fit_and_time(inst, count, strategy, work, mfu, spot_discount, _memory(work, strategy, world, inst.gpus))


def _fit_and_time(inst: Instance, count: int, strategy: Strategy, work: Workload, mfu: float, spot_discount: float,
                  memory: MemoryBreakdown, usable: int | None = None, startup: float | None = None) -> Row:
    """The row of a runnable combination whose memory is known: does it fit; if so, its time and cost.
    `usable` (GPU bytes) and `startup` (seconds) are the same for every row of one instance type and count:
    `evaluate_pair` passes them in (None: computed here)."""
    gpus = inst.gpus
    world = gpus * count
    capacity = inst.gpu_memory_bytes
    if usable is None:
        usable = int(capacity * (1 - SAFETY_MARGIN))
    precision, checkpointing, micro = work.precision, work.checkpointing, work.micro_batch
    total = memory.total
    if total > usable:
        reason = f"needs {total / _GB:.1f} GB/GPU > {usable / _GB:.1f} GB usable of {capacity / _GB:.1f} GB"
        # positional: a namedtuple's keywords cost twice its positions, on ~540 rows of the full grid (start-up)
        return Row(inst.name, count, world, strategy, precision, True, False, reason, memory,
                   capacity, mfu, None, 0, None, None, 0, checkpointing, micro)
    shape = work.shape
    seq_len = work.seq_len
    # dp is one process: its micro-batch is split over the instance's GPUs like DDP's would be
    accumulation = max(1, math.ceil(work.global_batch / (micro * world)))
    global_batch = accumulation * micro * world
    steps = max(1, math.ceil(work.tokens / (global_batch * seq_len)))
    step = step_time(
        params=shape.flops_params, tokens_per_micro_batch=micro * seq_len, accumulation=accumulation,
        strategy=strategy, precision=precision, inst=inst, count=count, mfu=mfu, checkpointing=checkpointing,
    )
    if startup is None:
        startup = startup_seconds(inst, count, work.data, work.infra_check)
    saved = saved_bytes_per_param(strategy, precision, work.optimizer)
    step_s = step.total
    on_demand, on_spot = on_demand_and_spot(
        inst, count, strategy, params=shape.params, bytes_per_param=saved, train_s=steps * step_s,
        step_s=step_s, startup_s=startup, async_checkpoint=work.async_checkpoint, storage=work.checkpoint_storage)
    hours = on_demand.seconds / 3600.0
    cost = job_cost(hours, count, inst, spot_discount, on_spot.seconds / 3600.0)
    return Row(inst.name, count, world, strategy, precision, True, True, "", memory, capacity,
               mfu, step, steps, hours, cost, global_batch, checkpointing, micro, "",
               on_spot if work.spot else on_demand)


#: +33% compute: full recompute runs the forward twice (8·P FLOPs per token instead of 6·P).
FULL_RECOMPUTE_EXTRA = 8 / 6 - 1
#: +12% compute: per-operator recompute re-runs every second matmul (timing.OP_RECOMPUTE_FORWARD_SHARE).
OP_RECOMPUTE_EXTRA = 2 * OP_RECOMPUTE_FORWARD_SHARE / 6


#: `work` under one searched (checkpointing, micro_batch), with its activation bytes per GPU. A
#: plain tuple, unpacked in the loops: attribute access per variant and row was a visible share of
#: `estimate-cost` start-up.
Variant = tuple[Workload, int]


def variants(work: Workload, settings: tuple[tuple[str, int], ...]) -> tuple[Variant, ...]:
    """`work` under each (checkpointing, micro_batch) of `settings`, built once per estimate."""
    out = []
    for checkpointing, micro in settings:
        varied = work._replace(checkpointing=checkpointing, micro_batch=micro)
        out.append((varied, _activations(varied)))
    return tuple(out)


def tried_on(variants_all: tuple[Variant, ...], world: int) -> tuple[Variant, ...]:
    """The variants worth trying on `world` GPUs, best first: a micro-batch above 1 must not push
    the global batch past the one asked for. (Once per instance type and count, not per row.)"""
    kept = tuple(v for v in variants_all if v[0].micro_batch == 1 or v[0].micro_batch * world <= v[0].global_batch)
    return kept or variants_all[-1:]


def evaluate_search(inst: Instance, count: int, strategy: Strategy, mfu: float, spot_discount: float,
                    tried: tuple[Variant, ...], memo: dict[tuple[Strategy, int, int], MemoryBreakdown] | None = None
                    ) -> Row:
    """The first variant of `tried` (see `tried_on`; best first: least recompute, then the
    largest micro-batch) under which `strategy` fits, evaluated; when none fits, the last one
    (the least memory). `memo`: one dict per estimate, for memory by (strategy, world, GPUs per
    instance) — the first variant is the same for the same world, and hashing a Workload per row
    for the lru cache was a visible share of start-up.

    Only activations change with the setting (they add linearly to the rest), so the fit of each
    setting is one precomputed activation figure against the same remainder: the search costs one
    full evaluation per row, not one per setting (`estimate-cost` start-up, tests/bench/bench_cli_startup.py).
    """
    return evaluate_pair(inst, count, (strategy,), mfu, spot_discount, tried, memo)[0]


def evaluate_pair(inst: Instance, count: int, strategies: Sequence[Strategy], mfu: float, spot_discount: float,
                  tried: tuple[Variant, ...], memo: dict[tuple[Strategy, int, int], MemoryBreakdown] | None = None
                  ) -> list[Row]:
    """`evaluate_search` of each of `strategies` on `count` × `inst`, in order: what the rows of one instance
    type and count share (usable memory, start-up, the first variant) is computed once (start-up)."""
    first = tried[0][0]
    if len(tried) == 1 or not inst.is_cuda:
        return [evaluate(inst, count, strategy, first, mfu, spot_discount) for strategy in strategies]
    gpus = inst.gpus
    world = gpus * count
    usable = int(inst.gpu_memory_bytes * (1 - SAFETY_MARGIN))
    startup = startup_seconds(inst, count, first.data, first.infra_check)  # the same for every variant
    least = min(act for _, act in tried)  # more than the room: no variant fits, the last one is the row's
    rows = []
    for strategy in strategies:
        refused = refusal(strategy, world, gpus)
        if refused:
            rows.append(_not_runnable(inst, count, strategy, first, refused, mfu))
            continue
        key = (strategy, world, gpus)
        mem = memo.get(key) if memo is not None else None
        if mem is None:
            mem = _memory(first, strategy, world, gpus)
            if memo is not None:
                memo[key] = mem
        rest = mem.total - mem.activations
        room = usable - rest
        chosen, activations = tried[-1]
        if least <= room:
            for work, act in tried:
                if act <= room:
                    chosen, activations = work, act
                    break
        if chosen is not first:  # the rest of the memory does not depend on the setting
            mem = MemoryBreakdown(mem.params, mem.grads, mem.optimizer, activations, mem.other, rest + activations,
                                  mem.other_parts)  # (_replace is 5x slower: start-up)
        rows.append(_fit_and_time(inst, count, strategy, chosen, mfu, spot_discount, mem, usable, startup))
    return rows


def with_note(row: Row, inst: Instance, tried_all: tuple[Variant, ...]) -> Row:
    """`row` with its `note` (why its setting and not the first one tried), for the rows a user
    reads (the recommendation): computed on demand, not for all rows (start-up)."""
    first = tried_on(tried_all, row.gpus)[0][0]
    if not row.fits or (row.checkpointing, row.micro_batch) == (first.checkpointing, first.micro_batch):
        return row
    return row._replace(note=_binding(evaluate(inst, row.instance_count, row.strategy, first, row.mfu, 0.0), row))


def _binding(first: Row, chosen: Row) -> str:
    """Why `chosen`'s setting and not the first one tried: the memory term that did not fit."""
    assert first.memory is not None and chosen.memory is not None
    mem = first.memory
    what = (f"with {first.checkpointing} recompute and micro-batch {first.micro_batch} it needs {mem.total / _GB:.0f} "
            f"GB/GPU > {first.usable_bytes / _GB:.0f} GB usable, activations {mem.activations / _GB:.0f} GB of it")
    how = []
    if chosen.checkpointing != first.checkpointing:
        how.append(f"{chosen.checkpointing} recompute")
    if chosen.micro_batch != first.micro_batch:
        how.append(f"micro-batch {chosen.micro_batch}")
    extra = {"full": f" for +{FULL_RECOMPUTE_EXTRA:.0%} compute",
             "selective-op": f" for +{OP_RECOMPUTE_EXTRA:.0%} compute"}.get(chosen.checkpointing, "")
    extra = extra if chosen.checkpointing != first.checkpointing else ""
    return f"{what}; {' and '.join(how)} fits at {chosen.memory.total / _GB:.0f} GB{extra}"


__all__ = ["FULL_RECOMPUTE_EXTRA", "OP_RECOMPUTE_EXTRA", "Row", "Workload", "evaluate", "evaluate_pair", "evaluate_search", "tried_on", "variants", "with_note", "SAFETY_MARGIN"]
