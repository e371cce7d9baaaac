"""The fault plan of the local S3 endpoint's proxy (the proxy itself is exercised in test_s3.py)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest

from sm_dist.errors import ConfigError
from sm_dist.local.s3_endpoint import CONTROL_PATH, FaultPlan, S3Endpoint


def test_count_limits_the_faults():
    plan = FaultPlan()
    plan.set("500", count=2)
    assert [plan.next() for _ in range(4)] == ["500", "500", None, None]
    assert plan.stats()["injected"] == 2 and plan.stats()["requests"] == 4


def test_a_time_window_ends_by_itself():
    plan = FaultPlan()
    plan.set("503", seconds=0.2)
    assert plan.next() == "503"
    time.sleep(0.3)
    assert plan.next() is None and plan.stats()["kind"] is None


def test_methods_filter_spares_the_others():
    plan = FaultPlan()
    plan.set("drop", count=1, methods=["put"])
    assert plan.next("GET") is None
    assert plan.next("PUT") == "drop"


@pytest.mark.parametrize(("kind", "count", "seconds"), [("404", 1, None), ("500", None, None)])
def test_bad_fault_orders_are_config_errors(kind, count, seconds):
    with pytest.raises(ConfigError):
        FaultPlan().set(kind, count, seconds)


def test_the_control_path_refuses_a_bad_order_and_moto_without_proxy_has_no_faults():
    with S3Endpoint(faults=True) as endpoint:
        request = urllib.request.Request(endpoint.url + CONTROL_PATH, data=b'{"kind": "418"}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=30)
        assert info.value.code == 400
        assert endpoint.url != endpoint.moto_url and endpoint.url.startswith("http://127.0.0.1:")
    plain = S3Endpoint()
    with pytest.raises(ConfigError):
        plain.set_faults("500", count=1)
