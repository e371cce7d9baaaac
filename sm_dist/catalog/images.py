"""AWS's SageMaker PyTorch training images, by torch version and region, as data.

The table lives in `images.json` next to this module: one row per torch minor version (the
repository, the CPU and GPU tags, python, CUDA, GA and end-of-patch dates, the release-data
file each row was read from; the CPU architecture and the compute capabilities its torch has
kernels for) and the ECR account per region (docs/PLATFORM.md §6, §7). It is read once, on first
use, and cached. `image_for` picks the image that runs on an instance's hardware. Standard
library only (core world).
"""

# Annotations evaluated, not postponed (no `from __future__ import annotations`): typing.NamedTuple
# would compile each field's annotation string at import, a visible share of `sm-dist estimate-cost`
# start-up (tests/test_imports.py).

import functools
import json
import os
from typing import Any, NamedTuple

from sm_dist.catalog.hardware import Hardware, runs_on
from sm_dist.contract import torch_support
from sm_dist.errors import CatalogError, ConfigError

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images.json")


class ImageRef(NamedTuple):
    """One SageMaker PyTorch training image in one region."""

    uri: str  #: what CreateTrainingJob's TrainingImage takes
    torch_version: str  #: the minor version, e.g. "2.13"
    full_version: str  #: the torch release inside, e.g. "2.13.0"
    repository: str  #: "pytorch" (2.11+) or "pytorch-training"
    tag: str
    account: str
    region: str
    gpu: bool
    python: str  #: "py312"
    cuda: str  #: "cu133"; "" for CPU images
    ga: str  #: ISO date AWS made it available
    end_of_patch: str  #: ISO date after which AWS stops patching it
    source: str  #: release-data file and commit the row was read from
    cpu_arch: str = "x86_64"  #: the CPU architecture the image is built for
    torch_cuda_arch: tuple[str, ...] | None = None  #: compute capabilities its torch has kernels for
    torch_ptx: str | None = None  #: PTX its torch carries (compiled on load for newer GPUs)

    def past_end_of_patch(self, today: str) -> bool:
        """Whether `today` (ISO date) is after the image's end of patch."""
        return today > self.end_of_patch


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    with open(_DATA, encoding="utf-8") as handle:
        return json.load(handle)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def known_versions() -> list[str]:
    """Torch minor versions with an image, oldest first."""
    return sorted((row["torch"] for row in _load()["images"]), key=_key)


def default_version() -> str:
    """The version used when none is asked for: the newest the runtime is tested on."""
    return str(_load()["default"])


def known_regions() -> list[str]:
    """Regions with a documented DLC registry account."""
    return sorted(_load()["accounts"])


def _minor(torch_version: str) -> tuple[str, str]:
    """("2.13", "2.13.0") from "2.13", "2.13.0" or "2.13.0+cu133"; ("2.13", "") for a bare minor."""
    text = str(torch_version).strip().split("+", 1)[0]
    parts = text.split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise CatalogError("torch_version", torch_version,
                           f"expected a version like '2.13' (known: {', '.join(known_versions())})")
    return ".".join(parts[:2]), text if len(parts) == 3 else ""


def _row(torch_version: str | None) -> dict[str, Any]:
    minor, full = _minor(default_version() if torch_version is None else torch_version)
    rows = {row["torch"]: row for row in _load()["images"]}
    if minor not in rows:
        raise CatalogError("torch_version", torch_version,
                           f"AWS publishes no SageMaker PyTorch training image for torch {minor}; "
                           f"known versions: {', '.join(known_versions())}")
    row = rows[minor]
    refused = torch_support.refusal(minor)
    if refused:
        raise CatalogError("torch_version", torch_version, f"AWS's image exists, but {refused.split('; ', 1)[0]}; ask for "
                           f"{', '.join(v for v in known_versions() if not torch_support.refusal(v))}, or pass image_uri=")
    if full and full != row["full_version"]:
        raise CatalogError("torch_version", torch_version,
                           f"the torch {minor} image holds torch {row['full_version']}; "
                           f"ask for '{minor}' or '{row['full_version']}'")
    return row


def _account(region: str) -> str:
    accounts = _load()["accounts"]
    if region not in accounts:
        raise CatalogError("region", region,
                           "no AWS Deep Learning Containers registry is documented for this region "
                           f"(docs/PLATFORM.md §6.2); known regions: {', '.join(known_regions())}")
    return str(accounts[region])


def training_image(torch_version: str | None, region: str, gpu: bool) -> ImageRef:
    """The SageMaker PyTorch training image for `torch_version` (None: the default) in `region`."""
    row = _row(torch_version)
    account = _account(region)
    flavour = row["gpu" if gpu else "cpu"]
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    uri = _load()["uri_format"].format(account=account, region=region, domain=domain,
                                       repository=row["repository"], tag=flavour["tag"])
    return ImageRef(uri=uri, torch_version=row["torch"], full_version=row["full_version"],
                    repository=row["repository"], tag=flavour["tag"], account=account, region=region,
                    gpu=bool(gpu), python=row["python"], cuda=flavour.get("cuda", "") if gpu else "",
                    ga=row["ga"], end_of_patch=row["end_of_patch"], source=flavour["source"],
                    cpu_arch=flavour["cpu_arch"], torch_ptx=flavour.get("torch_ptx"),
                    torch_cuda_arch=tuple(flavour["torch_cuda_arch"]) if flavour.get("torch_cuda_arch") else None)


def repositories() -> list[str]:
    """The ECR repositories the image table's images live in (what the infra role must pull)."""
    return sorted({str(row["repository"]) for row in _load()["images"]})


def registry_account(region: str) -> str:
    """The AWS Deep Learning Containers account serving `region` (docs/PLATFORM.md §6.2)."""
    return _account(region)


def mismatch(image: ImageRef, hw: Hardware) -> str | None:
    """Why `image` cannot run on `hw`, naming both facts (docs/PLATFORM.md §7); None when it can."""
    if image.cpu_arch != hw.cpu_arch:
        return f"{hw.instance_type} has {hw.cpu_arch} CPUs and AWS's image {image.tag} is built for {image.cpu_arch}"
    if hw.compute_capability is None or not image.gpu or image.torch_cuda_arch is None:
        return None
    if runs_on(hw.compute_capability, image.torch_cuda_arch, image.torch_ptx):
        return None
    built = ", ".join(image.torch_cuda_arch) + (f" + PTX {image.torch_ptx}" if image.torch_ptx else "")
    return (f"{hw.instance_type} has {hw.gpu_text}; the torch {image.full_version} in AWS's image {image.tag} "
            f"({image.cuda}) has kernels for compute capability {built} only")


def image_for(torch_version: str | None, region: str, hw: Hardware) -> tuple[ImageRef, str | None]:
    """The training image for `hw` and a note when it is not the one asked for; or a ConfigError.

    An explicit `torch_version` is that image or a refusal. Without one, the default image, else
    the newest other image in the runtime's tested range that runs on `hw` (an older CUDA where
    the default's drops the GPU), else a refusal naming the GPU or CPU, the image, and the fix.
    """
    gpu = hw.gpu_model is not None
    image = training_image(torch_version, region, gpu=gpu)
    why = mismatch(image, hw)
    if why is None:
        return image, None
    other = _runs_instead(region, hw, skip=image.torch_version)
    if torch_version is None and other is not None:
        return other, (f"torch {other.torch_version} image {other.tag}: the default torch {image.torch_version} "
                       f"cannot run on {hw.instance_type} ({why})")
    if torch_version is None:
        raise ConfigError("instance_type", hw.instance_type, f"{why}; {_fix(hw)}")
    fix = f"ask for torch_version='{other.torch_version}' (or leave it unset)" if other else _fix(hw)
    raise ConfigError("torch_version", torch_version, f"{why}; {fix}")


def _runs_instead(region: str, hw: Hardware, skip: str) -> ImageRef | None:
    """The newest image in the runtime's tested range, other than `skip`, that runs on `hw`."""
    for version in reversed(known_versions()):
        if version == skip or torch_support.refusal(version) or torch_support.untested(version):
            continue
        image = training_image(version, region, gpu=hw.gpu_model is not None)
        if mismatch(image, hw) is None:
            return image
    return None


def _fix(hw: Hardware) -> str:
    if hw.cpu_arch != "x86_64":
        return (f"AWS publishes no {hw.cpu_arch} SageMaker PyTorch training image: pass image_uri= (--image-uri) an {hw.cpu_arch} "
                f"PyTorch image (torch >= {'.'.join(map(str, torch_support.FLOOR))}), or choose an x86_64 instance type "
                "(e.g. ml.p6-b200.48xlarge)")
    cc = ".".join(map(str, hw.compute_capability or ()))
    return (f"no image in sm_dist's table runs on it: choose an instance type with a newer GPU (e.g. ml.g5, ml.p4d), "
            f"or pass image_uri= (--image-uri) an image whose torch (>= {'.'.join(map(str, torch_support.FLOOR))}) has kernels for "
            f"compute capability {cc}")


__all__ = ["ImageRef", "default_version", "image_for", "known_regions", "known_versions", "mismatch", "registry_account",
           "repositories", "training_image"]
