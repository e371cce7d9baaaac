"""Budget → MaxRuntime/MaxWait: arithmetic, spot rules, and the explicit default."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sm_dist.errors import ConfigError
from sm_dist.planning.budget import (
    DEFAULT_MAX_RUNTIME_S,
    MAX_RUNTIME_LIMIT_S,
    SPOT_WAIT_FACTOR,
    STOP_GRACE_S,
    UPLOAD_ALLOWANCE_S,
    stopping_limits,
)


def cfg(**kw):
    base = dict(max_cost_usd=None, max_runtime_s=None, max_wait_s=None, spot=False, chain=False,
                instance_type="ml.p4d.24xlarge", instance_count=2)
    return SimpleNamespace(**{**base, **kw})


def test_budget_becomes_runtime() -> None:
    limits, _ = stopping_limits(cfg(max_cost_usd=100), usd_per_hour=50.0, expected_hours=None)
    # 2 h of budget, less the 120 s stop grace and the 60 s upload SageMaker still bills after MaxRuntime
    assert limits.max_runtime_s == 7200 - STOP_GRACE_S - UPLOAD_ALLOWANCE_S == 7020 and limits.max_wait_s is None
    assert limits.max_cost_usd == pytest.approx(100)
    assert "budget" in limits.basis


def test_smaller_of_budget_and_runtime_wins() -> None:
    assert stopping_limits(cfg(max_cost_usd=100, max_runtime_s=3600), 50.0, None)[0].max_runtime_s == 3600
    assert stopping_limits(cfg(max_cost_usd=10, max_runtime_s=3600), 50.0, None)[0].max_runtime_s == 720 - 180


def test_spot_wait_defaults_and_bounds() -> None:
    limits, _ = stopping_limits(cfg(max_cost_usd=100, spot=True), 50.0, None)
    assert limits.max_wait_s == 7020 * SPOT_WAIT_FACTOR
    assert stopping_limits(cfg(max_runtime_s=100, max_wait_s=100, spot=True), 50.0, None)[0].max_wait_s == 100
    with pytest.raises(ConfigError, match=">= MaxRuntime"):
        stopping_limits(cfg(max_runtime_s=100, max_wait_s=99, spot=True), 50.0, None)
    with pytest.raises(ConfigError, match="spot"):
        stopping_limits(cfg(max_runtime_s=100, max_wait_s=200), 50.0, None)


def test_no_limits_is_explicit_default_with_warning() -> None:
    limits, warnings = stopping_limits(cfg(), 50.0, None)
    assert limits.max_runtime_s == DEFAULT_MAX_RUNTIME_S
    assert any("no budget" in w for w in warnings)


def test_budget_needs_a_price_and_enough_money() -> None:
    with pytest.raises(ConfigError, match="max_runtime_s instead"):
        stopping_limits(cfg(max_cost_usd=100), None, None)
    with pytest.raises(ConfigError, match="buys only"):
        stopping_limits(cfg(max_cost_usd=0.5), 50.0, None)


def test_cap_and_short_budget_warning() -> None:
    limits, warnings = stopping_limits(cfg(max_runtime_s=MAX_RUNTIME_LIMIT_S * 2), 50.0, None)
    assert limits.max_runtime_s == MAX_RUNTIME_LIMIT_S and any("28 days" in w for w in warnings)
    _, warnings = stopping_limits(cfg(max_cost_usd=100), 50.0, expected_hours=5.0)
    assert any("shorter than the estimated" in w for w in warnings)


def test_spots_default_wait_never_passes_28_days() -> None:
    """It used to be 2 × MaxRuntime unbounded: 56 days for a 28-day run (docs/PLATFORM.md §9)."""
    limits, warnings = stopping_limits(cfg(max_runtime_s=MAX_RUNTIME_LIMIT_S * 2, spot=True), 50.0, None)
    assert limits.max_runtime_s == limits.max_wait_s == MAX_RUNTIME_LIMIT_S
    assert any("leaves 0.0 h to wait for spot capacity" in w for w in warnings)
