"""The catalog of SageMaker training instance types: hardware and prices, as data.

The data lives in `instances.json` next to this module (one row per priced instance type, the date
and source of every price, whether a SageMaker price was read or derived from EC2; the hardware
facts of every instance family, read by `hardware.py`). The JSON is what people edit; the catalog reads its
Python form, `_instances.py` (bytecode: no json import or parse on a command's path), which
`python tools/catalog_data.py` writes from it and tests/catalog/test_hardware.py holds equal to it.
Standard library only (core world).
"""

from __future__ import annotations

import functools
import os

from sm_dist._records import TYPE_CHECKING, Record
from sm_dist.errors import CatalogError
from sm_dist.vocab import did_you_mean

if TYPE_CHECKING:
    from typing import Any

# the source of `_instances.py` (os.path, not pathlib: pathlib's imports are a visible part of `estimate-cost`'s start-up)
_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "instances.json")
_GIB = 2**30

#: The region whose prices the catalog holds; other regions need live prices.
CATALOG_REGION = "us-east-1"


# A NamedTuple, not a frozen dataclass: just as immutable, and importing `dataclasses` (with
# inspect, ast, dis) is a visible share of `sm-dist estimate-cost` start-up.
class Instance(Record):
    """One SageMaker training instance type in one region."""

    name: str  #: e.g. "ml.p4d.24xlarge"
    gpus: int  #: accelerators per instance
    gpu_model: str  #: "A100", "H100", ... ("Trainium1" for trn1)
    gpu_memory_bytes: int  #: per accelerator, nominal (CUDA sees slightly less)
    peak_tflops: float  #: dense bf16 TFLOP/s per accelerator (fp16 where there is no bf16)
    peak_dtype: str  #: "bf16" or "fp16": what peak_tflops is measured in
    intra_node_gbytes_per_s: float  #: GPU-to-GPU bandwidth per GPU, one direction (NVLink or PCIe)
    interconnect: str  #: "NVLink 3 / NVSwitch", "PCIe Gen4 x16", ...
    network_gbps: float  #: inter-node network per instance, Gb/s
    efa: bool  #: Elastic Fabric Adapter available
    vcpus: int
    host_ram_bytes: int
    sagemaker_usd_per_hour: float  #: on-demand training price per instance-hour
    ec2_usd_per_hour: float  #: the same hardware on EC2 on-demand
    price_date: str  #: when the prices were read (ISO date or month)
    price_source: str  #: where the SageMaker price comes from
    sagemaker_price_derived: bool  #: True: derived from EC2 × premium step, not read
    region: str = CATALOG_REGION
    ec2_price_derived: bool = False  #: True: derived from SageMaker ÷ premium step, not read
    ec2_price_source: str = ""
    local_nvme: bool = False  #: local NVMe instance storage instead of an EBS volume (the family's hardware facts)

    @property
    def is_cuda(self) -> bool:
        """Whether the sm_dist runtime (CUDA/NCCL PyTorch) can run on this instance."""
        return not self.gpu_model.startswith("Trainium")

    @property
    def premium(self) -> float:
        """SageMaker price ÷ EC2 price."""
        return self.sagemaker_usd_per_hour / self.ec2_usd_per_hour


def _load() -> dict[str, Any]:
    """instances.json as parsed, read from its Python form (`_instances`, written by tools/catalog_data.py):
    bytecode, so a command that only prices needs neither `json` nor a parse."""
    from sm_dist.catalog._instances import DATA

    return DATA


def _build(row: dict[str, Any], gpus: dict[str, Any], region: str) -> Instance:
    gpu = gpus[row["gpu"]]
    price = row["prices"][region]
    return Instance(
        name=row["name"],
        gpus=int(row["gpus"]),
        gpu_model=gpu["model"],
        gpu_memory_bytes=int(gpu["memory_gib"] * _GIB),
        peak_tflops=float(gpu["peak_tflops"]),
        peak_dtype=gpu["peak_dtype"],
        intra_node_gbytes_per_s=float(gpu["intra_node_gbytes_per_s"]),
        interconnect=gpu["interconnect"],
        network_gbps=float(row["network_gbps"]),
        efa=_size(row["name"]) in _family(row["name"]).get("efa", ()),
        vcpus=int(row["vcpus"]),
        host_ram_bytes=int(row["host_ram_gib"] * _GIB),
        sagemaker_usd_per_hour=float(price["sagemaker_usd_per_hour"]),
        ec2_usd_per_hour=float(price["ec2_usd_per_hour"]),
        price_date=price["date"],
        price_source=price["sagemaker_source"],
        sagemaker_price_derived=bool(price["sagemaker_derived"]),
        region=region,
        ec2_price_derived=bool(price["ec2_derived"]),
        ec2_price_source=price["ec2_source"],
        local_nvme=bool(_family(row["name"]).get("local_nvme", False)),
    )


def _family(name: str) -> dict[str, Any]:
    """The hardware facts of `name`'s family (`hardware.py`; docs/PLATFORM.md §7): EFA sizes, local NVMe."""
    facts: dict[str, Any] = _load()["families"].get(name.removeprefix("ml.").partition(".")[0], {})
    return facts


def _size(name: str) -> str:
    return name.removeprefix("ml.").partition(".")[2]


@functools.cache
def _by_name(region: str) -> dict[str, Instance]:
    data = _load()
    return {row["name"]: _build(row, data["gpus"], region) for row in data["instances"] if region in row["prices"]}


def regions() -> list[str]:
    """Regions the catalog has prices for."""
    return list(_regions())


@functools.cache
def _regions() -> tuple[str, ...]:  # read once: every get_instance checks its region (32 for --instance-type all)
    return tuple(sorted({region for row in _load()["instances"] for region in row["prices"]}))


def list_instances(region: str = CATALOG_REGION) -> list[Instance]:
    """Every instance type with a price in `region`, in catalog order."""
    _check_region(region)
    return list(_by_name(region).values())


def get_instance(name: str, region: str = CATALOG_REGION) -> Instance:
    """The instance type `name` ("ml.p4d.24xlarge"; the "ml." prefix may be left out)."""
    _check_region(region)
    table = _by_name(region)
    key = str(name).strip().lower()
    if not key.startswith("ml."):
        key = "ml." + key
    if key in table:
        return table[key]
    raise CatalogError(
        "instance_type",
        name,
        f"unknown SageMaker training instance type{did_you_mean(key, list(table))}; "
        f"known: {', '.join(table)}",
    )


def _check_region(region: str) -> None:
    if region not in _regions():
        known = regions()
        raise CatalogError(
            "region",
            region,
            f"the catalog has prices for {', '.join(known)} only{did_you_mean(region, known)}; "
            "use prices='live' (--prices live) to ask the AWS Price List API for this region",
        )


__all__ = ["Instance", "get_instance", "list_instances", "regions", "CATALOG_REGION"]
