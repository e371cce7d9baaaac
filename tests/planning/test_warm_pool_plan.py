"""keep_alive_s: the plan carries ResourceConfig.KeepAlivePeriodInSeconds, and refuses what SageMaker refuses
(docs/PLATFORM.md §1.13): outside the service model's range, with spot, with a heterogeneous cluster."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from _project import CKPT_BUCKET, ROLE_ARN

import sm_dist
from sm_dist.errors import ConfigError
from sm_dist.planning import request as request_mod
from sm_dist.planning.config import KEEP_ALIVE_MAX_S
from sm_dist.planning.constraints import KEEP_ALIVE_GUIDE_MAX_S, warm_pool_rules

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GOOD = dict(instance_type="ml.g5.xlarge", instance_count=2, strategy="ddp", role=ROLE_ARN,
            checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/run", max_runtime_s=3600)


def _plan(source_dir: Path, **overrides: Any) -> Any:
    return sm_dist.plan("train.py", **{**GOOD, "source_dir": str(source_dir), **overrides})  # type: ignore[arg-type]


def test_the_plan_carries_the_keep_alive(aws: str, source_dir: Path) -> None:
    plan = _plan(source_dir, keep_alive_s=1800)
    assert plan.request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 1800
    assert not any("keep_alive_s" in w for w in plan.warnings)
    assert "KeepAlivePeriodInSeconds" not in _plan(source_dir).request["ResourceConfig"]


def test_the_local_plan_carries_it_too(source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", local=True, instance_type="ml.g5.xlarge", instance_count=2,
                        source_dir=str(source_dir), keep_alive_s=600)
    assert plan.request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 600
    # what the pool may add to the plan's "at most": 600 s of both instances at the plan's price
    assert plan.limits.usd_per_hour is not None
    assert f"(up to ${600 / 3600 * plan.limits.usd_per_hour:,.2f} beyond the job's)" in str(plan)


def test_the_range_is_the_service_models() -> None:
    from sm_dist.planning.preflight import sagemaker_service_model

    shape = sagemaker_service_model().shape_for("KeepAlivePeriodInSeconds")
    assert (shape.metadata["min"], shape.metadata["max"]) == (0, KEEP_ALIVE_MAX_S)


@pytest.mark.parametrize("value", [-1, KEEP_ALIVE_MAX_S + 1, 99999, 1.5, "1800"])
def test_a_value_outside_the_range_is_refused_when_the_settings_are_read(source_dir: Path, value: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        sm_dist.plan("train.py", local=True, instance_type="ml.g5.xlarge", source_dir=str(source_dir), keep_alive_s=value)
    assert caught.value.field == "keep_alive_s" and "0..21600" in str(caught.value)


def test_spot_is_refused_with_the_reason(aws: str, source_dir: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _plan(source_dir, keep_alive_s=1800, spot=True)
    assert caught.value.field == "keep_alive_s"
    assert "no warm pool for managed spot training" in str(caught.value) and "--spot" in str(caught.value)
    _plan(source_dir, keep_alive_s=0, spot=True)  # 0 asks for no pool


def test_a_heterogeneous_cluster_is_refused() -> None:
    request = {"ResourceConfig": {"KeepAlivePeriodInSeconds": 60,
                                  "InstanceGroups": [{"InstanceType": "ml.c5.xlarge", "InstanceCount": 1,
                                                      "InstanceGroupName": "a"}]}}
    with pytest.raises(ConfigError, match="heterogeneous cluster"):
        warm_pool_rules(request)


def test_beyond_the_guides_hour_is_sent_with_a_warning(aws: str, source_dir: Path) -> None:
    plan = _plan(source_dir, keep_alive_s=KEEP_ALIVE_GUIDE_MAX_S + 1)
    assert plan.request["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 3601
    assert any(w.startswith("keep_alive_s 3601: the API takes up to 21600 s") for w in plan.warnings)


def test_the_sdk_serializes_it_into_resource_config(aws: str) -> None:
    from sm_dist.planning.channels import Channel

    spec = request_mod.RequestSpec(
        job_name="sm-dist-warm-1", role_arn=ROLE_ARN, instance_type="ml.g5.xlarge", instance_count=2,
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8-gpu-py312", max_runtime_s=600,
        output_s3_uri="s3://out/sm-dist", channels={"code": Channel(source="s3://out/sm-dist/code/")})
    assert "KeepAlivePeriodInSeconds" not in request_mod.build_request(spec)["ResourceConfig"]
    warm = request_mod.build_request(dataclasses.replace(spec, keep_alive_s=900))
    assert warm["ResourceConfig"] == {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30,
                                      "KeepAlivePeriodInSeconds": 900}
