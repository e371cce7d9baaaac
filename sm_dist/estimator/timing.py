"""Step time: compute at an assumed MFU plus the communication that backward cannot hide.

Compute: 6·Ψ FLOPs per token (forward 2Ψ + backward 4Ψ; Kaplan et al. 2020), 8·Ψ with full
recompute (one more forward), at peak × MFU per GPU.

Communication uses ring collectives: all-reduce moves 2(n−1)/n·B per GPU, reduce-scatter and
all-gather (n−1)/n·B each. Per step: DDP all-reduces gradients (2Ψ); ZeRO-1 (torch's
ZeroRedundancyOptimizer on top of DDP) all-reduces (2Ψ) and then broadcasts each rank's updated
partition (Ψ) = 3Ψ; zero2 all-gathers params once per micro-batch and reduce-scatters
gradients (2Ψ); fsdp all-gathers twice (forward and backward) and reduce-scatters (3Ψ).
Hierarchical: the intra-node part runs on NVLink/PCIe, the inter-node part on the network,
where each instance's NIC carries the inter-node share of all its GPUs.

A parameter server would move 2·K·(N−1) bytes through one server link for N workers and K bytes
of gradients (every worker sends K and receives K): time grows with N. A ring moves about 2K
per GPU whatever N is, over every link at once, so it wins beyond two workers. nn.DataParallel
(dp) is exactly that pattern through GPU 0, so dp is modelled with it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from sm_dist._records import Record
from sm_dist.catalog import Instance
from sm_dist.vocab import Precision, Strategy, parse_enum

#: Model FLOPs utilisation priors per GPU family (fraction of dense peak). Published runs:
#: A100 0.35-0.48 (Megatron-LM, Narayanan et al. 2021; MosaicML LLM Foundry benchmarks; LLaMA
#: paper ~0.40), H100 0.30-0.40 (MosaicML/Databricks H100 benchmarks, torchtitan reports),
#: V100 ~0.25-0.30 (Megatron-LM 2019: 30% of peak on 512 V100s), others assumed.
MFU_PRIORS = {
    "V100": 0.28,
    "A100": 0.40,
    "H100": 0.35,
    "H200": 0.35,
    "B200": 0.30,  # new part, kernels less mature: an assumption
    "A10G": 0.30,  # PCIe parts: an assumption, no public large-scale runs
    "L4": 0.30,
    "L40S": 0.30,
    "Trainium1": 0.30,
}
#: Fraction of link peak bandwidth that NCCL achieves (nccl-tests bus bandwidth: ~80% of NVLink,
#: ~70% of EFA/TCP line rate); assumptions.
NVLINK_EFFICIENCY = 0.8
NETWORK_EFFICIENCY = 0.7
#: Fraction of the compute window in which communication can overlap (DDP buckets / FSDP
#: prefetch start as soon as possible, but the first and last buckets do not overlap).
OVERLAP_EFFICIENCY = 0.8
#: Forward share of a training step's FLOPs (2Ψ of 6Ψ per token).
FORWARD_SHARE = 1 / 3


# NamedTuple, not a frozen dataclass: immutable all the same, and ~7x cheaper to define,
# which matters for `sm-dist estimate-cost` start-up (tests/bench/bench_cli_startup.py).
class StepTime(Record):
    """Seconds per optimizer step on every GPU."""

    compute: float
    communication: float  #: total collective time, overlapped or not
    exposed: float  #: communication not hidden behind compute
    total: float
    accumulation: int  #: micro-batches per optimizer step per GPU
    volume_psi: float  #: collective volume per micro-batch step in units of Ψ elements


#: Per-operator selective recompute (torchtitan's "op" policy, activations.py) re-runs every second matmul
#: of a block in backward: in a Llama block wk, wo and the MLP's up projection, 37% of its matmul FLOPs
#: (Llama 3 8B: 79.7M of a block's 218M weights), so 2Ψ × 0.37 more per token.
OP_RECOMPUTE_FORWARD_SHARE = 0.37


def flops_per_token(params: int, checkpointing: str) -> float:
    """Training FLOPs per token: 6Ψ, 8Ψ with full recompute, 6.74Ψ with per-operator selective recompute."""
    if checkpointing == "full":
        return 8.0 * params
    if checkpointing == "selective-op":
        return (6.0 + 2.0 * OP_RECOMPUTE_FORWARD_SHARE) * params
    return 6.0 * params


def _collective(kind: str, nbytes: float, inst: Instance, per_node: int, nodes: int) -> float:
    """Seconds for a ring collective of `nbytes` (the full tensor) over per_node × nodes GPUs."""
    factor = 2.0 if kind == "all_reduce" else 1.0
    seconds = 0.0
    if per_node > 1:
        bw = inst.intra_node_gbytes_per_s * 1e9 * NVLINK_EFFICIENCY
        seconds += factor * (per_node - 1) / per_node * nbytes / bw
    if nodes > 1:
        net = inst.network_gbps * 1e9 / 8 * NETWORK_EFFICIENCY
        seconds += factor * (nodes - 1) / nodes * nbytes / net
    return seconds


#: Members read once: on Python 3.11 `Strategy.DP` inside a function costs ~150 ns (the enum class's attribute
#: lookup), and step_time runs once per row of the grid (estimate-cost start-up).
_DP, _ZERO1 = Strategy.DP, Strategy.ZERO1


@functools.cache
def _comm_plan(strategy: Strategy, precision: Precision) -> tuple[tuple[str, int, int, str, bool], ...]:
    """(collective, tensors of Ψ elements, bytes per element, scope, once per micro-batch?) per
    step, for what the runtime does. Scope: "all" GPUs, inside the "node", or across the "net"."""
    half = 2 if precision in (Precision.MIXED, Precision.BF16) else 4
    fsdp = strategy in (Strategy.ZERO2, Strategy.FSDP, Strategy.HSDP)
    grad = 4 if fsdp and precision is Precision.MIXED else half  # FSDP2 reduce_dtype=fp32
    if strategy is Strategy.DDP:
        return (("all_reduce", 1, grad, "all", False),)
    if strategy is Strategy.ZERO1:
        return (("all_reduce", 1, grad, "all", False), ("all_gather", 1, half, "all", False))
    if strategy is Strategy.ZERO2:
        return (("all_gather", 1, half, "all", True), ("reduce_scatter", 1, grad, "all", False))
    if strategy is Strategy.FSDP:
        return (("all_gather", 2, half, "all", True), ("reduce_scatter", 1, grad, "all", False))
    # hsdp: full shard inside the instance, then the gradient shards all-reduced across instances
    return (("all_gather", 2, half, "node", True), ("reduce_scatter", 1, grad, "node", False),
            ("all_reduce", 1, grad, "net", False))


def comm_volume_psi(strategy: object, precision: object = Precision.MIXED) -> float:
    """Collective volume per step in units of Ψ elements (ring terms): ddp 2, zero1 3, zero2 2,
    fsdp 3, hsdp 3 inside the instance plus 2 (of the shard) across instances."""
    return volume_psi(parse_enum(Strategy, strategy, "strategy"), parse_enum(Precision, precision, "precision"))


@functools.cache
def volume_psi(strategy: Strategy, precision: Precision) -> float:
    """`comm_volume_psi` of a parsed strategy and precision."""
    if strategy is Strategy.DP:
        return 2.0
    plan = _comm_plan(strategy, precision)
    return float(sum(n * (2 if kind == "all_reduce" else 1) for kind, n, _, scope, _ in plan if scope != "net"))


def step_time(
    *, params: int, tokens_per_micro_batch: int, accumulation: int, strategy: Strategy, precision: Precision,
    inst: Instance, count: int, mfu: float, checkpointing: str,
) -> StepTime:
    """Seconds per optimizer step for `count` instances of `inst`."""
    gpus = inst.gpus * count
    per_gpu_flops = inst.peak_tflops * 1e12 * mfu
    micro = flops_per_token(params, checkpointing) * tokens_per_micro_batch / per_gpu_flops
    compute = micro * accumulation
    if gpus == 1:
        return StepTime(compute, 0.0, 0.0, compute, accumulation, 0.0)
    if strategy is _DP:  # parameter server through GPU 0: 2·K·(N−1), nothing overlaps
        half = 2 if precision in (Precision.MIXED, Precision.BF16) else 4
        bw = inst.intra_node_gbytes_per_s * 1e9 * NVLINK_EFFICIENCY
        comm = accumulation * 2 * params * half * (inst.gpus - 1) / bw
        return StepTime(compute, comm, comm, compute + comm, accumulation, 2.0 * (inst.gpus - 1))
    total = exposed = 0.0
    for kind, tensors, elem, scope, per_micro in _comm_plan(strategy, precision):
        nbytes = tensors * params * elem
        # (not a dict of the three built per collective: step_time runs once per row, estimate-cost start-up)
        per_node, nodes = (inst.gpus, count) if scope == "all" else ((inst.gpus, 1) if scope == "node" else (1, count))
        seconds = _collective(kind, nbytes, inst, per_node, nodes)
        repeats = accumulation if per_micro else 1
        # per-micro-batch all-gathers hide behind that micro-batch; per-step ones behind the last backward
        window = micro if per_micro else micro * (1 - FORWARD_SHARE)
        if kind == "all_gather" and strategy is _ZERO1:
            window = 0.0  # the parameter broadcast follows optimizer.step(): nothing to hide behind
        total += repeats * seconds
        exposed += repeats * max(0.0, seconds - OVERLAP_EFFICIENCY * window)
    return StepTime(compute, total, exposed, compute + exposed, accumulation, volume_psi(strategy, precision))


def default_mfu(inst: Instance) -> float:
    """The MFU prior for the GPU family of `inst`."""
    return MFU_PRIORS.get(inst.gpu_model, 0.30)


def instance_mfu(inst: Instance, given: float | None = None, measured: Mapping[str, float] | None = None) -> float:
    """The MFU rows on `inst` are timed with: the one given, else the one measured for its GPU
    family (a calibration), else the family's prior."""
    return given or (measured or {}).get(inst.gpu_model) or default_mfu(inst)


__all__ = ["StepTime", "step_time", "comm_volume_psi", "volume_psi", "flops_per_token", "default_mfu", "instance_mfu", "MFU_PRIORS"]
