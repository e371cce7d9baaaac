"""Planning a run as a chain of jobs: link names, tags, the run's budget, and what is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import sm_dist
from sm_dist.contract.chain import ChainPolicy, RunState
from sm_dist.errors import ConfigError
from sm_dist.planning.budget import MAX_RUNTIME_LIMIT_S, STOP_GRACE_S, UPLOAD_ALLOWANCE_S

ENTRYPOINTS = Path(__file__).resolve().parents[2] / "entrypoints"
BASE: dict[str, Any] = dict(source_dir=str(ENTRYPOINTS), local=True, instance_type="ml.p4d.24xlarge",
                            instance_count=2, chain=True, checkpoint_s3_uri="s3://team-bucket/ckpt")


def _plan(**kw: Any) -> sm_dist.Plan:
    return sm_dist.plan("cnn.py", **{**BASE, **kw})


def test_the_first_link_is_run_1_tagged_with_the_run_and_its_policy() -> None:
    plan = _plan(job_name="llama-pretrain", max_links=5, max_cost_usd=5000)
    assert plan.run == "llama-pretrain" and plan.job_name == "llama-pretrain-1"
    request = plan.request
    assert request["TrainingJobName"] == "llama-pretrain-1"
    tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    assert tags["sm-dist:run"] == "llama-pretrain" and tags["sm-dist:link"] == "1"
    policy = ChainPolicy.from_tag(tags["sm-dist:chain"])
    assert policy == plan.chain and policy.max_links == 5 and policy.budget_usd == 5000
    assert RunState.from_tag(tags["sm-dist:chain-state"]) == RunState()
    assert plan.to_dict()["chain"]["run"] == "llama-pretrain"
    assert "chain        run llama-pretrain" in str(plan)


def test_a_link_may_run_28_days_and_the_budget_is_the_runs() -> None:
    no_budget = _plan()
    assert no_budget.limits.max_runtime_s == MAX_RUNTIME_LIMIT_S  # not the 1-day default of a single job
    assert any("no budget given: a chain of up to 10 jobs" in w for w in no_budget.warnings)
    usd_per_hour = no_budget.limits.usd_per_hour
    assert usd_per_hour is not None
    budgeted = _plan(max_cost_usd=1000)
    assert budgeted.limits.max_runtime_s == int(1000 * 3600 / usd_per_hour) - STOP_GRACE_S - UPLOAD_ALLOWANCE_S
    assert budgeted.chain is not None and budgeted.chain.budget_usd == 1000
    long = _plan(max_runtime_s=40 * 86400)
    assert long.limits.max_runtime_s == MAX_RUNTIME_LIMIT_S
    assert any("each job's in a chain: capped at SageMaker's 28 days" in w for w in long.warnings)


def test_the_estimate_says_when_max_links_is_too_few() -> None:
    plan = _plan(instance_type="ml.p5.48xlarge", instance_count=4, strategy="auto", model="llama2-7b", tokens=2e12,
                 max_links=2, max_cost_usd=600_000)
    assert any("needs about 4 jobs" in w and "raise max_links" in w for w in plan.warnings), plan.warnings


def test_the_checkpoints_are_the_runs() -> None:
    plan = sm_dist.plan("cnn.py", **{**BASE, "local": False, "checkpoint_s3_uri": None, "infra_stack": None,
                                     "role": "arn:aws:iam::123456789012:role/sm", "region": "us-east-1",
                                     "output_s3_uri": "s3://team-bucket/out", "job_name": "r1"})
    assert plan.job_spec.checkpoint.uri == "s3://team-bucket/out/r1/checkpoints"  # the run's, not r1-1's


@pytest.mark.parametrize(("settings", "field", "message"), [
    ({"chain": False, "max_links": 3}, "max_links", "add chain=True"),
    ({"max_links": 0}, "max_links", "1..99"),
    ({"on_demand_after": 2}, "on_demand_after", "add spot=True"),
    ({"chain": False, "on_demand_after": 2, "spot": True}, "on_demand_after", "add chain=True"),
    ({"checkpoint_mode": "off"}, "checkpoint_mode", "resumes from the checkpoints"),
    ({"job_name": "x" * 62}, "job_name", "1-60 letters"),
])
def test_what_a_chain_refuses(settings: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        _plan(**settings)
    assert info.value.field == field


def test_a_single_instance_cloud_chain_needs_a_checkpoint_uri() -> None:
    with pytest.raises(ConfigError, match="each job of a chain resumes") as info:
        sm_dist.plan("cnn.py", **{**BASE, "local": False, "instance_count": 1, "checkpoint_s3_uri": None,
                                  "role": "arn:aws:iam::123456789012:role/sm", "region": "us-east-1",
                                  "output_s3_uri": "s3://team-bucket/out"})
    assert info.value.field == "checkpoint_s3_uri"


def test_fallback_types_are_checked_like_instance_type() -> None:
    """Each fallback is a usable training type the model fits (the estimate re-run on it with the plan's
    strategy); a wrong one is refused in one line naming it."""
    model = dict(model="llama2-7b", strategy="fsdp", micro_batch=1, instance_type="ml.p4de.24xlarge", instance_count=4)
    with pytest.raises(ConfigError, match=r"fallback_instance_types='ml.p4d.24xlarge': does not fit: .*per GPU"):
        _plan(**model, fallback_instance_types=["ml.p4d.24xlarge"])
    with pytest.raises(ConfigError, match=r"fallback_instance_types='ml.p9.huge': not a SageMaker training instance"):
        _plan(fallback_instance_types=["ml.p9.huge"])
    with pytest.raises(ConfigError, match=r"applies to a chain of jobs: add chain=True"):
        _plan(chain=False, fallback_instance_types=["ml.p4de.24xlarge"])
    for wrong in (["ml.p4d.24xlarge"], ["ml.g5.xlarge"] * 2, [f"ml.g5.{n}xlarge" for n in (2, 4, 8, 12, 16)]):
        with pytest.raises(ConfigError, match=r"at most 4 types, each once, other than instance_type"):
            _plan(fallback_instance_types=wrong)
    with pytest.raises(ConfigError, match=r"expected a list of instance types"):
        _plan(fallback_instance_types="ml.p4de.24xlarge")


def test_on_demand_asks_for_the_fallbacks_in_order_and_spot_moves_the_next_job() -> None:
    """On demand: ResourceConfig.InstancePreferences (SageMaker takes the first with capacity); spot, where the
    API refuses that list: InstanceType, and the policy's types for the decision's next link."""
    on_demand = _plan(instance_type="ml.p5.48xlarge", fallback_instance_types=["ml.p4de.24xlarge", "ml.p4d.24xlarge"])
    resources = on_demand.request["ResourceConfig"]
    assert [p["InstanceType"] for p in resources["InstancePreferences"]] == [
        "ml.p5.48xlarge", "ml.p4de.24xlarge", "ml.p4d.24xlarge"]
    assert "InstanceType" not in resources and resources["InstanceCount"] == 2
    assert on_demand.chain is not None and on_demand.chain.instance_types() == (
        "ml.p5.48xlarge", "ml.p4de.24xlarge", "ml.p4d.24xlarge")
    p4de = on_demand.chain.price("ml.p4de.24xlarge")
    assert p4de is not None and 0 < p4de < (on_demand.chain.usd_per_hour or 0)  # 2 × its own $/h, below p5's
    assert "fallbacks    ml.p5.48xlarge then ml.p4de.24xlarge then ml.p4d.24xlarge: each job asks" in str(on_demand)
    assert "the quota of every one must cover the job" in str(on_demand)
    tags = {t["Key"]: t["Value"] for t in on_demand.request["Tags"]}
    assert ChainPolicy.from_tag(tags["sm-dist:chain"]) == on_demand.chain
    spot = _plan(instance_type="ml.p5.48xlarge", spot=True, fallback_instance_types=["ml.p4de.24xlarge"])
    assert spot.request["ResourceConfig"]["InstanceType"] == "ml.p5.48xlarge"
    assert "InstancePreferences" not in spot.request["ResourceConfig"]
    assert "the next job after a capacity error uses the next" in str(spot)
