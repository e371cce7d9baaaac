"""Live SageMaker training prices from the AWS Price List API, cached with their date.

`pricing.get_products(ServiceCode="AmazonSageMaker")` with TERM_MATCH filters on `regionCode`
and `instanceName`; training rows have a `usagetype` containing "-Train:", managed spot rows
contain "SpotTraining". The Price List API is served from us-east-1 whatever region is priced.
Any failure (no boto3, no credentials, throttling, an unexpected answer) falls back to the
catalog with a visible warning. boto3 is imported only when no client is passed in.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sm_dist.catalog import CATALOG_REGION, Instance
from sm_dist.errors import CatalogError

if TYPE_CHECKING:
    from sm_dist.estimator.inputs import PricingClient, StrPath

_log = logging.getLogger(__name__)

#: The Price List API endpoint region (it answers for every region).
PRICING_REGION = "us-east-1"
#: A cached answer older than this is fetched again: list prices change a few times a year.
CACHE_MAX_AGE_DAYS = 7
SOURCE = "AWS Price List API (pricing.get_products, ServiceCode=AmazonSageMaker)"


def cache_dir() -> Path:
    """$SM_DIST_CACHE_HOME, else ~/.cache/sm_dist (created only when something is written)."""
    return Path(os.environ.get("SM_DIST_CACHE_HOME") or Path.home() / ".cache" / "sm_dist")


def _usd(product: dict[str, Any]) -> float | None:
    """The hourly USD price of one Price List product, or None."""
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            value = float(dim.get("pricePerUnit", {}).get("USD", "0") or 0)
            if value > 0:
                return value
    return None


def fetch(client: PricingClient, region: str, name: str) -> dict[str, float]:
    """{"on_demand": $/h, "spot": $/h} for one instance type (keys missing when not listed)."""
    filters = [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "TERM_MATCH", "Field": "instanceName", "Value": name},
    ]
    found: dict[str, float] = {}
    token = None
    while True:
        kwargs: dict[str, Any] = {"ServiceCode": "AmazonSageMaker", "Filters": filters, "MaxResults": 100}
        if token:
            kwargs["NextToken"] = token
        page = client.get_products(**kwargs)
        for raw in page.get("PriceList", []):
            product = json.loads(raw) if isinstance(raw, str) else raw
            usage = product.get("product", {}).get("attributes", {}).get("usagetype", "")
            price = _usd(product)
            if price is None:
                continue
            if "SpotTraining" in usage:
                found.setdefault("spot", price)
            elif "-Train:" in usage:
                found.setdefault("on_demand", price)
        token = page.get("NextToken")
        if not token:
            return found


def _read_cache(path: Path, today: dt.date) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        age = (today - dt.date.fromisoformat(data["fetched"])).days
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data if 0 <= age <= CACHE_MAX_AGE_DAYS else None


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:  # a read-only home is no reason to fail the estimate
        _log.debug("cannot write price cache %s: %s", path, exc)


def live_prices(
    names: list[str], region: str, *, client: PricingClient | None = None, cache: Path | None = None, today: dt.date | None = None
) -> dict[str, Any]:
    """{"fetched": date, "prices": {name: {"on_demand", "spot"}}}, from the cache or the API."""
    today = today or dt.date.today()
    path = (cache or cache_dir()) / f"sagemaker-prices-{region}.json"
    cached = _read_cache(path, today)
    if cached and all(n in cached.get("prices", {}) for n in names):
        return cached
    if client is None:
        import boto3  # launch world: only when live prices are asked for without a client

        client = boto3.client("pricing", region_name=PRICING_REGION)
    prices = dict(cached.get("prices", {})) if cached else {}
    for name in names:
        prices[name] = fetch(client, region, name)
    data = {"fetched": today.isoformat(), "region": region, "source": SOURCE, "prices": prices}
    _write_cache(path, data)
    return data


def priced(
    base: list[Instance], region: str, *, client: PricingClient | None = None, cache_dir: StrPath | None = None,
    warnings: list[str],
    today: dt.date | None = None,
) -> tuple[list[Instance], dict[str, float]]:
    """Catalog instances with live SageMaker prices, and live spot discounts where listed."""
    try:
        data = live_prices([i.name for i in base], region, client=client,
                           cache=Path(cache_dir) if cache_dir else None, today=today)
    except Exception as exc:  # noqa: BLE001 - any failure: fall back, visibly
        if region != CATALOG_REGION:
            raise CatalogError("region", region, f"live prices failed ({type(exc).__name__}: {exc}) and the "
                               f"catalog has prices for {CATALOG_REGION} only; retry, or use region='{CATALOG_REGION}'") from exc
        warnings.append(f"live prices failed ({type(exc).__name__}: {exc}); using catalog prices")
        return base, {}
    out, spot = [], {}
    if region != CATALOG_REGION:
        warnings.append(f"EC2 prices (for the SageMaker premium) are the catalog's {CATALOG_REGION} prices, not {region}'s")
    for inst in base:
        row = data["prices"].get(inst.name, {})
        if "on_demand" not in row:
            if region != CATALOG_REGION:
                raise CatalogError("instance_type", inst.name, f"no SageMaker training price listed in {region}; "
                                   "pick an instance type offered there")
            warnings.append(f"{inst.name}: no live price listed; using the catalog price")
            out.append(inst)
            continue
        out.append(inst._replace(
            sagemaker_usd_per_hour=row["on_demand"], price_date=data["fetched"], price_source=SOURCE,
            sagemaker_price_derived=False, region=region,
        ))
        if row.get("spot"):
            spot[inst.name] = max(0.0, 1.0 - row["spot"] / row["on_demand"])
    return out, spot


__all__ = ["live_prices", "priced", "fetch", "cache_dir", "PRICING_REGION"]
