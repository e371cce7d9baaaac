"""What each SageMaker training instance type is made of, as the plan needs it (docs/PLATFORM.md §7).

Per instance family (`families` in `instances.json`, every family SageMaker's CreateTrainingJob
accepts): the GPU model, the CPU architecture, whether it has local NVMe instance storage, and
the sizes with EFA; per GPU model (`gpu_architectures`) its architecture and CUDA compute
capability. Each family names the source it was read from. `runs_on` is CUDA's rule for
whether a torch build has kernels for a GPU. Standard library only (core world).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from sm_dist._records import TYPE_CHECKING, Record
from sm_dist.catalog import _load

if TYPE_CHECKING:
    from typing import Any

#: CPU architecture names, as EC2's DescribeInstanceTypes spells them.
X86_64 = "x86_64"
ARM64 = "arm64"


class Hardware(Record):
    """The hardware of one SageMaker training instance type."""

    instance_type: str  #: "ml.p3.2xlarge"
    gpu_model: str | None  #: "V100"; None without an NVIDIA GPU
    gpu_architecture: str | None  #: "Volta"
    compute_capability: tuple[int, int] | None  #: (7, 0)
    accelerator: str | None  #: a non-CUDA accelerator ("Trainium1"); None otherwise
    cpu_arch: str  #: "x86_64" or "arm64"
    local_nvme: bool  #: local NVMe instance storage instead of an EBS volume
    efa: bool  #: Elastic Fabric Adapter on this size
    source: str  #: where the family's facts were read (instances.json `hardware_sources`)

    @property
    def gpu_text(self) -> str:
        """"V100 GPUs (Volta, compute capability 7.0)"."""
        if self.gpu_model is None:
            return "no NVIDIA GPU"
        cc = ".".join(map(str, self.compute_capability)) if self.compute_capability else "unknown"
        return f"{self.gpu_model} GPUs ({self.gpu_architecture}, compute capability {cc})"


def parse_capability(text: str) -> tuple[int, int]:
    """(10, 3) from "10.3"."""
    major, minor = str(text).split(".")
    return int(major), int(minor)


def runs_on(capability: tuple[int, int], sass: Sequence[str], ptx: str | None) -> bool:
    """Whether a CUDA build with kernels for `sass` (and PTX for `ptx`) runs on a GPU of `capability`.

    CUDA's binary compatibility (docs/PLATFORM.md §7.3): a kernel built for X.y runs on X.z for
    z >= y (same major), and PTX for X.y is compiled on load for any GPU of X.y or newer.
    """
    built = [parse_capability(s) for s in sass]
    if any(b[0] == capability[0] and b[1] <= capability[1] for b in built):
        return True
    return ptx is not None and parse_capability(ptx) <= capability


def split_type(instance_type: str) -> tuple[str, str]:
    """("p6-b200", "48xlarge") from "ml.p6-b200.48xlarge" (the "ml." prefix may be left out)."""
    parts = str(instance_type).strip().lower().removeprefix("ml.").split(".")
    return (parts[0], parts[1]) if len(parts) == 2 else ("", "")


@functools.cache
def _families() -> dict[str, Any]:
    return dict(_load()["families"])


def families() -> list[str]:
    """Instance families the catalog has hardware facts for."""
    return list(_families())


def hardware(instance_type: str) -> Hardware | None:
    """The hardware of `instance_type`; None when the catalog has no facts for its family."""
    family, size = split_type(instance_type)
    row = _families().get(family)
    if row is None:
        return None
    gpu = row.get("gpu")
    arch = _load()["gpu_architectures"].get(gpu) if gpu else None
    return Hardware(
        instance_type=f"ml.{family}.{size}", gpu_model=gpu,
        gpu_architecture=arch["architecture"] if arch else None,
        compute_capability=parse_capability(arch["compute_capability"]) if arch else None,
        accelerator=row.get("accelerator"), cpu_arch=str(row["cpu_arch"]), local_nvme=bool(row["local_nvme"]),
        efa=size in row["efa"], source=str(row["source"]),
    )


__all__ = ["ARM64", "X86_64", "Hardware", "families", "hardware", "parse_capability", "runs_on", "split_type"]
