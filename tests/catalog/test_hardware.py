"""The hardware facts of the catalog (docs/PLATFORM.md §7): complete for SageMaker's instance types, equal to
EC2's own description of them, and CUDA's rule for which GPUs a torch build runs on."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from sm_dist.catalog import get_instance, list_instances
from sm_dist.catalog.hardware import ARM64, X86_64, families, hardware, runs_on, split_type
from sm_dist.planning.preflight import training_instance_types

DATA = json.loads((Path(__file__).resolve().parents[2] / "sm_dist" / "catalog" / "instances.json").read_text())
CU130 = ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0")


@functools.cache
def _ec2() -> dict[str, Any]:
    """EC2 DescribeInstanceTypes, as moto 5.2.5 records it (the `ec2-api` source)."""
    moto = pytest.importorskip("moto")
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return dict(json.load(handle))


def test_every_family_sagemaker_trains_on_has_hardware_facts() -> None:
    trained = {split_type(name)[0] for name in training_instance_types()}
    assert trained - set(families()) == set()
    assert all(hardware(name) is not None for name in training_instance_types())


@pytest.mark.parametrize("name", training_instance_types())
def test_facts_read_from_ec2_equal_what_ec2_says(name: str) -> None:
    hw = hardware(name)
    assert hw is not None
    described = _ec2().get(name.removeprefix("ml."))
    if hw.source != "ec2-api":
        assert described is None, f"{name}: EC2's description exists; read the family from it"
        return
    assert described is not None
    gpus = {g["Name"] for g in (described.get("GpuInfo") or {}).get("Gpus") or []}
    assert (hw.cpu_arch,) == tuple(described["ProcessorInfo"]["SupportedArchitectures"])
    assert hw.local_nvme is bool(described["InstanceStorageSupported"])
    assert hw.efa is bool(described["NetworkInfo"]["EfaSupported"])
    assert {hw.gpu_model} - {None} == gpus
    assert (hw.accelerator is not None) is bool(described.get("NeuronInfo"))


def test_every_family_names_a_source_and_every_gpu_its_compute_capability() -> None:
    for family, row in DATA["families"].items():
        assert row["source"] in DATA["hardware_sources"], family
        assert row["cpu_arch"] in (X86_64, ARM64), family
        assert row["gpu"] is None or row["gpu"] in DATA["gpu_architectures"], family


@pytest.mark.parametrize(("name", "gpu", "capability", "cpu", "nvme", "efa"), [
    ("ml.p3.2xlarge", "V100", (7, 0), X86_64, False, False),   # EBS only (the P3 launch post)
    ("ml.p3dn.24xlarge", "V100", (7, 0), X86_64, True, True),
    ("ml.p5.48xlarge", "H100", (9, 0), X86_64, True, True),
    ("ml.p6-b300.48xlarge", "B300", (10, 3), X86_64, True, True),
    ("ml.p6e-gb200.36xlarge", "GB200", (10, 0), ARM64, True, True),  # Grace: Arm
    ("ml.g6.xlarge", "L4", (8, 9), X86_64, True, False),
    ("ml.g7e.48xlarge", "RTX PRO Server 6000", (12, 0), X86_64, True, True),
    ("ml.c5.xlarge", None, None, X86_64, False, False),
    ("ml.r5d.large", None, None, X86_64, True, False),
])
def test_the_rows_issue_22_is_about(name: str, gpu: str | None, capability: tuple[int, int] | None, cpu: str,
                                    nvme: bool, efa: bool) -> None:
    hw = hardware(name)
    assert hw is not None
    assert (hw.gpu_model, hw.compute_capability, hw.cpu_arch, hw.local_nvme, hw.efa) == (gpu, capability, cpu, nvme, efa)


def test_trainium_is_an_accelerator_not_a_gpu() -> None:
    hw = hardware("ml.trn2.48xlarge")
    assert hw is not None and hw.accelerator == "Trainium2" and hw.gpu_model is None


def test_the_priced_catalog_takes_efa_from_the_hardware_facts() -> None:
    assert get_instance("ml.p5.48xlarge").efa and not get_instance("ml.g5.4xlarge").efa
    assert get_instance("ml.g5.8xlarge").efa is hardware("ml.g5.8xlarge").efa is True  # type: ignore[union-attr]



def test_the_priced_catalog_takes_local_nvme_from_the_hardware_facts() -> None:
    # the estimator prices a checkpoint's disk from the Instance alone (estimator/goodput.py)
    for inst in list_instances():
        box = hardware(inst.name)
        assert box is not None and inst.local_nvme is box.local_nvme, inst.name
    assert get_instance("ml.p5.48xlarge").local_nvme and not get_instance("ml.p3.16xlarge").local_nvme


@pytest.mark.parametrize(("capability", "runs"), [
    ((3, 7), False),   # K80
    ((7, 0), False),   # V100: CUDA 13 builds start at 7.5
    ((7, 5), True),    # T4
    ((8, 9), True),    # L4 / L40S run the 8.6 kernels (same major, newer minor)
    ((9, 0), True),
    ((10, 3), True),   # B300 runs the 10.0 kernels
    ((11, 0), False),  # no 11.x kernels, and the PTX is 12.0
    ((12, 1), True),   # 12.0 kernels
    ((13, 0), True),   # the 12.0 PTX is compiled on load
])
def test_cudas_compatibility_rule(capability: tuple[int, int], runs: bool) -> None:
    assert runs_on(capability, CU130, "12.0") is runs


def test_without_ptx_a_newer_major_does_not_run() -> None:
    assert not runs_on((10, 0), ("7.0", "8.0", "9.0"), None)
    assert runs_on((9, 0), ("7.0", "8.0", "9.0"), None)


def test_pid1s_efa_lists_hold_only_efa_types_and_know_the_newest() -> None:
    from sm_dist.contract.container import EFA_RDMA_TYPES, EFA_TYPES

    assert all(hardware(name).efa for name in EFA_TYPES)  # type: ignore[union-attr]
    assert {"ml.p6-b300.48xlarge", "ml.p6e-gb200.36xlarge", "ml.p6-b200.48xlarge"} <= EFA_RDMA_TYPES


def test_the_catalogs_python_form_is_instances_json() -> None:
    """The catalog reads `_instances.py` (bytecode, no json parse on a command's path); instances.json is what
    people edit. Regenerate after an edit: python tools/catalog_data.py"""
    from sm_dist import catalog
    from sm_dist.catalog._instances import DATA

    source = json.loads(Path(catalog._DATA).read_text(encoding="utf-8"))
    assert DATA == source, "sm_dist/catalog/_instances.py differs from instances.json: run python tools/catalog_data.py"
