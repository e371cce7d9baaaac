"""Published training runs that used tensor or pipeline parallelism, and how this estimator fares on them.

The estimator plans data parallelism with sharding only (DDP, ZeRO, FSDP, HSDP): every step moves
the whole model's weights and gradients across the instances. Teams training dense models of tens
of billions of parameters on thousands of GPUs split each layer over a node's GPUs instead (tensor
parallelism) or the layers over nodes (pipeline parallelism), which moves far less across the
network. For such a model on several instances the recommendation says so, with what the
estimator gives for those published runs, computed here with the estimator itself (the same
FSDP row, search and MFU prior a user gets) against their published GPU-hours.

Each run: its shape (the paper's table), tokens, sequence length and global batch, the GPUs (as the
SageMaker instance type with the same GPU: 8× A100-80GB is ml.p4de.24xlarge), the published
GPU-hours and where they are published. Standard library only.
"""

from __future__ import annotations

import functools

from sm_dist._records import Record
from sm_dist.catalog import get_instance
from sm_dist.estimator import grid, timing
from sm_dist.estimator.cost import DEFAULT_SPOT_DISCOUNT
from sm_dist.estimator.shape import ModelShape, gpt2_params, llama_params
from sm_dist.vocab import Precision, Strategy

#: Dense models from this many parameters were trained with tensor/pipeline parallelism in the
#: published runs below (and in OPT-175B's, Zhang et al. 2022: FSDP with Megatron tensor parallelism),
#: while a 7B model trains data-parallel as planned here (LLaMA-2-7B's published GPU-hours within 2%,
#: tests/estimator/test_estimate.py).
TENSOR_PARALLEL_FROM_PARAMS = 30e9


class PublishedRun(Record):
    """One published pre-training run and its setup."""

    name: str
    shape: ModelShape
    tokens: float
    seq_len: int
    global_batch: int  #: sequences per optimizer step
    instance_type: str  #: the SageMaker instance type with the run's GPUs
    gpus: int
    gpu_hours: float  #: as published
    parallelism: str
    source: str


def _llama1_65b() -> ModelShape:
    params = llama_params(80, 8192, 32000, 22016, 64, 64)
    return ModelShape("LLaMA-1 65B", params, 80, 8192, 64, 32000, 2048, 22016, 64, gated_mlp=True, max_positions=2048)


def _bloom_176b() -> ModelShape:
    # GPT-2's block (LayerNorm, biases, GELU 4h, fused qkv, tied head) with ALiBi instead of learned
    # positions: its count without the position table is BLOOM's 176,247M (within 0.1%)
    params = gpt2_params(70, 14336, 250_680, 0)
    return ModelShape("BLOOM 176B", params, 70, 14336, 112, 250_680, 2048, 4 * 14336, 112, tied_embeddings=True,
                      norm="layernorm", activation="gelu", max_positions=2048)


RUNS: tuple[PublishedRun, ...] = (
    PublishedRun("LLaMA-1 65B", _llama1_65b(), 1.4e12, 2048, 2048, "ml.p4de.24xlarge", 2048, 1_022_362,
                 "model (tensor) and sequence parallelism",
                 "Touvron et al. 2023, LLaMA (arXiv:2302.13971): §2.4 (2,048 A100-80GB, 380 tokens/s/GPU, "
                 "model and sequence parallelism), Table 2 (1.4T tokens, 4M-token batches), Table 15 (GPU-hours)"),
    PublishedRun("BLOOM 176B", _bloom_176b(), 366e9, 2048, 2048, "ml.p4de.24xlarge", 384, 1_082_990,
                 "tensor 4 × pipeline 12 × data 8 (Megatron-DeepSpeed)",
                 "BigScience 2022, BLOOM (arXiv:2211.05100): §3.4 (48 nodes × 8 A100-80GB, TP 4 × PP 12 × DP 8, "
                 "3.5 months, 1,082,990 compute hours), §3.5 (366B tokens, 2,048 × 2,048-token batches)"),
)


def _settings() -> tuple[tuple[str, int], ...]:
    return tuple((c, m) for c in grid.SEARCHED_CHECKPOINTING for m in grid.SEARCHED_MICRO_BATCHES)


@functools.cache
def estimated_over_published(run: PublishedRun) -> float:
    """This estimator's GPU-hours for `run` (FSDP on its GPUs, the default search, the MFU prior)
    over the published GPU-hours."""
    inst = get_instance(run.instance_type)
    settings = _settings()
    work = grid.Workload(shape=run.shape, tokens=int(run.tokens), seq_len=run.seq_len, global_batch=run.global_batch,
                         micro_batch=settings[0][1], precision=Precision.MIXED, optimizer="adamw",
                         checkpointing=settings[0][0])
    count = run.gpus // inst.gpus
    tried = grid.tried_on(grid.variants(work, settings), run.gpus)
    row = grid.evaluate_search(inst, count, Strategy.FSDP, timing.default_mfu(inst), DEFAULT_SPOT_DISCOUNT, tried)
    if row.gpu_hours is None:
        raise AssertionError(f"{run.name}: no FSDP plan fits on {count}× {inst.name}")  # data error, not input
    return row.gpu_hours / run.gpu_hours


def caveat(shape: ModelShape, row: grid.Row) -> str:
    """What the recommendation adds for a model that size on several instances ("" otherwise)."""
    if shape.flops_params < TENSOR_PARALLEL_FROM_PARAMS or row.instance_count < 2 or row.step is None:
        return ""
    ratios = [(run, estimated_over_published(run)) for run in RUNS]
    low, high = min(r for _, r in ratios), max(r for _, r in ratios)
    each = ", ".join(f"{run.name} on {run.gpus:,} GPUs with {run.parallelism}: {ratio:.2f}×" for run, ratio in ratios)
    exposed = row.step.exposed / row.step.total if row.step.total else 0.0
    why = []
    if exposed >= 0.05:
        why.append(f"{exposed:.0%} of each step is communication backward cannot hide")
    if row.checkpointing == "full":
        why.append("full recompute adds a third to the compute, which tensor parallelism's split activations avoid")
    elif row.checkpointing == "selective-op":
        why.append(f"per-operator recompute adds {2 * timing.OP_RECOMPUTE_FORWARD_SHARE / 6:.0%} to the compute, which "
                   "tensor parallelism's split activations avoid")
    here = f" (here {' and '.join(why)})" if why else ""
    return (f"this is an estimate for sharded data parallelism only: published runs of dense models this size used "
            f"tensor/pipeline parallelism, which moves far less across instances, and on those runs this estimator "
            f"came out {low:.2f}-{high:.2f}× their published GPU-hours ({each}); read these hours as pessimistic{here}")


__all__ = ["RUNS", "TENSOR_PARALLEL_FROM_PARAMS", "PublishedRun", "caveat", "estimated_over_published"]
