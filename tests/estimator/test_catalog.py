"""The instance catalog: required types, dated and sourced prices, premium steps, lookups."""

from __future__ import annotations

import pytest

from sm_dist.catalog import get_instance, list_instances, regions
from sm_dist.errors import CatalogError

REQUIRED = [
    "ml.p3.2xlarge", "ml.p3.8xlarge", "ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge",
    "ml.p5.48xlarge", "ml.p5en.48xlarge", "ml.p6-b200.48xlarge", "ml.trn1.32xlarge",
    *(f"ml.g5.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")),
    *(f"ml.g6.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")),
    *(f"ml.g6e.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")),
]


def test_every_required_type_is_there_with_a_dated_sourced_price() -> None:
    names = {i.name for i in list_instances()}
    assert set(REQUIRED) <= names
    for inst in list_instances():
        assert inst.price_date and inst.price_source, inst.name
        # a source a user can open: the pricing page's address, read or not found there
        assert "https://aws.amazon.com/sagemaker-ai/pricing/" in inst.price_source, inst.name
        assert inst.ec2_price_derived or "https://aws.amazon.com/ec2/pricing/on-demand/" in inst.ec2_price_source
        assert inst.sagemaker_usd_per_hour > inst.ec2_usd_per_hour > 0, inst.name
        assert inst.gpus >= 1 and inst.gpu_memory_bytes > 0 and inst.peak_tflops > 0


@pytest.mark.parametrize(
    ("name", "premium"),
    [("ml.p4d.24xlarge", 1.15), ("ml.p5.48xlarge", 1.15), ("ml.p3dn.24xlarge", 1.15), ("ml.p3.16xlarge", 1.15),
     ("ml.p3.8xlarge", 1.20), ("ml.p3.2xlarge", 1.25), ("ml.g5.2xlarge", 1.25), ("ml.g5.48xlarge", 1.25),
     ("ml.g5.xlarge", 1.40)],
)
def test_read_prices_show_the_premium_step(name: str, premium: float) -> None:
    assert get_instance(name).premium == pytest.approx(premium, abs=0.006)


def test_sagemaker_prices_not_found_are_derived_and_marked() -> None:
    for name in ("ml.p4de.24xlarge", "ml.p5en.48xlarge", "ml.p6-b200.48xlarge", "ml.trn1.32xlarge"):
        inst = get_instance(name)
        assert inst.sagemaker_price_derived and "derived" in inst.price_source
        assert inst.sagemaker_usd_per_hour == pytest.approx(inst.ec2_usd_per_hour * 1.15, rel=1e-3)
    p4d = get_instance("ml.p4d.24xlarge")
    assert not p4d.sagemaker_price_derived and p4d.sagemaker_usd_per_hour == 25.2513


def test_hardware_facts() -> None:
    p5 = get_instance("p5.48xlarge")  # the "ml." prefix may be left out
    assert (p5.gpus, p5.gpu_model, p5.peak_tflops, p5.network_gbps, p5.efa) == (8, "H100", 989, 3200, True)
    trn1 = get_instance("ml.trn1.32xlarge")
    assert trn1.gpus == 16 and not trn1.is_cuda
    assert get_instance("ml.p3.2xlarge").peak_dtype == "fp16"  # V100 has no bf16


def test_unknown_instance_suggests_the_closest() -> None:
    with pytest.raises(CatalogError, match="did you mean 'ml.p4d.24xlarge'") as info:
        get_instance("ml.p4.24xlarge")
    assert info.value.field == "instance_type"


def test_region_without_prices_says_how_to_fix() -> None:
    assert regions() == ["us-east-1"]
    with pytest.raises(CatalogError, match="--prices live") as info:
        get_instance("ml.p4d.24xlarge", region="eu-west-1")
    assert info.value.field == "region"


def test_catalog_is_read_once() -> None:
    assert get_instance("ml.p4d.24xlarge") is get_instance("ml.p4d.24xlarge")
