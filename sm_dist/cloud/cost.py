"""What a finished job cost, from DescribeTrainingJob and sm_dist's tags, and how to print it.

SageMaker bills BillableTimeInSeconds per instance at the on-demand rate; for managed spot the
billable time is already reduced by the saving, which AWS reports as 1 − billable/training
(docs/PLATFORM.md §1.5). Prices come from sm_dist's catalog (its region's when the job's is missing).
"""

from __future__ import annotations

from typing import Any


def _float(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _price(instance_type: str, region: str | None) -> float | None:
    from sm_dist.catalog import CATALOG_REGION, get_instance, regions
    from sm_dist.errors import CatalogError

    try:
        return get_instance(instance_type, region if region in regions() else CATALOG_REGION).sagemaker_usd_per_hour
    except CatalogError:
        return None


def job_cost(name: str, desc: dict[str, Any], tags: dict[str, str], region: str | None) -> Any:
    """A JobCost from a DescribeTrainingJob response and the job's tags."""
    from sm_dist.launch.job import TAG_ESTIMATE, TAG_MAX_COST, JobCost

    resources = desc.get("ResourceConfig", {})
    instance_type = resources.get("InstanceType", "?")
    return JobCost(
        name=name, instance_type=instance_type, instance_count=int(resources.get("InstanceCount", 1)),
        billable_s=desc.get("BillableTimeInSeconds"), training_s=desc.get("TrainingTimeInSeconds"),
        usd_per_hour=_price(instance_type, region), estimate_usd=_float(tags.get(TAG_ESTIMATE)),
        max_cost_usd=_float(tags.get(TAG_MAX_COST)), spot=bool(desc.get("EnableManagedSpotTraining")),
    )


def render_cost(cost: Any) -> str:
    """Several lines: the bill, the spot saving, the estimate and the ceiling."""
    lines = [f"job          {cost.name}: {cost.instance_count} × {cost.instance_type}{' (spot)' if cost.spot else ''}"]
    if cost.billable_s is None:
        lines.append("billable     not reported yet (the job has not finished, or the API omitted it)")
    else:
        lines.append(f"billable     {cost.billable_s} s × {cost.instance_count} instances"
                     + (f" (training {cost.training_s} s)" if cost.training_s else ""))
    if cost.usd is not None:
        lines.append(f"cost         ${cost.usd:,.2f} at ${cost.usd_per_hour:.2f}/h per instance")
    elif cost.usd_per_hour is None:
        lines.append(f"cost         unknown: no price for {cost.instance_type} in sm_dist's catalog")
    if cost.spot_savings is not None:
        lines.append(f"spot saving  {cost.spot_savings:.0%} (1 − billable/training)")
    if cost.estimate_usd is not None:
        ratio = f" (actual/estimate {cost.usd / cost.estimate_usd:.2f})" if cost.usd and cost.estimate_usd else ""
        lines.append(f"estimate     ${cost.estimate_usd:,.2f} before launch{ratio}")
    if cost.max_cost_usd is not None:
        lines.append(f"ceiling      ${cost.max_cost_usd:,.2f} (MaxRuntime × instances × price)")
    return "\n".join(lines)


__all__ = ["job_cost", "render_cost"]
