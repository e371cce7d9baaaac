"""A chain's fallback instance types: each checked like instance_type, priced, and asked for.

`fallback_instance_types` (with chain=True) names the types a run may use when instance_type gets no
capacity. Each is checked here as instance_type is (a SageMaker training type, CUDA or CPU, and,
when the model size is given, the estimate re-run on it with the plan's strategy: a type the model
does not fit is refused in one line). The run's policy carries them with their prices
(`ChainPolicy.types`), and the decision (sm_dist.contract.chain) moves a link to the next after a
capacity error. An on-demand request also lists them in `ResourceConfig.InstancePreferences`, so
SageMaker itself takes the first with capacity; the API refuses that list beside spot
(docs/PLATFORM.md §1.12), where the next link's type is the fallback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sm_dist.errors import CatalogError, ConfigError, DoesNotFitError
from sm_dist.planning import preflight
from sm_dist.planning.sizing import choose_strategy

if TYPE_CHECKING:
    from sm_dist.planning.config import LaunchConfig
    from sm_dist.vocab import Strategy

FIELD = "fallback_instance_types"


def check_fallbacks(config: LaunchConfig, region: str, strategy: Strategy, checked: bool) -> str | None:
    """`ChainPolicy.types`: the plan's type, then each fallback type with the $/h of the job's instances of
    it (when priced); None without fallbacks. ConfigError naming the type that is not a usable training
    type or that the model does not fit (`checked`: the model size was given and instance_type's fit was
    checked, so each fallback's is too)."""
    prices: dict[str, float | None] = {}
    for kind in config.fallback_instance_types:
        try:
            instance = preflight.check_instance(kind, region)[1]
        except (CatalogError, ConfigError) as exc:
            raise ConfigError(FIELD, kind, exc.fix) from None
        if checked and instance is not None:
            try:
                choose_strategy(dataclasses.replace(config, instance_type=kind, strategy=strategy,
                                                    fallback_instance_types=()), region)
            except (DoesNotFitError, ConfigError) as exc:
                raise ConfigError(FIELD, kind, f"does not fit: {exc}; leave it out or change the plan") from None
        prices[kind] = None if instance is None else round(instance.sagemaker_usd_per_hour * config.instance_count, 2)
    if not prices:
        return None
    return "/".join([config.instance_type, *(kind if usd is None else f"{kind}@{usd:g}" for kind, usd in prices.items())])


def with_preferences(request: dict[str, Any], fallbacks: tuple[str, ...]) -> dict[str, Any]:
    """An on-demand request asking for instance_type, then each fallback (InstancePreferences); a spot one
    as it is (the API refuses the list beside EnableManagedSpotTraining, docs/PLATFORM.md §1.12).

    A training plan moves to instance_type's preference (`TrainingPlanArns`): the API refuses the job-level
    TrainingPlanArn beside per-preference plans, and a plan holds instance_type only; the fallbacks run on
    demand (docs/PLATFORM.md §1.17)."""
    if not fallbacks or request.get("EnableManagedSpotTraining"):
        return request
    resources = dict(request["ResourceConfig"])
    first = resources.pop("InstanceType")
    plan = resources.pop("TrainingPlanArn", None)
    resources["InstancePreferences"] = [{"InstanceType": first, **({"TrainingPlanArns": [plan]} if plan else {})},
                                        *({"InstanceType": kind} for kind in fallbacks)]
    return {**request, "ResourceConfig": resources}


def training_plan(resources: Mapping[str, Any]) -> str | None:
    """The training plan a request's ResourceConfig names: job-level, or on its first preference."""
    if resources.get("TrainingPlanArn"):
        return str(resources["TrainingPlanArn"])
    planned = [arn for p in resources.get("InstancePreferences") or () for arn in p.get("TrainingPlanArns") or ()]
    return str(planned[0]) if planned else None


__all__ = ["check_fallbacks", "training_plan", "with_preferences"]
