"""`sm_dist.estimate(...)`: memory, time and dollars over a strategy × instance × count grid.

A pure function (apart from `prices="live"`, which asks the AWS Price List API) returning a
frozen `Estimate`. Standard library only; torch is touched only through a given nn.Module.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

from sm_dist._records import TYPE_CHECKING
from sm_dist.catalog import CATALOG_REGION, Instance, get_instance
from sm_dist.errors import ConfigError
from sm_dist.estimator import cost as cost_mod
from sm_dist.estimator import grid, models, published, timing
from sm_dist.estimator.activations import parse_checkpointing
from sm_dist.estimator.cost import DataLoad
from sm_dist.estimator.memory import MemoryBreakdown, optimizer_states
from sm_dist.estimator.recommend import recommend
from sm_dist.estimator.result import Estimate
from sm_dist.vocab import Precision, Strategy, parse_enum

if TYPE_CHECKING:
    from sm_dist.estimator.calibration import Calibration
    from sm_dist.estimator.inputs import (
        CalibrationLike,
        CheckpointingLike,
        CountsLike,
        HfConfigLike,
        InstanceTypesLike,
        ModelLike,
        PrecisionLike,
        PricingClient,
        StrategiesLike,
        StrPath,
    )

#: Instance types compared when none are given: the 8-GPU training workhorses.
DEFAULT_INSTANCE_TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge", "ml.g6e.48xlarge")
DEFAULT_INSTANCE_COUNTS = (1, 2, 4, 8, 16)
#: Global batch when none is given: ~4M tokens per step (LLaMA 2 paper, Touvron et al. 2023).
DEFAULT_GLOBAL_BATCH_TOKENS = 4 * 2**20
DEFAULT_PRECISION = Precision.MIXED
#: What is searched when activation_checkpointing / micro_batch are not given (grid.py says why).
SEARCHED_CHECKPOINTING = grid.SEARCHED_CHECKPOINTING
SEARCHED_MICRO_BATCHES = grid.SEARCHED_MICRO_BATCHES


def _settings(checkpointing: CheckpointingLike | None, micro_batch: int | None) -> tuple[tuple[str, int], ...]:
    """(checkpointing, micro_batch) pairs to try per row, best first; a given value pins its dimension."""
    modes = SEARCHED_CHECKPOINTING if checkpointing is None else (parse_checkpointing(checkpointing),)
    micros = SEARCHED_MICRO_BATCHES if micro_batch is None else (_whole("micro_batch", micro_batch),)
    return tuple((mode, micro) for mode in modes for micro in micros)


def _number(field: str, value: float | str) -> float:
    """`value` as a positive finite number, or a ConfigError naming `field`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(field, value, "expected a positive number") from None
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(field, value, "expected a positive number")
    return number


def _whole(field: str, value: float | str) -> int:
    """`value` as a positive whole number (7e9 and 7_000_000_000.0 are whole), or a ConfigError."""
    number = _number(field, value)
    if number != int(number):
        raise ConfigError(field, value, "expected a positive whole number")
    return int(number)


def _shape(params: float | None, model: ModelLike | None, hf: HfConfigLike | None,
           warnings: list[str]) -> tuple[models.ModelShape, int]:
    """The model shape and its buffer bytes, from exactly one of params / model / hf_config."""
    given = [n for n, v in (("params", params), ("model", model), ("hf_config", hf)) if v is not None]
    if len(given) != 1:
        raise ConfigError(
            "model", ", ".join(given) or None, "give exactly one of params=N, model=<preset or nn.Module>, hf_config=PATH"
        )
    if hf is not None:
        from sm_dist.estimator import hf_config  # only for a config: start-up

        shape = hf_config.shape_from_config(dict(hf), "hf_config=<mapping>") if isinstance(hf, Mapping) else hf_config.read(hf)
        if shape.experts:
            warnings.append(
                f"{shape.name}: mixture of experts ({shape.experts} experts, {shape.experts_per_token} per token): "
                f"memory counts every expert ({shape.params / 1e9:.2f}B parameters), time the "
                f"{shape.flops_params / 1e9:.2f}B a token passes through; sm_dist offers no expert parallelism, "
                "so the experts are replicated or sharded by the strategy like any other weight")
        return shape, 0
    if isinstance(model, str):
        return models.preset(model), 0
    if model is not None:
        if not hasattr(model, "parameters"):
            raise ConfigError("model", type(model).__name__, "expected a preset name or a torch nn.Module")
        from sm_dist.estimator.hf_config import shape_of_module  # only for an nn.Module: start-up

        count, buffers = models.count_module_params(model)
        shape, how = shape_of_module(model, count)  # model.config when present, else the module's structure
        warnings.append(f"{type(model).__name__}: {count:,} parameters counted exactly; {how}")
        return shape, buffers
    assert params is not None  # exactly one was given
    shape = models.shape_from_params(_whole("params", params))
    warnings.append(f"only a parameter count was given: assumed a GPT-like shape ({shape.layers} layers, hidden "
                    f"{shape.hidden}, vocab {shape.vocab}); activations are approximate")
    return shape, 0


def _storage(value: str) -> str:
    from sm_dist.estimator.goodput import STORAGES

    if value not in STORAGES:
        raise ConfigError("checkpoint_storage", value, "expected 's3' (the runtime uploads) or 'local' "
                          "(sagemaker-sync: written to the instance's disk, uploaded by SageMaker)")
    return value


def _tokens(tokens: float | None, samples: float | None, epochs: float, seq_len: int) -> int:
    if tokens is not None:
        return _whole("tokens", tokens)
    if samples is None:
        raise ConfigError("tokens", None, "give the training size: tokens=N (--tokens 2e12) or samples=N with epochs")
    return max(1, int(_whole("samples", samples) * _number("epochs", epochs) * seq_len))


def _names(value: InstanceTypesLike | None) -> list[str]:
    """One name or many: "ml.p5.48xlarge" and ["ml.p5.48xlarge"] mean the same."""
    if value is None:
        return list(DEFAULT_INSTANCE_TYPES)
    return [value] if isinstance(value, str) else list(value)


def _instances(
    names: InstanceTypesLike | None, region: str, prices: str, client: PricingClient | None,
    cache_dir: StrPath | None, warnings: list[str],
) -> tuple[list[Instance], dict[str, float]]:
    """Catalog instances (priced from the catalog or live) and any live spot discounts."""
    wanted = _names(names)
    if prices not in ("catalog", "live"):
        raise ConfigError("prices", prices, "expected 'catalog' or 'live'")
    if prices == "catalog":
        return [get_instance(n, region) for n in wanted], {}
    from sm_dist.estimator import prices_live  # only for live prices: start-up

    base = [get_instance(n, CATALOG_REGION) for n in wanted]
    return prices_live.priced(base, region, client=client, cache_dir=cache_dir, warnings=warnings)


def _counts(values: CountsLike | None) -> list[int]:
    given = DEFAULT_INSTANCE_COUNTS if values is None else ((values,) if isinstance(values, int) else values)
    return sorted({_whole("instance_count", v) for v in given})


def _strategies(values: StrategiesLike | None) -> list[Strategy]:
    if values is None:
        return list(Strategy)
    given: Sequence[Strategy | str] = [values] if isinstance(values, str) else values
    return [parse_enum(Strategy, s, "strategy") for s in given]


def _calibrations(value: CalibrationLike | None, mfu: float | None) -> dict[str, Calibration]:
    """The calibration records given, by GPU family (none: {})."""
    if value is None:
        return {}
    if mfu is not None:
        raise ConfigError("calibration", "with mfu", "give mfu= (one MFU for every GPU) or calibration= (measured, "
                          "per GPU family), not both")
    from sm_dist.estimator import calibration  # only when given: start-up

    items = [value] if isinstance(value, (str, os.PathLike, calibration.Calibration)) else list(value)
    return calibration.by_family([r if isinstance(r, calibration.Calibration) else calibration.load(r) for r in items])


def _calibration_warnings(calibrated: dict[str, Calibration], shape: models.ModelShape, instances: list[Instance],
                          warnings: list[str]) -> None:
    """Say when a calibration applies to no instance compared, or was measured on a model of another size."""
    if not calibrated:
        return
    from sm_dist.estimator.calibration import SIZE_WARNING_FACTOR  # only with a calibration: start-up

    compared = {i.gpu_model for i in instances}
    for family, record in calibrated.items():
        if family not in compared:
            warnings.append(f"the {family} calibration applies to none of the instance types compared "
                            f"({', '.join(sorted(compared))}): their MFU is the prior")
        if record.gpus > 1:
            warnings.append(f"the {family} MFU is {record.source} throughput on {record.gpus} GPUs, communication "
                            "included, and the estimate adds its own: read those rows as conservative")
        ratio = shape.flops_params / record.params
        if not 1 / SIZE_WARNING_FACTOR <= ratio <= SIZE_WARNING_FACTOR:
            warnings.append(f"the {family} MFU was measured on {record.model} ({record.params / 1e9:.3g}B parameters), "
                            f"this estimate is for {shape.flops_params / 1e9:.3g}B: MFU moves with model size; "
                            "calibrate with this model for a closer figure")


def _batch_warning(rows: list[grid.Row], work: grid.Workload, warnings: list[str]) -> None:
    """Say when many GPUs force a global batch well above the one asked for (convergence changes)."""
    limit = 1.1 * work.global_batch
    over = [r for r in rows if r.global_batch > limit]
    if over:
        worst = max(over, key=lambda r: r.global_batch)
        warnings.append(f"{len(over)} plans run a larger global batch than asked ({work.global_batch} sequences): "
                        f"e.g. {worst.gpus} GPUs × micro-batch {worst.micro_batch} = at least {worst.global_batch}")


def estimate(
    *, params: float | None = None, model: ModelLike | None = None, hf_config: HfConfigLike | None = None,
    tokens: float | None = None, samples: float | None = None, epochs: float = 1, seq_len: int | None = None,
    global_batch: int | None = None, micro_batch: int | None = None, precision: PrecisionLike = DEFAULT_PRECISION,
    optimizer: str = "adamw", activation_checkpointing: CheckpointingLike | None = None,
    instance_types: InstanceTypesLike | None = None, instance_counts: CountsLike | None = None,
    strategies: StrategiesLike | None = None, spot: bool = False, region: str = CATALOG_REGION,
    mfu: float | None = None, prices: str = "catalog", max_hours: float | None = None, budget: float | None = None,
    spot_discount: float | None = None, pricing_client: PricingClient | None = None, cache_dir: StrPath | None = None,
    calibration: CalibrationLike | None = None, data: DataLoad | None = None, infra_check: bool | None = False,
    async_checkpoint: bool = False, checkpoint_storage: str = "s3",
) -> Estimate:
    """Estimate memory per GPU, step time, hours and cost for every combination asked for, and
    recommend the cheapest plan that fits (fastest within `budget`, cheapest within `max_hours`).

    `activation_checkpointing` / `micro_batch` left as None are searched per row (SEARCHED_*);
    each row says which setting it used. `calibration` (sm-dist calibrate's file, or a finished
    job's figures, see estimator/calibration.py) replaces the MFU prior of its GPU family by the
    measured MFU; other families keep the prior. `data` (the job's channels by how they arrive)
    adds their File-mode download to the billed start-up, and `infra_check` (True, or None: SageMaker's
    default rule per row, `cost.infra_check_on`) the infra check's time. Every row's hours and dollars
    include its expected failures, checkpoint stalls and restarts (goodput.py: `row.goodput`, with the
    Young/Daly checkpoint interval); `async_checkpoint` and `checkpoint_storage` ("s3", or "local" for
    sagemaker-sync) say how its checkpoints are saved."""
    warnings: list[str] = []
    settings = _settings(activation_checkpointing, micro_batch)
    shape, buffers = _shape(params, model, hf_config, warnings)
    seq = _whole("seq_len", seq_len) if seq_len is not None else shape.seq_len
    work = grid.Workload(
        shape=shape, tokens=_tokens(tokens, samples, epochs, seq), seq_len=seq,
        global_batch=(_whole("global_batch", global_batch) if global_batch is not None
                      else max(1, round(DEFAULT_GLOBAL_BATCH_TOKENS / seq))),
        micro_batch=settings[0][1], precision=parse_enum(Precision, precision, "precision"),
        optimizer=str(optimizer).lower(), checkpointing=settings[0][0],
        buffers_bytes=buffers, data=data, infra_check=infra_check, spot=bool(spot),
        async_checkpoint=bool(async_checkpoint), checkpoint_storage=_storage(checkpoint_storage),
    )
    optimizer_states(work.optimizer)  # validates the name
    mfu_value = _number("mfu", mfu) if mfu is not None else None
    if mfu_value is not None and mfu_value > 1:
        raise ConfigError("mfu", mfu, "MFU is a fraction of peak: expected 0 < mfu <= 1 (e.g. 0.4)")
    discount = _number("spot_discount", spot_discount) if spot_discount is not None else None
    if discount is not None and discount >= 1:
        raise ConfigError("spot_discount", spot_discount, "a fraction off on-demand: expected 0 < discount < 1 (e.g. 0.6)")
    limits = {k: _number(k, v) for k, v in (("max_hours", max_hours), ("budget", budget)) if v is not None}
    strats = _strategies(strategies)
    calibrated = _calibrations(calibration, mfu_value)
    measured = {family: record.mfu for family, record in calibrated.items() if record.mfu}
    instances, live_spot = _instances(instance_types, region, prices, pricing_client, cache_dir, warnings)
    rows: list[grid.Row] = []
    counts = _counts(instance_counts)
    tried = grid.variants(work, settings)
    memo: dict[tuple[Strategy, int, int], MemoryBreakdown] = {}
    tried_by_world: dict[int, tuple[grid.Variant, ...]] = {}  # the catalog's 160 pairs make ~25 world sizes
    for inst in instances:
        inst_mfu = timing.instance_mfu(inst, mfu_value, measured)
        inst_discount = discount if discount is not None else live_spot.get(inst.name, cost_mod.DEFAULT_SPOT_DISCOUNT)
        for count in counts:
            world = inst.gpus * count
            here = tried_by_world.get(world)
            if here is None:
                here = tried_by_world[world] = grid.tried_on(tried, world)
            rows.extend(grid.evaluate_pair(inst, count, strats, inst_mfu, inst_discount, here, memo))
    by_name = {i.name: i for i in instances}
    # the reason says which memory term ruled out the first setting tried (computed for this row only)
    choice = recommend(rows, spot=bool(spot), annotate=lambda r: grid.with_note(r, by_name[r.instance_type], tried),
                       max_hours=limits.get("max_hours"), budget=limits.get("budget"))
    if choice is not None and choice.row.note:
        rows[next(i for i, r in enumerate(rows) if r[:4] == choice.row[:4])] = choice.row
    if choice is not None and (caveat := published.caveat(shape, choice.row)):
        # a model of the size published runs split with tensor/pipeline parallelism: say how far off this can be
        choice = choice._replace(reason=f"{choice.reason.removesuffix('.')}; {caveat}.")
    _batch_warning(rows, work, warnings)
    _calibration_warnings(calibrated, shape, instances, warnings)
    return Estimate.build(rows=rows, recommendation=choice, work=work, settings=settings, instances=instances,
                          spot=bool(spot), mfu=mfu_value, spot_discount=discount, live_spot=live_spot, limits=limits,
                          warnings=warnings, calibrations=calibrated)


__all__ = ["estimate", "Estimate", "DEFAULT_INSTANCE_TYPES", "DEFAULT_INSTANCE_COUNTS"]
