"""Memory per GPU for each strategy × precision: what the sm_dist runtime really holds.

Ψ = parameter count, N = shard group size (world size; GPUs per instance for hsdp). The
persistent parts (params, grads, optimizer) are exactly what `sm-dist measure-memory` measures
on CPU, per docs/ARCHITECTURE.md "memory accounting". Transient working memory (unsharded
FSDP units, autocast weight copies) and fixed costs (CUDA context, NCCL) go under "other".

One core function, `_layout`, turns bytes per parameter and shard factors into bytes; both
`memory_breakdown` (the runtime's layouts) and `zero_stage_memory` (the ZeRO paper's stages,
Rajbhandari et al. 2020, Table 1) go through it.

Paper stage 2 vs sm_dist zero2: the paper keeps fp16 params in full (2Ψ) and shards grads and
optimizer (14Ψ/N with K=12). sm_dist's zero2 is FSDP2 with reshard_after_forward=False: the
params are sharded too (the fp32 master under mixed precision, 4Ψ/N), grads fp32 (4Ψ/N), Adam
8Ψ/N — persistent 16Ψ/N like stage 3 — plus the whole model's unsharded bf16 working params
(2Ψ) held from forward to backward, counted under "other" as transient.
"""

from __future__ import annotations

import functools
import math

from sm_dist._records import Record
from sm_dist.errors import ConfigError
from sm_dist.vocab import Precision, Strategy, parse_enum

_GIB = 2**30

#: CUDA context + cuBLAS/cuDNN workspaces per process. ~0.5-1 GiB on A100/H100 (PyTorch forum
#: and `torch.cuda.memory_reserved` vs nvidia-smi gaps commonly reported); an assumption.
CUDA_CONTEXT_BYTES = int(0.8 * _GIB)
#: NCCL communicator buffers per process when world size > 1 (NCCL_BUFFSIZE 4 MiB × channels ×
#: peers, plus proxy buffers; NCCL docs); an assumption.
NCCL_BUFFER_BYTES = int(0.5 * _GIB)
#: DDP's reducer keeps flat bucket tensors that mirror every gradient unless
#: gradient_as_bucket_view=True; the runtime uses the default (False), so ddp/zero1 hold a
#: second copy of the gradients (torch DistributedDataParallel docs, gradient_as_bucket_view).
DDP_GRADIENT_AS_BUCKET_VIEW = False
#: FSDP2 prefetches the next unit while the current one computes: ~2 units unsharded at once.
FSDP_UNSHARDED_UNITS = 2

#: optimizer name -> number of fp32-sized state tensors per parameter (Adam: m and v).
OPTIMIZER_STATES = {"adamw": 2, "adam": 2, "sgd": 1}

# precision -> bytes per element of (param, grad, optimizer state) for unsharded-param strategies.
_DTYPE_BYTES = {
    Precision.FP32: (4, 4, 4),
    Precision.AMP: (4, 4, 4),
    Precision.BF16: (2, 2, 2),
    Precision.MIXED: (2, 2, 4),
}
# precision -> (param, grad, optimizer state) bytes under FSDP2 (zero2/fsdp/hsdp). Mixed uses
# MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): the sharded fp32 params are the
# master copy (under "params"), grads are fp32 sharded, no separate master in the optimizer.
_FSDP_DTYPE_BYTES = {
    Precision.FP32: (4, 4, 4),
    Precision.AMP: (4, 4, 4),
    Precision.BF16: (2, 2, 2),
    Precision.MIXED: (4, 4, 4),
}
# bytes of the half-precision working copy of a weight (what FSDP all-gathers / autocast caches).
_WORKING_BYTES = {Precision.FP32: 4, Precision.AMP: 4, Precision.BF16: 2, Precision.MIXED: 2}

_FSDP_FAMILY = (Strategy.ZERO2, Strategy.FSDP, Strategy.HSDP)


# NamedTuple, not a frozen dataclass: immutable all the same, and ~7x cheaper to define,
# which matters for `sm-dist estimate-cost` start-up (tests/bench/bench_cli_startup.py).
class MemoryBreakdown(Record):
    """Bytes per GPU (the most loaded GPU: GPU 0 for dp)."""

    params: int
    grads: int
    optimizer: int
    activations: int
    other: int
    total: int
    #: what "other" is made of: (name, bytes) pairs, for reports
    other_parts: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("params", "grads", "optimizer", "activations", "other", "total")}


def _layout(
    params: int, bytes_pgo: tuple[float, float, float], shards: tuple[int, int, int], activations: int = 0,
    other_parts: tuple[tuple[str, int], ...] = (),
) -> MemoryBreakdown:
    """The core: Ψ × bytes per parameter ÷ shard factor, for params, grads and optimizer."""
    p, g, o = (int(math.ceil(params * b / s)) for b, s in zip(bytes_pgo, shards))
    other = sum(v for _, v in other_parts)
    return MemoryBreakdown(p, g, o, int(activations), other, p + g + o + int(activations) + other, other_parts)


def zero_stage_memory(params: int, k: int, n: int, stage: int) -> MemoryBreakdown:
    """Model states per GPU in the ZeRO paper's terms: fp16 params (2Ψ) and grads (2Ψ), K bytes
    per parameter of optimizer state; stage 0 = no ZeRO, 1 = P_os, 2 = P_os+g, 3 = P_os+g+p."""
    shards = {0: (1, 1, 1), 1: (1, 1, n), 2: (1, n, n), 3: (n, n, n)}
    if stage not in shards:
        raise ConfigError("stage", stage, "expected a ZeRO stage 0, 1, 2 or 3")
    return _layout(params, (2, 2, k), shards[stage])


def optimizer_states(optimizer: str) -> int:
    """Number of per-parameter state tensors of `optimizer` ("adamw", "adam", "sgd")."""
    name = str(optimizer).strip().lower()
    if name not in OPTIMIZER_STATES:
        raise ConfigError("optimizer", optimizer, f"expected one of {', '.join(OPTIMIZER_STATES)}")
    return OPTIMIZER_STATES[name]


#: Read once: on Python 3.11 `Strategy.DP` inside a function costs ~150 ns (the enum class's attribute lookup),
#: and refusal runs once per row of the grid (estimate-cost start-up).
_DP = Strategy.DP


def not_runnable_reason(strategy: object, world_size: int, gpus_per_instance: int) -> str | None:
    """Why the runtime cannot run `strategy` (a name or a Strategy) at this size, or None when it can."""
    return refusal(parse_enum(Strategy, strategy, "strategy"), world_size, gpus_per_instance)


def refusal(strategy: Strategy, world_size: int, gpus_per_instance: int) -> str | None:
    """`not_runnable_reason` of a parsed strategy (the estimator's grid parses once, at its entry)."""
    if strategy is _DP and world_size > gpus_per_instance:
        return "dp (nn.DataParallel) is one process on one instance; use ddp or a sharded strategy across instances"
    return None


def persistent_bytes_per_param(strategy: object, precision: object, optimizer: str = "adamw") -> tuple[float, float, float]:
    """(params, grads, optimizer) bytes per parameter before sharding, as the runtime holds them."""
    return bytes_per_param(parse_enum(Strategy, strategy, "strategy"), parse_enum(Precision, precision, "precision"),
                           optimizer)


@functools.cache
def bytes_per_param(strategy: Strategy, precision: Precision, optimizer: str = "adamw") -> tuple[float, float, float]:
    """`persistent_bytes_per_param` of a parsed strategy and precision."""
    states = optimizer_states(optimizer)
    table = _FSDP_DTYPE_BYTES if strategy in _FSDP_FAMILY else _DTYPE_BYTES
    p, g, o = table[precision]
    master = 4 if (precision is Precision.MIXED and strategy not in _FSDP_FAMILY) else 0
    return (p, g, states * o + master)


@functools.cache
def saved_bytes_per_param(strategy: Strategy, precision: Precision, optimizer: str = "adamw") -> float:
    """Bytes per parameter a checkpoint holds: the weights and the optimizer state, not the gradients."""
    params, _, optimizer_bytes = bytes_per_param(strategy, precision, optimizer)
    return params + optimizer_bytes


def shard_factors(strategy: Strategy, world_size: int, gpus_per_instance: int) -> tuple[int, int, int]:
    """How many ways params, grads and optimizer states are split for `strategy`."""
    n_hsdp = min(world_size, gpus_per_instance)
    return {
        Strategy.DP: (1, 1, 1),
        Strategy.DDP: (1, 1, 1),
        Strategy.ZERO1: (1, 1, world_size),
        Strategy.ZERO2: (world_size, world_size, world_size),
        Strategy.FSDP: (world_size, world_size, world_size),
        Strategy.HSDP: (n_hsdp, n_hsdp, n_hsdp),
    }[strategy]


def _other_parts(
    strat: Strategy, prec: Precision, params: int, world_size: int, unit_params: int, buffers_bytes: int
) -> tuple[tuple[str, int], ...]:
    """Transient and fixed memory: working copies, communication buffers, CUDA context."""
    work = _WORKING_BYTES[prec]
    parts = [("cuda_context", CUDA_CONTEXT_BYTES)]
    if buffers_bytes:
        parts.append(("model_buffers", int(buffers_bytes)))
    if world_size > 1:
        parts.append(("nccl_buffers", NCCL_BUFFER_BYTES))
    if strat in (Strategy.DDP, Strategy.ZERO1) and world_size > 1 and not DDP_GRADIENT_AS_BUCKET_VIEW:
        parts.append(("ddp_bucket_grad_copy", params * _DTYPE_BYTES[prec][1]))
    if strat is Strategy.ZERO2:
        # reshard_after_forward=False: every unit stays unsharded from its forward to its backward
        parts.append(("unsharded_params_fwd_to_bwd", params * work))
    if strat in _FSDP_FAMILY:
        reduce_bytes = 4 if prec is not Precision.BF16 else 2
        if strat is not Strategy.ZERO2:
            parts.append(("unsharded_units", FSDP_UNSHARDED_UNITS * unit_params * work))
        parts.append(("unsharded_unit_grads", unit_params * reduce_bytes))
    if prec is Precision.AMP:
        # torch.autocast caches the bf16 copy of every weight used inside the autocast region
        parts.append(("autocast_weight_cache", params * 2))
    return tuple(parts)


def memory_breakdown(
    params: int,
    strategy: object,
    precision: object,
    world_size: int,
    gpus_per_instance: int,
    *,
    optimizer: str = "adamw",
    activations_bytes: int = 0,
    unit_params: int | None = None,
    buffers_bytes: int = 0,
    largest_tensor_params: int | None = None,
) -> MemoryBreakdown:
    """Bytes per GPU that the runtime holds for `strategy` and `precision` at this world size.

    `unit_params` is the size of the largest FSDP unit (one transformer layer); by default
    Ψ/32. `largest_tensor_params` is the biggest single parameter (an LLM's embedding): zero1
    (ZeroRedundancyOptimizer, and the mixed-precision master weights) gives each rank whole
    tensors, so the rank owning it holds at least that tensor's optimizer states — more than
    Ψ/N when one tensor dominates (measured: gpt2 with 2 layers at N=4, 3x). Raises
    ConfigError for a pair the runtime cannot run (see `not_runnable_reason`).
    """
    strat = parse_enum(Strategy, strategy, "strategy")
    prec = parse_enum(Precision, precision, "precision")
    for field, value in (("params", params), ("world_size", world_size), ("gpus_per_instance", gpus_per_instance)):
        if int(value) < 1:
            raise ConfigError(field, value, "expected a positive integer")
    reason = refusal(strat, world_size, gpus_per_instance)
    if reason:
        raise ConfigError("strategy", strat.value, reason)
    return breakdown(params, strat, prec, world_size, gpus_per_instance, optimizer=optimizer,
                     activations_bytes=activations_bytes, unit_params=unit_params, buffers_bytes=buffers_bytes,
                     largest_tensor_params=largest_tensor_params)


def breakdown(
    params: int,
    strategy: Strategy,
    precision: Precision,
    world_size: int,
    gpus_per_instance: int,
    *,
    optimizer: str = "adamw",
    activations_bytes: int = 0,
    unit_params: int | None = None,
    buffers_bytes: int = 0,
    largest_tensor_params: int | None = None,
) -> MemoryBreakdown:
    """`memory_breakdown` of values checked already: a parsed strategy and precision the runtime can run
    at this size (the estimator's grid checks them once, at its entry, and asks `refusal` per row)."""
    unit = int(unit_params) if unit_params else max(1, params // 32)
    others = _other_parts(strategy, precision, params, world_size, unit, buffers_bytes)
    per_param = bytes_per_param(strategy, precision, optimizer)
    layout = _layout(params, per_param, shard_factors(strategy, world_size, gpus_per_instance), activations_bytes,
                     others)
    if strategy is Strategy.ZERO1 and largest_tensor_params:
        floor = int(math.ceil(int(largest_tensor_params) * per_param[2]))  # whole-tensor partition
        if floor > layout.optimizer:
            layout = MemoryBreakdown(layout.params, layout.grads, floor, layout.activations, layout.other,
                                     layout.total - layout.optimizer + floor, layout.other_parts)
    return layout


__all__ = [
    "MemoryBreakdown",
    "memory_breakdown",
    "breakdown",
    "bytes_per_param",
    "refusal",
    "saved_bytes_per_param",
    "zero_stage_memory",
    "not_runnable_reason",
    "persistent_bytes_per_param",
    "shard_factors",
    "optimizer_states",
    "CUDA_CONTEXT_BYTES",
    "NCCL_BUFFER_BYTES",
]
