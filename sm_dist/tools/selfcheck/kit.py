"""The check kit: run every strategy, compare with the estimator, write the dated report.

On GPUs (world size = GPU count, 1 included, NCCL): ddp, zero1, zero2 and fsdp train a
LLaMA-shaped model (LLaMA-2-7B's block with `layers` blocks, mixed precision); each run's peak
CUDA memory (torch.cuda.max_memory_allocated, the largest rank) is set against what the
estimator's memory model puts in the allocator (its total less the CUDA context and NCCL's own
buffers, which the allocator does not see), and its step time gives tokens per second per GPU
and the bf16 MFU they imply against the catalog's peak for that GPU family. dp runs in one
process over all GPUs when there are two or more. SyncBatchNorm is checked across the ranks and
the fp16 GradScaler in one process. On CPU the same strategies run with gloo at world size 2 on
a tiny model; what needs a GPU is skipped with one line each. Everywhere: the ranks' weights
agree after training, the loss is finite and falls on a fixed batch, and the persistent state
(params, grads, optimizer) is compared with the estimate as `sm-dist measure-memory` does.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import platform
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

import torch

from sm_dist.estimator.shape import ModelShape
from sm_dist.tools.selfcheck import checks
from sm_dist.tools.selfcheck.spawn import run_ranks
from sm_dist.vocab import Precision, Strategy

FORMAT = "sm_dist.selfcheck/1"
STRATEGIES = ("ddp", "zero1", "zero2", "fsdp")
PRECISION = Precision.MIXED
#: The GPU model: LLaMA-2-7B's block (GQA-free MHA, SwiGLU 11008, RMSNorm, 32k vocabulary), 2 blocks
#: by default: ~0.67B parameters, ~12 GB with DDP under mixed precision, so any catalog GPU holds it.
GPU_PRESET, GPU_LAYERS, GPU_SEQ, GPU_MICRO, GPU_STEPS, GPU_WARMUP = "llama2-7b", 2, 2048, 1, 10, 3
#: The CPU model: the same block kind, tiny (GQA 4/2 heads), two gloo ranks.
CPU_SHAPE = ModelShape("llama-tiny", 0, 2, 64, 4, 256, 32, 176, 2, gated_mlp=True)
CPU_WORLD, CPU_MICRO, CPU_STEPS, CPU_WARMUP = 2, 2, 3, 1
#: SyncBatchNorm's running statistics against the all-ranks figure (fp32).
SYNC_TOLERANCE = 1e-5


class PlatformFacts(TypedDict):
    """What the report's figures were measured on."""

    python: str
    torch: str
    cuda: str | None
    gpus: int
    devices: list[str]
    nccl: str | None
    driver: str | None


class PeakMemory(TypedDict):
    measured_allocated_bytes: int
    estimated_allocated_bytes: int
    measured_reserved_bytes: int
    relative_difference: float


class _OnGPU(TypedDict, total=False):
    """The parts of a strategy's result that need a CUDA GPU."""

    peak_memory: PeakMemory
    mfu_peak_tflops: float | None


class StrategyResult(_OnGPU):
    """One strategy's runs on every rank, as the report and its line show them."""

    ok: bool
    world_size: int
    backend: str
    finite: bool
    loss_fell: bool
    ranks_agree: bool
    losses: list[float]
    step_seconds: float
    tokens_per_second_per_gpu: float
    mfu: float | None
    persistent_memory: dict[str, Any]  # measure_cli.compare's table


@dataclass(frozen=True)
class KitPlan:
    """What the kit runs on this machine: model shape, batch, steps, world size."""

    shape: ModelShape
    model: str
    micro_batch: int
    warmup: int
    steps: int
    world: int
    gpus: int
    devices: tuple[str, ...] = ()

    @property
    def seq_len(self) -> int:
        return self.shape.seq_len


def _driver() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def platform_facts(gpus: int) -> PlatformFacts:
    """Device, driver, CUDA, NCCL and torch: what the report's figures were measured on."""
    nccl = torch.cuda.nccl.version() if gpus else None
    return {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "gpus": gpus, "devices": [torch.cuda.get_device_name(i) for i in range(gpus)] or [platform.processor()
                                                                                           or platform.machine()],
            "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl, "driver": _driver() if gpus else None}


def _peak_estimate(shape: ModelShape, first: dict[str, Any], strategy: Strategy, world: int, gpus: int,
                   micro: int, seq: int) -> int:
    """What the estimator puts in the CUDA allocator for this run: its total per GPU less the CUDA
    context and NCCL's buffers (outside the allocator)."""
    from sm_dist.estimator.activations import activation_bytes
    from sm_dist.estimator.memory import CUDA_CONTEXT_BYTES, NCCL_BUFFER_BYTES, memory_breakdown

    acts = activation_bytes(layers=shape.layers, hidden=shape.hidden, heads=shape.heads, vocab=shape.vocab,
                            seq_len=seq, micro_batch=micro, checkpointing="selective", precision=PRECISION, shape=shape)
    est = memory_breakdown(first["param_count"], strategy, PRECISION, world, gpus, activations_bytes=acts,
                           unit_params=first["unit_params"], buffers_bytes=first["buffers_bytes"],
                           largest_tensor_params=first["largest_tensor_params"])
    return est.total - CUDA_CONTEXT_BYTES - (NCCL_BUFFER_BYTES if world > 1 else 0)


def summarize(name: str, ranks: list[dict[str, Any]], plan: KitPlan) -> StrategyResult:
    """One strategy's runs on every rank (their JSON reports), checked and compared with the estimator."""
    from sm_dist.estimator.calibration import from_throughput
    from sm_dist.tools.measure_cli import compare

    runs = [r["results"][name] for r in sorted(ranks, key=lambda r: r["rank"])]
    strategy, world, gpus = Strategy(name), plan.world, plan.gpus
    losses = [run["losses"] for run in runs]
    finite = all(math.isfinite(v) for run in losses for v in run)
    fell = all(run[-1] < run[0] for run in losses)
    agree = len({run["checksum"] for run in runs}) == 1
    measure_format = [{"rank": i, **run, "held": {name: run["held"]}} for i, run in enumerate(runs)]
    step = max(run["step_seconds"] for run in runs)
    tokens = plan.micro_batch * plan.seq_len / step / (gpus if name == "dp" else 1)
    out: StrategyResult = {
        "ok": finite and fell and agree, "world_size": world, "backend": ranks[0]["backend"], "finite": finite,
        "loss_fell": fell, "ranks_agree": agree, "losses": losses[0], "step_seconds": step,
        "tokens_per_second_per_gpu": tokens, "mfu": None,
        "persistent_memory": compare(measure_format, strategy, PRECISION, world, 1),
    }
    if gpus:
        measured = max(run["peak_allocated_bytes"] for run in runs)
        estimated = _peak_estimate(plan.shape, runs[0], strategy, world, gpus, plan.micro_batch // (
            gpus if name == "dp" else 1), plan.seq_len)
        out["peak_memory"] = {"measured_allocated_bytes": measured, "estimated_allocated_bytes": estimated,
                              "measured_reserved_bytes": max(run["peak_reserved_bytes"] for run in runs),
                              "relative_difference": (measured - estimated) / estimated}
        record = from_throughput(device_name=plan.devices[0], tokens_per_second=tokens,
                                 flops_per_token=6.0 * runs[0]["param_count"], model=plan.model,
                                 params=runs[0]["param_count"], source="selfcheck", gpus=gpus)
        out["mfu"], out["mfu_peak_tflops"] = record.mfu, record.peak_tflops
    return out


def _line(name: str, result: StrategyResult) -> str:
    gib = 2**30
    loss = result["losses"]
    head = (f"{name:<6} {'ok  ' if result['ok'] else 'FAIL'} world {result['world_size']} {result['backend']}: loss "
            f"{loss[0]:.3f} -> {loss[-1]:.3f}{'' if result['loss_fell'] else ' (did not fall)'}, ranks "
            f"{'agree' if result['ranks_agree'] else 'DISAGREE'}")
    diff = result["persistent_memory"]["relative_difference"]
    memory = "persistent memory vs estimate " + " ".join(f"{k} {v:+.1%}" for k, v in diff.items())
    parts = [head, memory]
    peak = result.get("peak_memory")
    if peak is not None:
        parts.append(f"peak CUDA memory {peak['measured_allocated_bytes'] / gib:.2f} GiB vs estimate "
                     f"{peak['estimated_allocated_bytes'] / gib:.2f} GiB ({peak['relative_difference']:+.1%})")
    unit = "GPU" if peak is not None else "process"
    speed = f"step {result['step_seconds']:.3f} s, {result['tokens_per_second_per_gpu']:,.0f} tokens/s per {unit}"
    if result["mfu"] is not None:
        peak_tflops = result.get("mfu_peak_tflops")
        speed += f", bf16 MFU {result['mfu']:.3f}" + (f" (peak {peak_tflops:g} TFLOP/s)" if peak_tflops else "")
    parts.append(speed)
    return " | ".join(parts)


def _plan(gpus: int, layers: int | None, seq_len: int | None, micro_batch: int | None, steps: int | None) -> KitPlan:
    """What the kit runs on this machine: the GPU model on GPUs, the tiny one with gloo on CPU."""
    if gpus:
        from sm_dist.estimator.models import preset

        shape = preset(GPU_PRESET)
        shape = shape._replace(layers=layers or GPU_LAYERS, seq_len=seq_len or GPU_SEQ)
        name = f"{GPU_PRESET} shape, {shape.layers} blocks"
        micro, warmup, count, world = micro_batch or GPU_MICRO, GPU_WARMUP, steps or GPU_STEPS, gpus
    else:
        shape = CPU_SHAPE._replace(seq_len=seq_len or CPU_SHAPE.seq_len, layers=layers or CPU_SHAPE.layers)
        name, micro, warmup, count, world = "llama-tiny", micro_batch or CPU_MICRO, CPU_WARMUP, steps or CPU_STEPS, CPU_WORLD
    return KitPlan(shape, name, micro, warmup, count, world, gpus)


def _config(plan: KitPlan, strategies: list[str], micro: int) -> dict[str, Any]:
    """The ranks' settings, as JSON for the spawned processes."""
    return {"shape": plan.shape._asdict(), "strategies": strategies, "precision": PRECISION.value,
            "seq_len": plan.seq_len, "micro_batch": micro, "warmup": plan.warmup, "steps": plan.steps}


def run_kit(out: str, gpus: int, *, layers: int | None = None, seq_len: int | None = None,
            micro_batch: int | None = None, steps: int | None = None) -> int:
    """Run every check, print one line each (and one per skipped part), write the report; 0 when
    every check passed."""
    facts = platform_facts(gpus)
    plan = replace(_plan(gpus, layers, seq_len, micro_batch, steps), devices=tuple(facts["devices"]))
    skipped: list[str] = []
    print(f"selfcheck: {plan.model} ({plan.shape.hidden} hidden), {PRECISION.value} precision, world size "
          f"{plan.world} on {', '.join(facts['devices'])}; torch {facts['torch']}", flush=True)
    ranks = run_ranks("strategies", _config(plan, list(STRATEGIES), plan.micro_batch), plan.world, cpu=not gpus)
    results = {name: summarize(name, ranks, plan) for name in STRATEGIES}
    if gpus > 1:
        dp_plan = replace(plan, world=gpus, micro_batch=plan.micro_batch * gpus)
        dp = run_ranks("strategies", _config(plan, ["dp"], dp_plan.micro_batch), 1, cpu=False)
        results["dp"] = summarize("dp", [{**dp[0], "world_size": gpus}], dp_plan)
    else:
        skipped.append("dp: needs two or more GPUs (nn.DataParallel splits one process's batch over them)")
    for name, result in results.items():
        print(_line(name, result), flush=True)
    skipped.append("hsdp: needs two or more instances (within one instance it is fsdp)")
    if gpus:
        sync = run_ranks("syncbn", {}, gpus, cpu=False)
        worst = max(max(r["mean_error"], r["var_error"]) for r in sync)
        syncbn: dict[str, Any] = {"ok": worst <= SYNC_TOLERANCE and all(r["module"] == "SyncBatchNorm" for r in sync),
                                  "world_size": gpus, "max_error": worst}
        print(f"SyncBatchNorm {'ok' if syncbn['ok'] else 'FAIL'}: running statistics of all {gpus} ranks' batches "
              f"(largest error {worst:.1e})", flush=True)
    else:
        syncbn = {"skipped": "no CUDA GPU: SyncBatchNorm syncs GPU tensors only"}
        skipped += ["NCCL: no CUDA GPU; the strategies ran with gloo at world size 2 on a tiny model",
                    "peak CUDA memory vs estimate: no CUDA GPU (persistent state compared instead)",
                    "step time and bf16 MFU: no CUDA GPU (CPU step times above imply no GPU MFU)",
                    "SyncBatchNorm: " + syncbn["skipped"]]
    scaler = checks.grad_scaler("cuda" if gpus else "cpu")
    scaler["ok"] = (scaler["finite_steps_changed_weights"] and not scaler["inf_step_changed_weights"]
                    and scaler["scale_after_inf"] == scaler["scale_after_finite_steps"] / 2)
    print(f"GradScaler {'ok' if scaler['ok'] else 'FAIL'} ({scaler['autocast_dtype']} on {scaler['device']}"
          f"{', forced fp16' if scaler['forced_fp16'] else ''}): finite steps update, an inf gradient skips the step "
          f"and halves the scale ({scaler['scale_after_finite_steps']:g} -> {scaler['scale_after_inf']:g})", flush=True)
    for line in skipped:
        print(f"SKIP {line}", flush=True)
    ok = all(r["ok"] for r in results.values()) and syncbn.get("ok", True) and scaler["ok"]
    report = {"format": FORMAT, "date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(), "ok": ok,
              "platform": facts, "device": "cuda" if gpus else "cpu", "world_size": plan.world,
              "model": {"name": plan.model, "shape": plan.shape._asdict(), "seq_len": plan.seq_len,
                        "micro_batch": plan.micro_batch, "precision": PRECISION.value, "steps": plan.steps},
              "strategies": results, "sync_batchnorm": syncbn, "grad_scaler": scaler, "skipped": skipped}
    Path(out).write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(f"selfcheck {'passed' if ok else 'FAILED'}; report: {out}", flush=True)
    return 0 if ok else 1


__all__ = ["FORMAT", "STRATEGIES", "KitPlan", "PlatformFacts", "StrategyResult", "platform_facts", "run_kit", "summarize"]
