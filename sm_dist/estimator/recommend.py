"""Pick one plan from the grid and say why in one sentence; when none fits, the smallest change that would.

Rules: drop what cannot run or does not fit. Without limits: the cheapest. With `max_hours`: the
cheapest that finishes in time. With `budget`: the fastest that stays within the budget (both:
the fastest within both). Ties go to the faster, then the cheaper plan. Without `max_hours`,
plans that finish within one SageMaker job (MAX_JOB_HOURS) are preferred; when none does, the
cheapest longer plan is named and the reason says it needs chained, resumed jobs.

When no plan fits in GPU memory anywhere, `smallest_change` computes what would make one fit, with the
same memory model and setting search as the estimate itself: more instances of a type that was asked
for (doubling, up to MAX_INSTANCE_COUNT), an instance type with more GPU memory at the largest count
asked for, and a shorter sequence (halving, down to MIN_SEQ_LEN) on the largest configuration asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sm_dist._records import TYPE_CHECKING, Record
from sm_dist.catalog import Instance, list_instances
from sm_dist.estimator.goodput import MAX_JOB_HOURS
from sm_dist.estimator.grid import Row, Workload, evaluate_search, tried_on, variants
from sm_dist.estimator.timing import volume_psi
from sm_dist.vocab import Strategy

if TYPE_CHECKING:
    from typing import Any

LABELS = {
    Strategy.DP: "DP", Strategy.DDP: "DDP", Strategy.ZERO1: "ZeRO-1", Strategy.ZERO2: "ZeRO-2",
    Strategy.FSDP: "FSDP", Strategy.HSDP: "HSDP",
}
_GB = 1e9


# NamedTuple, not a frozen dataclass: immutable all the same, and ~7x cheaper to define,
# which matters for `sm-dist estimate-cost` start-up (tests/bench/bench_cli_startup.py).
class Recommendation(Record):
    """The chosen row and the one-sentence reason."""

    row: Row
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.row.to_dict(), "reason": self.reason}


def row_cost(row: Row, spot: bool) -> float:
    """Dollars of a row (spot or on-demand); infinite for a row without a price."""
    if row.cost is None:
        return float("inf")
    return row.cost.spot if spot else row.cost.sagemaker


def row_hours(row: Row, spot: bool) -> float:
    """Wall-clock hours of a row (spot includes interruptions); infinite without a run time."""
    if row.cost is None or row.hours is None:
        return float("inf")
    return row.cost.spot_hours if spot else row.hours


def recommend(
    rows: list[Row] | tuple[Row, ...], *, spot: bool = False, max_hours: float | None = None, budget: float | None = None,
    annotate: Callable[[Row], Row] | None = None, priced: bool = True,
) -> Recommendation | None:
    """The plan to use, or None when nothing fits within the limits. `annotate`: applied to the
    chosen row before its reason is written (the estimate adds the searched setting's note). `priced=False`:
    the rows' hours and dollars stand for no real run (a plan without tokens=), so the reason names none."""
    candidates = [r for r in rows if r.runnable and r.fits]
    if max_hours is not None:
        candidates = [r for r in candidates if row_hours(r, spot) <= max_hours]
    if budget is not None:
        candidates = [r for r in candidates if row_cost(r, spot) <= budget]
    if not candidates:
        return None
    one_job = [r for r in candidates if row_hours(r, spot) <= MAX_JOB_HOURS]
    candidates = one_job or candidates
    if budget is not None:
        best = min(candidates, key=lambda r: (row_hours(r, spot), row_cost(r, spot)))
    else:
        best = min(candidates, key=lambda r: (round(row_cost(r, spot), 2), row_hours(r, spot)))
    if annotate is not None:
        best = annotate(best)
    return Recommendation(best, _reason(best, rows, spot=spot, max_hours=max_hours, budget=budget, priced=priced))


def _sibling(rows: list[Row] | tuple[Row, ...], row: Row, strategy: Strategy) -> Row | None:
    for other in rows:
        if (other.instance_type, other.instance_count, other.strategy) == (row.instance_type, row.instance_count, strategy):
            return other
    return None


def _reason(row: Row, rows: list[Row] | tuple[Row, ...], *, spot: bool, max_hours: float | None, budget: float | None,
            priced: bool = True) -> str:
    label = LABELS[row.strategy]
    goal = "fastest" if budget is not None or not priced else "cheapest"  # unpriced: ties at $0, then by hours
    limits = []
    if max_hours is not None:
        limits.append(f"finishes within {max_hours:g} h")
    if budget is not None:
        limits.append(f"stays within ${budget:,.0f}")
    within = f" and {' and '.join(limits)}" if limits else ""
    money = "spot " if spot else ""
    head = f"{label} on {row.instance_count}× {row.instance_type} is the {goal} plan that fits{within}"
    parts = [head + (f" (${row_cost(row, spot):,.0f} {money}for {row_hours(row, spot):,.1f} h)" if priced
                     else " (per step: without tokens= no run is priced)")]
    if priced and row_hours(row, spot) > MAX_JOB_HOURS:
        parts.append(f"no plan finishes within SageMaker's {MAX_JOB_HOURS / 24:.0f}-day job limit, so this one runs "
                     "as chained jobs resuming from checkpoints (add instance counts to go faster)")
    elif priced and max_hours is None and any(r.runnable and r.fits and row_hours(r, spot) > MAX_JOB_HOURS for r in rows):
        parts.append(f"plans longer than one SageMaker job ({MAX_JOB_HOURS / 24:.0f} days) were passed over")
    if row.note:  # the searched setting: which memory term ruled out the first one
        parts.append(row.note)
    ddp = _sibling(rows, row, Strategy.DDP)
    if row.strategy is not Strategy.DDP and ddp and ddp.runnable and not ddp.fits and ddp.memory and row.memory:
        parts.append(f"DDP needs {ddp.memory.total / _GB:.0f} GB/GPU > {ddp.usable_bytes / _GB:.0f} GB usable; "
                     f"{label} fits at {row.memory.total / _GB:.0f} GB")
    volume = volume_psi(row.strategy, row.precision)
    if row.strategy is Strategy.FSDP:
        lighter = [s for s in (Strategy.DDP, Strategy.ZERO1, Strategy.ZERO2) if (x := _sibling(rows, row, s)) and x.fits]
        if not lighter:
            parts.append("FSDP moves 3Ψ per step, but no strategy that moves less fits here")
    elif row.strategy is Strategy.HSDP and row.instance_count > 1:
        parts.append("its all-gathers stay inside the instance; only gradient shards cross the network")
    elif row.strategy is not Strategy.DP and volume < 3:
        parts.append(f"it moves {volume:g}Ψ per step vs FSDP's 3Ψ")
    return "; ".join(parts) + "."


#: The largest instance count suggested (a bigger job is a capacity conversation with AWS).
MAX_INSTANCE_COUNT = 1024
MIN_SEQ_LEN = 256


def _fits(inst: Instance, count: int, work: Workload, strategies: Iterable[Strategy],
          settings: tuple[tuple[str, int], ...]) -> Row | None:
    """The first row that fits on `count` × `inst` (any strategy, any searched setting), or None."""
    for strategy in strategies:
        row = evaluate_search(inst, count, strategy, 0.4, 0.6, tried_on(variants(work, settings), inst.gpus * count))
        if row.runnable and row.fits:
            return row
    return None


def _label(row: Row) -> str:
    assert row.memory is not None
    return (f"{row.strategy.value} with {row.checkpointing} recompute fits at {row.memory.total / 1e9:.0f} GB/GPU")


def smallest_change(work: Workload, settings: tuple[tuple[str, int], ...], instances: list[Instance],
                    counts: list[int], strategies: list[Strategy]) -> str:
    """One sentence: the changes that would make a plan fit, or that none of them does."""
    cuda = [i for i in instances if i.is_cuda]
    if not cuda:
        return "no instance type asked for runs the sm_dist runtime (CUDA)"
    strats = [s for s in strategies if s is not Strategy.DP] or strategies
    top = max(counts)
    options = []
    for inst in cuda:
        count = top
        while count < MAX_INSTANCE_COUNT:
            count = min(count * 2, MAX_INSTANCE_COUNT)
            row = _fits(inst, count, work, strats, settings)
            if row is not None:
                options.append(f"{count}× {inst.name} ({_label(row)})")
                break
    asked = {i.name for i in cuda}
    bigger = sorted((i for i in list_instances(cuda[0].region) if i.is_cuda and i.name not in asked
                     and i.gpu_memory_bytes > max(a.gpu_memory_bytes for a in cuda)),
                    key=lambda i: (i.gpu_memory_bytes, -i.gpus), reverse=True)
    for inst in bigger:
        row = _fits(inst, top, work, strats, settings)
        if row is not None:
            options.append(f"{top}× {inst.name}, {inst.gpu_memory_bytes / 1e9:.0f} GB per GPU ({_label(row)})")
            break
    best = max(cuda, key=lambda i: i.gpu_memory_bytes * i.gpus)
    seq = work.seq_len
    while seq // 2 >= MIN_SEQ_LEN:
        seq //= 2
        row = _fits(best, top, work._replace(seq_len=seq), strats, settings)
        if row is not None:
            options.append(f"seq_len {seq} on {top}× {best.name} ({_label(row)})")
            break
    if not options:
        return (f"no plan fits in GPU memory, and none would with up to {MAX_INSTANCE_COUNT} instances, a GPU with "
                f"more memory or a sequence down to {MIN_SEQ_LEN}")
    return "no plan fits in GPU memory; the smallest changes that would fit: " + "; or ".join(options)


__all__ = ["Recommendation", "recommend", "LABELS", "MAX_INSTANCE_COUNT", "MAX_JOB_HOURS", "row_cost", "row_hours",
           "smallest_change"]
