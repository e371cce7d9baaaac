"""Ask the estimator: which strategy (for "auto"), does the model fit, what will it cost.

Given the model size (params=, model= preset or hf_config=), every strategy is estimated on the
chosen instance type × count. "auto" takes the estimator's recommendation; an explicit strategy
that does not fit is refused with the strategies that would. Without a model size nothing can
be checked: an explicit strategy is used as given (with a warning), "auto" is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sm_dist.errors import CatalogError, ConfigError, DoesNotFitError
from sm_dist.planning.channel_data import data_load
from sm_dist.vocab import Strategy

if TYPE_CHECKING:
    from sm_dist.estimator.grid import Row
    from sm_dist.estimator.result import Estimate
    from sm_dist.planning.config import LaunchConfig

_GIB = 2**30


@dataclass(frozen=True)
class Sizing:
    """The strategy to run and, when the model size was given, the estimator's row for it."""

    strategy: Strategy
    row: Row | None
    """The estimator's row for the chosen strategy, or None (model size not given). Without
    tokens= its duration and cost are cleared (hours/cost None, steps 0): only memory was checked."""
    reason: str
    warnings: tuple[str, ...] = ()
    flops_params: int | None = None
    """Parameters a token's FLOPs count (the active ones of a mixture of experts); None: size not given."""
    params: int | None = None
    """Every parameter of the model (what its saved weights hold); None: size not given."""
    checkpoint_interval_steps: int | None = None
    """The estimate's checkpoint interval in steps: Young/Daly from its save time and MTBF
    (estimator/goodput.py); None without tokens= (no run to price)."""
    interval_defaulted: bool = False
    """True when the job checkpoints at `checkpoint_interval_steps` because none was given."""

    @property
    def expected_hours(self) -> float | None:
        return None if self.row is None or self.row.cost is None else self.row.hours

    def expected_usd(self, spot: bool = False) -> float | None:
        """The estimate of the whole run in dollars (spot or on-demand), or None."""
        if self.row is None or self.row.cost is None:
            return None
        return self.row.cost.spot if spot else self.row.cost.sagemaker


def _estimate(config: LaunchConfig, region: str, storage: str = "s3") -> Estimate:
    """The estimate of every strategy (the estimator's default) on the job's instance type and count. A
    region the catalog has no prices for is priced with the catalog's own region's prices (the plan warns
    so): a price is advice, and launching must not depend on it."""
    from sm_dist.catalog import CATALOG_REGION, regions
    from sm_dist.estimator.api import estimate

    if region not in regions():
        region = CATALOG_REGION
    work = {"tokens": config.tokens} if config.tokens is not None else {"tokens": 1}
    return estimate(
        params=config.params, model=config.model, hf_config=config.hf_config, precision=config.precision,
        seq_len=config.seq_len, micro_batch=config.micro_batch, instance_types=[config.instance_type],
        # what the job will do: sm_dist's runtime recomputes no activations itself (estimate-cost searches
        # full recompute; a launch must not count on it)
        activation_checkpointing="selective",
        instance_counts=[config.instance_count], spot=config.spot,
        region=region, budget=config.max_cost_usd if config.tokens is not None else None,
        data=data_load(config.inputs), infra_check=config.infra_check, async_checkpoint=config.async_checkpoint,
        checkpoint_storage=storage, **work,
    )


def _fits_message(row: Row, fitting: list[str], config: LaunchConfig) -> str:
    need = row.memory.total / _GIB if row.memory is not None else float("nan")
    where = f"{config.instance_count} × {config.instance_type}"
    tail = (f"strategies that fit: {', '.join(fitting)}" if fitting
            else "no strategy fits: use more instances, a larger GPU, or a smaller micro_batch")
    return (f"strategy={row.strategy.value}: the model needs ~{need:.1f} GiB per GPU, "
            f"{row.usable_bytes / _GIB:.1f} GiB usable on {where}; {tail}")


def _auto(est: Estimate, config: LaunchConfig, rows: dict[Strategy, Row], fitting: list[str],
          warnings: tuple[str, ...]) -> tuple[Row, str, tuple[str, ...]]:
    """The estimator's pick; when the budget rules every row out, the cheapest that fits
    (MaxRuntime from the budget then stops it early, resumable from its checkpoint)."""
    if est.recommendation is None and not fitting:
        raise DoesNotFitError(_fits_message(rows[Strategy.FSDP], fitting, config))
    from sm_dist.estimator.recommend import recommend

    if est.recommendation is not None:
        if config.tokens is None:  # priced for one token: a reason without figures
            unpriced = recommend(est.rows, spot=config.spot, priced=False)
            if unpriced is not None:
                return unpriced.row, unpriced.reason, warnings
        return est.recommendation.row, est.recommendation.reason, warnings
    pick = recommend(est.rows, spot=config.spot)
    if pick is None:  # fits, but nothing is priced: take the first that fits
        return rows[Strategy(fitting[0])], "first strategy that fits", warnings
    return pick.row, pick.reason, warnings + (f"no strategy finishes within max_cost_usd={config.max_cost_usd:g}; "
                                              "chose the cheapest that fits",)


def choose_strategy(config: LaunchConfig, region: str, storage: str = "s3") -> Sizing:
    """Resolve "auto", check the memory fit, and attach the estimate row. `storage`: where the job's
    checkpoints go, as the estimate prices them ("s3", or "local": the disk, sagemaker-sync)."""
    if config.params is None and config.model is None and config.hf_config is None:
        if config.strategy == "auto":
            raise ConfigError("strategy", "auto", "needs the model size: pass params=7e9, model=<preset> or hf_config=PATH")
        return Sizing(Strategy(config.strategy), None, "as given", ("model size not given (params=/model=/hf_config=): "
                                                            "memory fit and expected cost not checked",))
    try:
        est = _estimate(config, region, storage)
    except CatalogError as exc:
        if config.strategy == "auto" or exc.field != "instance_type":
            raise
        return Sizing(Strategy(config.strategy), None, "as given", (f"{config.instance_type} is not in sm_dist's catalog: "
                                                            "memory fit and expected cost not checked",))
    rows = {row.strategy: row for row in est.rows}
    fitting = [s.value for s, r in rows.items() if r.runnable and r.fits]
    warnings = tuple(w for w in est.warnings if "only a parameter count" not in w)
    if config.tokens is None:
        warnings += ("tokens= not given: the plan checks memory only, no expected duration or cost",)
    if config.strategy == "auto":
        chosen, reason, warnings = _auto(est, config, rows, fitting, warnings)
    else:
        chosen, reason = rows[Strategy(config.strategy)], "as given"
        if not chosen.runnable:
            raise ConfigError("strategy", chosen.strategy.value, chosen.reason)
        if not chosen.fits:
            raise DoesNotFitError(_fits_message(chosen, fitting, config))
    if config.tokens is None:  # estimated for 1 token: the duration, cost and failures mean nothing
        chosen = chosen._replace(steps=0, hours=None, cost=None, goodput=None)
    flops_params, params = est.model.get("flops_params"), est.model.get("params")
    interval = (chosen.goodput.interval_steps(chosen.step.total)
                if chosen.goodput is not None and chosen.step is not None else None)
    return Sizing(chosen.strategy, chosen, reason, warnings,
                  flops_params=int(flops_params) if isinstance(flops_params, int) else None,
                  params=int(params) if isinstance(params, int) else None, checkpoint_interval_steps=interval)


__all__ = ["Sizing", "choose_strategy"]
