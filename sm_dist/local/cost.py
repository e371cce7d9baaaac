"""What a local run costs (nothing) and what the same run would have cost on SageMaker.

The comparison bills the run's wall-clock time on the chosen instance type and count at the
catalog's on-demand price, which is how SageMaker bills (BillableTimeInSeconds × InstanceCount,
docs/PLATFORM.md §1.5). It is a yardstick, not a forecast: on GPUs the steps run faster, and SageMaker's
instance start-up (not billed) is not part of a local run. The plan's own estimate, when there
is one, is the forecast.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sm_dist.errors import CatalogError

#: Local mode runs on this machine: no SageMaker charge.
LOCAL_USD = 0.0


@dataclass(frozen=True)
class LocalCost:
    """Cost of a local run, and its SageMaker equivalent."""

    local_usd: float
    instance_type: str
    instance_count: int
    billable_seconds: float
    usd_per_hour: float | None
    sagemaker_usd: float | None
    price_date: str | None
    price_source: str | None

    @property
    def usd(self) -> float:
        """What this run cost, like the cloud `JobCost.usd`: nothing."""
        return self.local_usd

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def __str__(self) -> str:
        """The two lines the run's summary ends with (what `sm-dist cost NAME` prints for a local job)."""
        seconds = self.billable_seconds / self.instance_count if self.instance_count else self.billable_seconds
        usd = ("unknown (instance type not in the catalog)" if self.sagemaker_usd is None
               else f"${self.sagemaker_usd:,.4f}")
        rate = f" (${self.usd_per_hour}/h, prices of {self.price_date})" if self.usd_per_hour else ""
        return (f"cost here       ${self.local_usd:.2f}\non SageMaker    {usd} for the same {seconds:g} s on "
                f"{self.instance_count} × {self.instance_type}{rate}")


def local_cost(instance_type: str, instance_count: int, seconds: float) -> LocalCost:
    """Price `seconds` of `instance_count` × `instance_type` from the catalog (None if unknown)."""
    from sm_dist import catalog

    try:
        inst = catalog.get_instance(instance_type)
    except CatalogError:
        inst = None
    rate = inst.sagemaker_usd_per_hour if inst else None
    usd = rate * instance_count * seconds / 3600.0 if rate is not None else None
    return LocalCost(
        local_usd=LOCAL_USD,
        instance_type=instance_type,
        instance_count=instance_count,
        billable_seconds=round(seconds * instance_count, 1),
        usd_per_hour=rate,
        sagemaker_usd=round(usd, 4) if usd is not None else None,
        price_date=inst.price_date if inst else None,
        price_source=inst.price_source if inst else None,
    )
