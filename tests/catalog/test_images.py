"""The SageMaker PyTorch image table (docs/PLATFORM.md §6, §7): lookups, refusals, the image that runs on an
instance, and the data's own shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sm_dist.catalog import images
from sm_dist.catalog.hardware import Hardware, hardware
from sm_dist.catalog.images import (
    default_version,
    image_for,
    known_regions,
    known_versions,
    repositories,
    training_image,
)
from sm_dist.contract import torch_support
from sm_dist.errors import CatalogError, ConfigError

DATA = Path(images.__file__).with_name("images.json")


def test_new_pytorch_repository_for_213_gpu_in_us_east_1():
    ref = training_image("2.13", "us-east-1", gpu=True)
    assert ref.uri == "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker"
    assert (ref.full_version, ref.python, ref.cuda, ref.ga, ref.end_of_patch) == (
        "2.13.0", "py312", "cu133", "2026-07-20", "2027-07-20")


def test_older_versions_come_from_pytorch_training():
    ref = training_image("2.10", "eu-west-1", gpu=True)
    assert ref.uri == "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.10-gpu-py313"
    assert ref.past_end_of_patch("2027-01-22") and not ref.past_end_of_patch("2026-11-23")


def test_cpu_image_has_no_cuda():
    ref = training_image("2.12", "us-west-2", gpu=False)
    assert ref.tag == "2.12-cpu-amzn2023-sagemaker" and ref.cuda == "" and not ref.gpu


def test_default_is_the_declared_newest_tested_version():
    assert training_image(None, "us-east-1", gpu=True).torch_version == default_version() == "2.13"


@pytest.mark.parametrize("region, account", [("eu-central-1", "763104351884"), ("af-south-1", "626614931356"),
                                             ("me-central-1", "914824155844")])
def test_region_picks_its_registry_account(region, account):
    ref = training_image("2.13", region, gpu=True)
    assert ref.account == account and ref.uri.startswith(f"{account}.dkr.ecr.{region}.amazonaws.com/")


def test_china_regions_use_the_cn_domain():
    assert ".amazonaws.com.cn/" in training_image("2.13", "cn-north-1", gpu=True).uri


@pytest.mark.parametrize("asked", ["2.13.0", "2.13.0+cu133", " 2.13 "])
def test_full_versions_map_to_their_minor(asked):
    assert training_image(asked, "us-east-1", gpu=True).torch_version == "2.13"


def test_unknown_version_is_refused_with_the_known_list():
    with pytest.raises(CatalogError) as info:
        training_image("2.5", "us-east-1", gpu=True)
    assert isinstance(info.value, ConfigError) and info.value.field == "torch_version"
    assert "2.6" in str(info.value) and "2.13" in str(info.value)


def test_an_image_below_the_runtimes_supported_torch_is_refused_at_plan_time():
    # AWS publishes it, but the runtime would refuse it at job start (sm_dist/contract/torch_support.py)
    with pytest.raises(CatalogError, match="older than sm_dist's runtime supports .*ask for 2.10") as info:
        training_image("2.8", "us-east-1", gpu=True)
    assert info.value.field == "torch_version"


@pytest.mark.parametrize("asked", ["2.13.4", "latest", "2", "2.x"])
def test_bad_or_mismatched_versions_are_refused(asked):
    with pytest.raises(CatalogError, match="torch_version"):
        training_image(asked, "us-east-1", gpu=True)


def test_unknown_region_is_refused_with_the_known_list():
    with pytest.raises(CatalogError) as info:
        training_image("2.13", "mars-north-1", gpu=True)
    assert info.value.field == "region" and "eu-west-1" in str(info.value)


def test_every_row_is_complete_dated_and_sourced():
    data = json.loads(DATA.read_text())
    assert data["default"] in known_versions()
    for row in data["images"]:
        for key in ("torch", "full_version", "repository", "python", "os", "ga", "end_of_patch"):
            assert row[key], (row["torch"], key)
        assert row["full_version"].startswith(row["torch"] + ".")
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", row["ga"]) and row["ga"] < row["end_of_patch"]
        for flavour in ("gpu", "cpu"):
            assert re.search(r"@ [0-9a-f]{40}$", row[flavour]["source"]), row[flavour]["source"]
            assert row[flavour]["tag"].startswith(row["torch"] + "-")
        assert re.fullmatch(r"cu\d{3}", row["gpu"]["cuda"])
    assert all(re.fullmatch(r"\d{12}", account) for account in data["accounts"].values())


def test_versions_and_regions_are_listed_in_order():
    versions = known_versions()
    assert versions == sorted(versions, key=lambda v: tuple(map(int, v.split("."))))
    assert versions[0] == "2.6" and "2.10" in versions and versions.index("2.10") > versions.index("2.9")
    assert "us-east-1" in known_regions() and "eu-west-1" in known_regions()


# --- which image runs on which instance (docs/PLATFORM.md §7) ---


def _hw(name: str) -> Hardware:
    found = hardware(name)
    assert found is not None
    return found


@pytest.mark.parametrize("name", ["ml.g4dn.xlarge", "ml.g5.xlarge", "ml.g6e.xlarge", "ml.p4d.24xlarge",
                                  "ml.p5.48xlarge", "ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge", "ml.g7e.2xlarge"])
def test_turing_and_newer_gpus_get_the_default_image(name):
    image, note = image_for(None, "us-east-1", _hw(name))
    assert image.torch_version == default_version() and image.gpu and note is None


def test_a_cpu_instance_gets_the_cpu_image():
    image, note = image_for(None, "us-east-1", _hw("ml.c5.xlarge"))
    assert not image.gpu and image.tag.endswith("-cpu-amzn2023-sagemaker") and note is None


def test_volta_with_a_cuda_13_image_is_refused_naming_both_facts_and_the_fix():
    with pytest.raises(ConfigError) as info:
        image_for(None, "us-east-1", _hw("ml.p3.16xlarge"))
    text = str(info.value)
    assert info.value.field == "instance_type" and info.value.value == "ml.p3.16xlarge"
    assert "V100" in text and "compute capability 7.0" in text                       # the instance's fact
    assert "2.13-cu133-amzn2023-sagemaker" in text and "7.5, 8.0" in text           # the image's fact
    assert "newer GPU" in text and "--image-uri" in text                             # the fix


def test_grace_arm_cpus_with_an_x86_image_are_refused():
    with pytest.raises(ConfigError) as info:
        image_for(None, "us-east-1", _hw("ml.p6e-gb200.36xlarge"))
    text = str(info.value)
    assert "arm64" in text and "x86_64" in text and "--image-uri" in text and "ml.p6-b200.48xlarge" in text


def test_an_explicit_torch_version_is_never_swapped_for_another():
    with pytest.raises(ConfigError) as info:
        image_for("2.12", "us-east-1", _hw("ml.p3.2xlarge"))
    assert info.value.field == "torch_version" and "2.12-cu130-amzn2023-sagemaker" in str(info.value)


def _with_a_cuda12_image(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """The table as it would be if AWS published `version` for CUDA 12.6 (PyTorch's cu126 wheels carry
    5.0 6.0 7.0 7.5 8.0 8.6 9.0, pytorch/pytorch#172352)."""
    data = json.loads(DATA.read_text())
    row = next(r for r in data["images"] if r["torch"] == version)
    row["gpu"].update(tag=f"{version}-cu126-amzn2023-sagemaker", cuda="cu126", torch_wheel="cu126",
                      torch_cuda_arch=["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], torch_ptx=None)
    images._load.cache_clear()
    monkeypatch.setattr(images, "_load", lambda: data)


def test_an_older_cuda_12_image_in_the_supported_range_is_picked_with_a_note(monkeypatch):
    _with_a_cuda12_image(monkeypatch, "2.11")
    image, note = image_for(None, "us-east-1", _hw("ml.p3.2xlarge"))
    assert image.tag == "2.11-cu126-amzn2023-sagemaker"
    assert note is not None and "default torch 2.13" in note and "compute capability 7.0" in note


def test_an_image_below_the_supported_range_is_not_picked_even_if_it_would_run(monkeypatch):
    _with_a_cuda12_image(monkeypatch, "2.9")
    assert torch_support.refusal("2.9")
    with pytest.raises(ConfigError, match="V100"):
        image_for(None, "us-east-1", _hw("ml.p3.2xlarge"))


def test_an_explicit_version_that_does_not_run_names_the_one_that_does(monkeypatch):
    _with_a_cuda12_image(monkeypatch, "2.11")
    with pytest.raises(ConfigError, match="ask for torch_version='2.11'"):
        image_for("2.13", "us-east-1", _hw("ml.p3.2xlarge"))


def test_every_image_says_its_cpu_and_every_supported_gpu_image_its_kernels():
    data = json.loads(DATA.read_text())
    for row in data["images"]:
        assert row["cpu"]["cpu_arch"] == row["gpu"]["cpu_arch"] == "x86_64"
        if torch_support.refusal(row["torch"]) is None:
            assert row["gpu"]["torch_cuda_arch"] and row["gpu"]["torch_wheel"] == "cu130", row["torch"]
    ref = training_image("2.13", "us-east-1", gpu=True)
    assert ref.torch_cuda_arch == ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0") and ref.torch_ptx == "12.0"


def test_the_repositories_the_infra_role_must_pull_from():
    assert repositories() == ["pytorch", "pytorch-training"]
