"""The job's StoppingCondition: MaxRuntime (always explicit) and, for spot, MaxWait.

A budget (`max_cost_usd`) becomes a MaxRuntime through the on-demand hourly price × instances:
SageMaker bills at most MaxRuntime per instance, and spot is billed below on-demand, so the job
cannot cost more than the budget (spot jobs usually cost less). Capacity waits on spot are not
billed, so MaxWait adds room to wait without raising the cost ceiling.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sm_dist.contract.chain import DEFAULT_MAX_LINKS, ChainPolicy
from sm_dist.contract.sagemaker import STOP_GRACE_SECONDS
from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from sm_dist.planning.config import LaunchConfig

#: Used when neither max_runtime_s nor max_cost_usd is given: the API's own default (1 day),
#: set explicitly because ModelTrainer's default is 3600 s (docs/PLATFORM.md §1.2).
DEFAULT_MAX_RUNTIME_S = 86_400
#: The API's maximum MaxRuntimeInSeconds (28 days; docs/PLATFORM.md §1.5).
MAX_RUNTIME_LIMIT_S = 28 * 86_400
#: Spot MaxWait = this × MaxRuntime unless given: as long again to wait for capacity, unbilled.
SPOT_WAIT_FACTOR = 2
#: ... but at most this: the API documents no maximum for MaxWaitTimeInSeconds, only >= MaxRuntime;
#: sm_dist's own default stays within the 28 days documented for a job's run time
#: (docs/PLATFORM.md §1.5, §9). An explicit max_wait_s above it is sent, with a warning.
MAX_DEFAULT_WAIT_S = MAX_RUNTIME_LIMIT_S
#: A budget that buys less than this is a typo, not a plan.
MIN_RUNTIME_S = 60
#: What a job may still run, billed, after MaxRuntime: SageMaker's SIGTERM-to-SIGKILL grace
#: (`STOP_GRACE_S`) and then the upload of /opt/ml/model and the checkpoints. The
#: upload allowance (60 s) is an assumption: a few GB at the ≥100 MB/s an instance gets from S3.
STOP_GRACE_S = STOP_GRACE_SECONDS
UPLOAD_ALLOWANCE_S = 60


@dataclass(frozen=True, kw_only=True)
class StoppingCondition:
    """When the job stops, as a section (`sm_dist.fit(..., stopping=sm_dist.StoppingCondition(max_cost_usd=50))`,
    or a config file's `stopping:` mapping): MaxRuntime, MaxWait for spot, and the budget they come from. Each
    field is the flat setting of the same name; None is not given (`sm_dist.planning.settings.flatten`)."""

    max_runtime_s: int | None = None
    max_wait_s: int | None = None
    max_cost_usd: float | None = None


@dataclass(frozen=True, kw_only=True)
class Chaining:
    """What follows a job that ended early, as a section (`chaining=sm_dist.Chaining(chain=True, max_links=5)`, or
    a config file's `chaining:` mapping): the next job of a chained run (docs/guides/chains.md), or SageMaker's own
    retry (RetryStrategy). Each field is the flat setting of the same name; None is not given."""

    chain: bool | None = None
    max_links: int | None = None
    on_demand_after: int | None = None
    retry_attempts: int | None = None


@dataclass(frozen=True)
class Limits:
    """What goes into StoppingCondition, and why."""

    max_runtime_s: int
    max_wait_s: int | None
    usd_per_hour: float | None
    """On-demand price of all instances together (None: not in the catalog)."""
    basis: str
    """One sentence: where MaxRuntime came from."""
    budget_usd: float | None = None
    """max_cost_usd as given (None: none): the whole run's ceiling where one plan runs as several attempts (a Slurm
    job's requeues count it over all of them; a chain's policy carries its own)."""

    @property
    def max_cost_usd(self) -> float | None:
        """Worst case: every instance billed for the whole MaxRuntime, the stop grace and the upload
        after it, at on-demand price."""
        if self.usd_per_hour is None:
            return None
        return self.usd_per_hour * (self.max_runtime_s + STOP_GRACE_S + UPLOAD_ALLOWANCE_S) / 3600

    def to_dict(self) -> dict[str, Any]:
        cost = self.max_cost_usd
        return {
            "max_runtime_s": self.max_runtime_s,
            "max_wait_s": self.max_wait_s,
            "usd_per_hour": None if self.usd_per_hour is None else round(self.usd_per_hour, 4),
            "max_cost_usd": None if cost is None else round(cost, 2),
            "basis": self.basis,
            "budget_usd": self.budget_usd,
        }


def _runtime(config: LaunchConfig, usd_per_hour: float | None) -> tuple[int, str]:
    from_budget = None
    if config.max_cost_usd is not None:
        if usd_per_hour is None:
            raise ConfigError(
                "max_cost_usd", config.max_cost_usd,
                f"no price known for {config.instance_type} in sm_dist's catalog; set max_runtime_s instead",
            )
        from_budget = math.floor(config.max_cost_usd * 3600 / usd_per_hour) - STOP_GRACE_S - UPLOAD_ALLOWANCE_S
        if from_budget < MIN_RUNTIME_S:
            raise ConfigError(
                "max_cost_usd", config.max_cost_usd,
                f"buys only {max(0, from_budget)} s of {config.instance_count} × {config.instance_type} (${usd_per_hour:.2f}/h) "
                f"after {STOP_GRACE_S + UPLOAD_ALLOWANCE_S} s kept for the stop and the upload; raise it",
            )
    if from_budget is not None and (config.max_runtime_s is None or from_budget < config.max_runtime_s):
        return from_budget, (
            f"${config.max_cost_usd:g} budget ÷ ${usd_per_hour:.2f}/h ({config.instance_count} × "
            f"{config.instance_type} on-demand), less {STOP_GRACE_S} s stop grace and {UPLOAD_ALLOWANCE_S} s upload "
            f"after it = {from_budget / 3600:.2f} h"
        )
    if config.max_runtime_s is not None:
        return config.max_runtime_s, "max_runtime_s as given"
    return DEFAULT_MAX_RUNTIME_S, "default (no max_runtime_s or max_cost_usd given): 24 h"


def stopping_limits(config: LaunchConfig, usd_per_hour: float | None, expected_hours: float | None) -> tuple[Limits, list[str]]:
    """MaxRuntime/MaxWait for `config` and warnings (budget shorter than the estimate, ...).

    For a chain (`config.chain`) these are the first link's: a link may run 28 days unless
    max_runtime_s says less, and the budget is the whole run's (`chain_policy`)."""
    if config.chain:
        return _chain_limits(config, usd_per_hour, expected_hours)
    warnings: list[str] = []
    runtime, basis = _runtime(config, usd_per_hour)
    if runtime > MAX_RUNTIME_LIMIT_S:
        warnings.append(f"MaxRuntime capped at SageMaker's 28 days (asked {runtime / 86400:.1f} days)")
        runtime = MAX_RUNTIME_LIMIT_S
    if config.max_cost_usd is None and config.max_runtime_s is None and usd_per_hour is not None:
        warnings.append(f"no budget given: the job may run {runtime / 3600:.0f} h ≈ ${usd_per_hour * runtime / 3600:,.0f}; "
                        "set max_cost_usd or max_runtime_s")
    if expected_hours is not None and runtime < expected_hours * 3600:
        warnings.append(f"MaxRuntime {runtime / 3600:.2f} h is shorter than the estimated {expected_hours:.2f} h: "
                        "the job will be stopped before it finishes (it can resume from its checkpoint)")
    wait, wait_warnings = _wait(config, runtime)
    return Limits(runtime, wait, usd_per_hour, basis, config.max_cost_usd), warnings + wait_warnings


def _wait(config: LaunchConfig, runtime: int) -> tuple[int | None, list[str]]:
    if not config.spot:
        if config.max_wait_s is not None:
            raise ConfigError("max_wait_s", config.max_wait_s, "MaxWait applies to spot jobs only; set spot=True or drop it")
        return None, []
    if config.max_wait_s is None:
        wait = min(runtime * SPOT_WAIT_FACTOR, MAX_DEFAULT_WAIT_S)
        if wait < runtime * SPOT_WAIT_FACTOR:
            return wait, [f"MaxWait {wait / 86400:.0f} days leaves {(wait - runtime) / 3600:.1f} h to wait for spot "
                          f"capacity (sm_dist keeps its default within {MAX_DEFAULT_WAIT_S // 86400} days); set "
                          "max_wait_s to allow more"]
        return wait, []
    if config.max_wait_s < runtime:
        raise ConfigError(
            "max_wait_s", config.max_wait_s,
            f"must be >= MaxRuntime ({runtime} s): it covers the capacity wait plus the run itself",
        )
    if config.max_wait_s > MAX_DEFAULT_WAIT_S:
        return config.max_wait_s, [f"max_wait_s {config.max_wait_s / 86400:.1f} days: the API documents no maximum for "
                                   f"MaxWaitTimeInSeconds, but {MAX_DEFAULT_WAIT_S // 86400} days for a job's run time; "
                                   "SageMaker may refuse it"]
    return config.max_wait_s, []


def chain_policy(config: LaunchConfig, usd_per_hour: float | None, types: str | None = None) -> ChainPolicy:
    """The run's policy (the `sm-dist:chain` tag): links, each link's MaxRuntime cap, the run's budget,
    and its instance types when it has fallbacks (`planning.fallbacks.check_fallbacks`)."""
    return ChainPolicy(max_links=config.max_links or DEFAULT_MAX_LINKS,
                       link_runtime_s=min(config.max_runtime_s or MAX_RUNTIME_LIMIT_S, MAX_RUNTIME_LIMIT_S),
                       budget_usd=config.max_cost_usd, usd_per_hour=usd_per_hour, on_demand_after=config.on_demand_after,
                       types=types)


def _chain_limits(config: LaunchConfig, usd_per_hour: float | None,
                  expected_hours: float | None) -> tuple[Limits, list[str]]:
    """The first link's limits, and what the whole run may take."""
    policy = chain_policy(config, usd_per_hour)
    warnings = []
    if config.max_runtime_s is not None and config.max_runtime_s > MAX_RUNTIME_LIMIT_S:
        warnings.append(f"max_runtime_s is each job's in a chain: capped at SageMaker's 28 days (asked "
                        f"{config.max_runtime_s / 86400:.1f} days)")
    link = dataclasses.replace(config, max_runtime_s=policy.link_runtime_s)
    runtime, basis = _runtime(link, usd_per_hour)
    if config.max_runtime_s is None and runtime == policy.link_runtime_s:
        basis = "SageMaker's longest job, 28 days"
    basis = f"first job of a chain of at most {policy.max_links}: {basis}"
    per_link = f"{runtime / 3600:,.1f} h" if runtime >= 3600 else f"{runtime} s"
    if expected_hours is not None:
        needed = math.ceil(expected_hours * 3600 / runtime)
        if needed > policy.max_links:
            warnings.append(f"the estimate ({expected_hours:,.0f} h) needs about {needed} jobs of {per_link}: "
                            f"max_links={policy.max_links} ends the run before; raise max_links")
    if config.max_cost_usd is None and usd_per_hour is not None:
        worst = usd_per_hour * (policy.link_runtime_s + STOP_GRACE_S + UPLOAD_ALLOWANCE_S) / 3600 * policy.max_links
        warnings.append(f"no budget given: a chain of up to {policy.max_links} jobs × {per_link} may cost "
                        f"${worst:,.2f}; set max_cost_usd (the whole run's)")
    wait, wait_warnings = _wait(config, runtime)
    return Limits(runtime, wait, usd_per_hour, basis, config.max_cost_usd), warnings + wait_warnings


__all__ = ["Chaining", "Limits", "StoppingCondition", "chain_policy", "stopping_limits", "DEFAULT_MAX_RUNTIME_S", "MAX_DEFAULT_WAIT_S", "MAX_RUNTIME_LIMIT_S",
           "SPOT_WAIT_FACTOR", "STOP_GRACE_S", "UPLOAD_ALLOWANCE_S"]
