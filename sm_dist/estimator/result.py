"""`Estimate`: the frozen result of `sm_dist.estimate`, with its assumptions and renderings."""

from __future__ import annotations

from sm_dist._records import TYPE_CHECKING
from sm_dist.catalog import Instance
from sm_dist.contract.transfer import MAX_CONCURRENCY
from sm_dist.estimator import activations, cost, goodput, grid, memory, report, timing
from sm_dist.estimator.recommend import Recommendation, smallest_change
from sm_dist.estimator.record import EstimateRecord

if TYPE_CHECKING:
    from typing import Any

    from sm_dist.estimator.calibration import Calibration
    from sm_dist.estimator.inputs import StrPath
    from sm_dist.estimator.plot import Axes  # matplotlib's, named where the core world may import it


class Estimate(EstimateRecord):
    """What `sm_dist.estimate` returns: the record (rows, recommendation, assumptions, warnings,
    model), built from the evaluated rows, shown as a table, HTML or a plot."""

    __slots__ = ()

    @classmethod
    def build(
        cls, *, rows: list[grid.Row], recommendation: Recommendation | None, work: grid.Workload,
        settings: tuple[tuple[str, int], ...] = (), instances: list[Instance], spot: bool, mfu: float | None,
        spot_discount: float | None,
        live_spot: dict[str, float], limits: dict[str, float], warnings: list[str],
        calibrations: dict[str, Calibration] | None = None,
    ) -> Estimate:
        """Collect assumptions and warnings around the evaluated rows."""
        warns = list(warnings)
        for inst in instances:
            if inst.sagemaker_price_derived:
                warns.append(f"{inst.name}: SageMaker price derived from EC2 ({inst.price_source})")
            if not inst.is_cuda:
                warns.append(f"{inst.name}: not runnable by the sm_dist runtime (needs the Neuron SDK)")
        settings = settings or ((work.checkpointing, work.micro_batch),)
        if recommendation is None:
            warns.append(_why_none(rows, limits, work, settings, instances))
        shape = work.shape
        model = {"name": shape.name, "params": shape.params, "flops_params": shape.flops_params,
                 "layers": shape.layers, "hidden": shape.hidden,
                 "heads": shape.heads, "vocab": shape.vocab, "approximate_shape": shape.approximate,
                 "tokens": work.tokens, "seq_len": work.seq_len, "global_batch": work.global_batch,
                 "micro_batch": work.micro_batch if len({m for _, m in settings}) == 1 else None}
        assumptions = _assumptions(work, settings, instances, mfu, spot_discount, live_spot, calibrations or {})
        return cls(tuple(rows), recommendation, assumptions, tuple(dict.fromkeys(warns)), model, spot)

    def table(self, all_rows: bool = False) -> str:
        """A readable text table (best strategy per instance type and count, or every row) with
        the recommendation and the assumptions under it."""
        return report.text(self, all_rows=all_rows)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        return report.html(self)

    def plot(self, path: StrPath | None = None, ax: Axes | None = None) -> Axes:
        """Hours vs dollars, one point per plan that fits (spot too), the Pareto front drawn and the
        recommendation marked (matplotlib); saved to `path` when given. Returns the axes."""
        from sm_dist.estimator.plot import draw  # only when drawing: estimate-cost start-up

        return draw(self, path=path, ax=ax)


def _why_none(rows: list[grid.Row], limits: dict[str, float], work: grid.Workload,
              settings: tuple[tuple[str, int], ...], instances: list[Instance]) -> str:
    if not any(r.runnable and r.fits for r in rows):
        counts = sorted({r.instance_count for r in rows})
        strategies = list(dict.fromkeys(r.strategy for r in rows))
        return smallest_change(work, settings, instances, counts, strategies)
    return f"plans fit, but none within {', '.join(f'{k}={v:g}' for k, v in limits.items())}: relax the limit"


def _searched(settings: tuple[tuple[str, int], ...]) -> tuple[str, str]:
    """The checkpointing and micro-batch of the estimate, as given or as searched."""
    modes = list(dict.fromkeys(c for c, _ in settings))
    micros = list(dict.fromkeys(m for _, m in settings))
    mode = modes[0] if len(modes) == 1 else f"searched per row ({', then '.join(modes)})"
    micro = str(micros[0]) if len(micros) == 1 else f"searched per row ({', '.join(map(str, micros))})"
    return mode, micro


def _flops_text(work: grid.Workload, modes: set[str]) -> str:
    params = "active params (MoE: the experts a token passes through)" if work.shape.experts else "params"
    op = 6 + 2 * timing.OP_RECOMPUTE_FORWARD_SHARE
    if modes == {"full"}:
        return f"8·{params} (full recompute)"
    if modes == {"selective-op"}:
        return f"{op:.2f}·{params} (per-operator selective recompute)"
    parts = [f"6·{params}"]
    if "selective-op" in modes:
        parts.append(f"{op:.2f}·{params} on rows with per-operator recompute (+{op / 6 - 1:.0%} compute)")
    if "full" in modes:
        parts.append(f"8·{params} on rows with full recompute (+33% compute)")
    return "; ".join(parts)


def _mfu_source(mfu: float | None, calibrations: dict[str, Calibration]) -> str:
    priors = "priors per GPU family (timing.MFU_PRIORS): A100 0.40, H100 0.35, ..."
    if mfu:
        return "given"
    if not calibrations:
        return priors
    measured = "; ".join(f"{family} calibrated: {record.describe()}" for family, record in calibrations.items())
    return f"{measured}; {priors} for the other families"


def _data_assumption(data: cost.DataLoad | None, instances: list[Instance]) -> dict[str, Any] | None:
    """What the start-up adds for the data channels, and at what rate per instance type."""
    if data is None:
        return None
    return {"replicated_bytes": data.replicated_bytes, "sharded_bytes": data.sharded_bytes,
            "streamed_bytes": data.streamed_bytes, "unknown_channels": list(data.unknown),
            "download_gbps": {i.name: cost.download_gbps(i) for i in instances},
            "s3_max_gbps": cost.S3_MAX_GBPS, "efficiency": cost.DOWNLOAD_EFFICIENCY}


def _failures(work: grid.Workload, instances: list[Instance]) -> dict[str, Any]:
    """What the goodput of every row rests on (goodput.py, docs/guides/estimate.md)."""
    return {
        "interruptions_per_gpu_hour": {i.name: goodput.interruptions_per_gpu_hour(i.gpu_model) for i in instances},
        "sources": {"H100, H200": "Llama 3 pre-training, 419 unexpected interruptions in 54 days on 16,384 H100s "
                                  "(Dubey et al. 2024, §3.3.4)",
                    "A100 and others": "Kokolis et al. 2025 (HPCA), projected MTTF 1.8 h for 16,384 A100s"},
        "detect_seconds": goodput.DETECT_SECONDS,
        "checkpoint_storage": work.checkpoint_storage, "async_checkpoint": work.async_checkpoint,
        "s3_bytes_per_s_per_connection": goodput.S3_BYTES_PER_S_PER_CONNECTION,
        "s3_connections_per_rank": MAX_CONCURRENCY,
        "interval": "Young/Daly: sqrt(2 × checkpoint stall × MTBF)",
        "planned_restart_every_hours": goodput.MAX_JOB_HOURS,
    }


def _assumptions(work: grid.Workload, settings: tuple[tuple[str, int], ...], instances: list[Instance],
                 mfu: float | None, spot_discount: float | None, live_spot: dict[str, float],
                 calibrations: dict[str, Calibration]) -> dict[str, Any]:
    measured = {family: record.mfu for family, record in calibrations.items() if record.mfu}
    prices = {i.name: {"sagemaker_usd_per_hour": i.sagemaker_usd_per_hour, "ec2_usd_per_hour": i.ec2_usd_per_hour,
                       "date": i.price_date, "source": i.price_source, "derived": i.sagemaker_price_derived,
                       "region": i.region} for i in instances}
    return {
        "mfu": {i.name: timing.instance_mfu(i, mfu, measured) for i in instances},
        "mfu_source": _mfu_source(mfu, calibrations),
        "calibration": {family: record.to_dict() for family, record in calibrations.items()},
        "flops_per_token": _flops_text(work, {c for c, _ in settings}),
        "prices": prices,
        "startup_seconds": cost.STARTUP_SECONDS,
        "data": _data_assumption(work.data, instances),
        "spot_discount": spot_discount if spot_discount is not None else (live_spot or cost.DEFAULT_SPOT_DISCOUNT),
        "spot_interruptions_per_instance_hour": cost.SPOT_INTERRUPTIONS_PER_INSTANCE_HOUR,
        "failures": _failures(work, instances),
        "memory_safety_margin": grid.SAFETY_MARGIN,
        "cuda_context_bytes": memory.CUDA_CONTEXT_BYTES,
        "precision": work.precision.value,
        "optimizer": work.optimizer,
        "activation_checkpointing": _searched(settings)[0],
        "micro_batch": _searched(settings)[1],
        "activations": activations.describe(activations.block_from(work.shape, hidden=work.shape.hidden,
                                                                   heads=work.shape.heads),
                                            work.precision, work.checkpointing),
        "overlap": f"{timing.OVERLAP_EFFICIENCY:g} of backward hides communication; NCCL reaches "
                   f"{timing.NVLINK_EFFICIENCY:g} of NVLink/PCIe and {timing.NETWORK_EFFICIENCY:g} of network peak",
    }


__all__ = ["Estimate"]
