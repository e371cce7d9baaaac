"""What a finished job cost, from DescribeTrainingJob and sm_dist's tags, and how to print it.

SageMaker bills BillableTimeInSeconds per instance at the on-demand rate; for managed spot the
billable time is already reduced by the saving, which AWS reports as 1 − billable/training
(docs/PLATFORM.md §1.5). A warm pool kept after the job is billed too, per instance at the same price
(`WarmPoolStatus.ResourceRetainedBillableTimeInSeconds`, §1.13): its own line, and part of `usd`.
Prices come from sm_dist's catalog (its region's when the job's is missing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sm_dist.catalog import CATALOG_REGION, get_instance, regions
from sm_dist.errors import CatalogError
from sm_dist.planning.tags import TAG_ESTIMATE, TAG_MAX_COST

if TYPE_CHECKING:
    from IPython.lib.pretty import RepresentationPrinter


@dataclass(frozen=True)
class JobCost:
    """What a job cost: billable seconds × instances × price, next to the estimate."""

    name: str
    instance_type: str
    instance_count: int
    billable_s: int | None
    training_s: int | None
    usd_per_hour: float | None
    estimate_usd: float | None
    max_cost_usd: float | None
    spot: bool
    retained_s: int | None = None
    """Seconds the job's warm pool was kept after it (billed × instances); None: it kept none."""

    @property
    def training_usd(self) -> float | None:
        """The job itself: billable seconds × instances × price."""
        if self.billable_s is None or self.usd_per_hour is None:
            return None
        return self.billable_s / 3600 * self.instance_count * self.usd_per_hour

    @property
    def retained_usd(self) -> float | None:
        """Its warm pool after it: retained seconds × instances × price (None: no pool, or no price)."""
        if self.retained_s is None or self.usd_per_hour is None:
            return None
        return self.retained_s / 3600 * self.instance_count * self.usd_per_hour

    @property
    def usd(self) -> float | None:
        """The bill: the job, and its warm pool's retained time."""
        training = self.training_usd
        return None if training is None else training + (self.retained_usd or 0.0)

    @property
    def spot_savings(self) -> float | None:
        """1 − billable/training (docs/PLATFORM.md §1.5); None when unknown."""
        if not self.spot or not self.billable_s or not self.training_s:
            return None
        return 1 - self.billable_s / self.training_s

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "usd": self.usd, "training_usd": self.training_usd, "retained_usd": self.retained_usd,
                "spot_savings": self.spot_savings}

    def __str__(self) -> str:
        return render_cost(self)

    def _repr_pretty_(self, printer: RepresentationPrinter, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        """The printed bill, line for line, as a table."""
        from sm_dist.markup import text_table

        return text_table(str(self), title=False)


def _float(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _price(instance_type: str, region: str | None) -> float | None:
    try:
        return get_instance(instance_type, region if region in regions() else CATALOG_REGION).sagemaker_usd_per_hour
    except CatalogError:
        return None


def job_cost(name: str, desc: Mapping[str, Any], tags: Mapping[str, str], region: str | None) -> JobCost:
    """A JobCost from a DescribeTrainingJob response and the job's tags."""
    resources = desc.get("ResourceConfig", {})
    instance_type = resources.get("SelectedInstanceType") or resources.get("InstanceType", "?")  # Selected*: preferences
    return JobCost(
        name=name, instance_type=instance_type, instance_count=int(resources.get("InstanceCount", 1)),
        billable_s=desc.get("BillableTimeInSeconds"), training_s=desc.get("TrainingTimeInSeconds"),
        usd_per_hour=_price(instance_type, region), estimate_usd=_float(tags.get(TAG_ESTIMATE)),
        max_cost_usd=_float(tags.get(TAG_MAX_COST)), spot=bool(desc.get("EnableManagedSpotTraining")),
        retained_s=(desc.get("WarmPoolStatus") or {}).get("ResourceRetainedBillableTimeInSeconds"),
    )


def render_cost(cost: JobCost) -> str:
    """Several lines: the bill, the spot saving, the estimate and the ceiling."""
    lines = [f"job          {cost.name}: {cost.instance_count} × {cost.instance_type}{' (spot)' if cost.spot else ''}"]
    if cost.billable_s is None:
        lines.append("billable     not reported yet (the job has not finished, or the API omitted it)")
    else:
        lines.append(f"billable     {cost.billable_s} s × {cost.instance_count} instances"
                     + (f" (training {cost.training_s} s)" if cost.training_s else ""))
    if cost.retained_s is not None:
        usd = f" = ${cost.retained_usd:,.2f}" if cost.retained_usd is not None else ""
        lines.append(f"warm pool    {cost.retained_s} s retained × {cost.instance_count} instances{usd}")
    if cost.usd is not None:
        pool = f" (job ${cost.training_usd:,.2f} + warm pool ${cost.retained_usd:,.2f})" if cost.retained_usd is not None else ""
        lines.append(f"cost         ${cost.usd:,.2f} at ${cost.usd_per_hour:.2f}/h per instance{pool}")
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


__all__ = ["JobCost", "job_cost", "render_cost"]
