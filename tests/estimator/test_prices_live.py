"""Live prices from the AWS Price List API (botocore Stubber: moto does not mock `pricing`)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

boto3 = pytest.importorskip("boto3")
from botocore.stub import ANY, Stubber  # noqa: E402

import sm_dist  # noqa: E402
from sm_dist.catalog import get_instance  # noqa: E402
from sm_dist.errors import CatalogError  # noqa: E402
from sm_dist.estimator.prices_live import live_prices, priced  # noqa: E402

P4D = "ml.p4d.24xlarge"


def _product(name: str, usage: str, usd: str) -> str:
    return json.dumps({
        "product": {"productFamily": "ML Instance",
                    "attributes": {"regionCode": "us-east-1", "instanceName": name, "usagetype": usage}},
        "serviceCode": "AmazonSageMaker",
        "terms": {"OnDemand": {"SKU.T": {"priceDimensions": {"SKU.T.D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}},
    })


def _client() -> tuple[object, Stubber]:
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    return client, Stubber(client)


def _expect(stub: Stubber, name: str, products: list[str], token: str | None = None, region: str = "us-east-1") -> None:
    params = {"ServiceCode": "AmazonSageMaker", "MaxResults": 100, "Filters": [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "TERM_MATCH", "Field": "instanceName", "Value": name}]}
    response = {"FormatVersion": "aws_v1", "PriceList": products}
    if token:
        response["NextToken"] = token
    stub.add_response("get_products", response, params)


def test_training_and_spot_rows_are_read_and_cached(tmp_path: Path) -> None:
    client, stub = _client()
    _expect(stub, P4D, [_product(P4D, "USE1-Notebk:ml.p4d.24xlarge", "30.0"),
                        _product(P4D, "USE1-Train:ml.p4d.24xlarge", "24.0"),
                        _product(P4D, "USE1-SpotTraining:ml.p4d.24xlarge", "9.6")])
    today = dt.date(2026, 11, 21)
    with stub:
        data = live_prices([P4D], "us-east-1", client=client, cache=tmp_path, today=today)
    stub.assert_no_pending_responses()
    assert data["prices"][P4D] == {"on_demand": 24.0, "spot": 9.6}
    cached = json.loads((tmp_path / "sagemaker-prices-us-east-1.json").read_text())
    assert cached["fetched"] == "2026-11-21"
    # within the cache age: no API call at all (an empty stubber would fail on any call)
    client2, stub2 = _client()
    with stub2:
        again = live_prices([P4D], "us-east-1", client=client2, cache=tmp_path, today=today + dt.timedelta(days=3))
    assert again["prices"][P4D]["on_demand"] == 24.0


def test_pagination_is_followed(tmp_path: Path) -> None:
    client, stub = _client()
    _expect(stub, P4D, [_product(P4D, "USE1-Notebk:x", "1.0")], token="page2")
    params = {"ServiceCode": "AmazonSageMaker", "MaxResults": 100, "NextToken": "page2", "Filters": ANY}
    stub.add_response("get_products", {"PriceList": [_product(P4D, "USE1-Train:ml.p4d.24xlarge", "24.0")]}, params)
    with stub:
        data = live_prices([P4D], "us-east-1", client=client, cache=tmp_path)
    assert data["prices"][P4D]["on_demand"] == 24.0


def test_estimate_uses_live_prices_and_live_spot_discount(tmp_path: Path) -> None:
    client, stub = _client()
    _expect(stub, P4D, [_product(P4D, "USE1-Train:ml.p4d.24xlarge", "20.0"),
                        _product(P4D, "USE1-SpotTraining:ml.p4d.24xlarge", "6.0")])
    with stub:
        est = sm_dist.estimate(model="gpt2", tokens=1e9, instance_types=[P4D], instance_counts=[1], strategies=["ddp"],
                               prices="live", pricing_client=client, cache_dir=tmp_path)
    row = est.rows[0]
    assert row.cost.sagemaker == pytest.approx(row.hours * 20.0)
    assert row.cost.spot == pytest.approx(row.cost.spot_hours * 20.0 * 0.3)
    assert "Price List API" in est.assumptions["prices"][P4D]["source"]


def test_any_failure_falls_back_to_the_catalog_with_a_warning(tmp_path: Path) -> None:
    client, stub = _client()
    stub.add_client_error("get_products", service_error_code="ThrottlingException", http_status_code=400)
    warnings: list[str] = []
    with stub:
        instances, spot = priced([get_instance(P4D)], "us-east-1", client=client, cache_dir=tmp_path, warnings=warnings)
    assert instances == [get_instance(P4D)] and spot == {}
    assert "live prices failed" in warnings[0] and "catalog" in warnings[0]


def test_other_region_without_live_prices_is_a_catalog_error(tmp_path: Path) -> None:
    client, stub = _client()
    stub.add_client_error("get_products", service_error_code="AccessDeniedException", http_status_code=403)
    with stub, pytest.raises(CatalogError) as info:
        priced([get_instance(P4D)], "eu-west-1", client=client, cache_dir=tmp_path, warnings=[])
    assert info.value.field == "region"


def test_unlisted_instance_keeps_the_catalog_price(tmp_path: Path) -> None:
    client, stub = _client()
    _expect(stub, P4D, [])
    warnings: list[str] = []
    with stub:
        instances, _ = priced([get_instance(P4D)], "us-east-1", client=client, cache_dir=tmp_path, warnings=warnings)
    assert instances[0].sagemaker_usd_per_hour == get_instance(P4D).sagemaker_usd_per_hour
    assert "no live price" in warnings[0]


def test_stale_cache_is_fetched_again(tmp_path: Path) -> None:
    (tmp_path / "sagemaker-prices-us-east-1.json").write_text(json.dumps(
        {"fetched": "2020-01-01", "prices": {P4D: {"on_demand": 1.0}}}))
    client, stub = _client()
    _expect(stub, P4D, [_product(P4D, "USE1-Train:ml.p4d.24xlarge", "24.0")])
    with stub:
        data = live_prices([P4D], "us-east-1", client=client, cache=tmp_path)
    assert data["prices"][P4D]["on_demand"] == 24.0
