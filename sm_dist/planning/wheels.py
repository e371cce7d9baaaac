"""Vendored wheels (the source dir's wheels/) against the job's image: its Python and platform.

PID 1 installs requirements.txt from wheels/ without an index (sm_dist.container.requirements).
`pip download` fetches wheels for the machine it runs on unless told otherwise, so a Mac's
`cp311-macosx_14_0_arm64` wheel reaches the image (Python 3.12, Linux x86_64), pip refuses it there,
and the job fails after its instances started, billed. The plan refuses such a wheel first, naming it and
the `pip download` that fetches the image's wheels (docs/PLATFORM.md §6.3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from sm_dist.contract.container import REQUIREMENTS_FILE, WHEELS_DIR
from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from sm_dist.catalog.images import ImageRef
    from sm_dist.planning.bundle import Bundle

#: The glibc of the catalog's images (docs/PLATFORM.md §6.3): amzn2023's 2.34 (ubuntu22.04's 2.35 is newer):
#: a manylinux_2_N wheel installs on them for N <= 34.
IMAGE_GLIBC_MINOR = 34
_LEGACY_MANYLINUX = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}  # PEP 600's aliases


class ImagePlatform(NamedTuple):
    """What a wheel must suit to install in the image."""

    python: str  #: "py312", as images.json names it
    cpu_arch: str  #: "x86_64" or "aarch64"

    @property
    def version(self) -> str:
        """As pip's --python-version takes it: "3.12"."""
        digits = self.python.removeprefix("py")
        return f"{digits[0]}.{digits[1:]}"

    def describe(self) -> str:
        return f"Python {self.version}, Linux {self.cpu_arch}"


def image_platform(image: ImageRef | None) -> ImagePlatform | None:
    """The Python and CPU of the image the job runs (sm_dist's image table); None for image_uri= (unknown)."""
    return None if image is None else ImagePlatform(image.python, image.cpu_arch)


def download_command(platform: ImagePlatform | None) -> str:
    """The `pip download` that fetches wheels the image installs (all four target options: pip's advice)."""
    base = f"pip download -r {REQUIREMENTS_FILE} -d {WHEELS_DIR}"
    if platform is None:  # image_uri=: its Python and platform are the caller's to name
        return base + " --only-binary=:all: --python-version X.Y --platform <the image's platform>"
    arch = platform.cpu_arch
    return (f"{base} --only-binary=:all: --python-version {platform.version} --implementation cp "
            f"--platform manylinux2014_{arch} --platform manylinux_2_28_{arch}")


def check_wheels(bundle: Bundle, platform: ImagePlatform | None) -> None:
    """Refuse the bundle's wheels that cannot install in the image, by name, with the fix."""
    if platform is None:
        return
    names = [f.path for f in bundle.files
             if f.origin == "user" and f.path.startswith(WHEELS_DIR + "/") and f.path.endswith(".whl")]
    bad = [name for name in names if not installs(name.rsplit("/", 1)[-1], platform)]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise ConfigError(WHEELS_DIR, bad[0], f"cannot install in the job's image ({platform.describe()}){more}; "
                          f"download the image's wheels instead: {download_command(platform)}")


def installs(filename: str, platform: ImagePlatform) -> bool:
    """Whether pip in the image accepts the wheel `filename` (its tags against the image's)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        tags = parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:  # pip ignores such a file: the requirement it was meant for is not met
        return False
    return not tags.isdisjoint(_image_tags(platform))


def _image_tags(platform: ImagePlatform) -> frozenset[object]:
    from packaging import tags

    arch = platform.cpu_arch
    platforms = [f"manylinux_2_{minor}_{arch}" for minor in range(IMAGE_GLIBC_MINOR, 4, -1)]
    platforms += [f"{alias}_{arch}" for alias in _LEGACY_MANYLINUX if arch in ("x86_64", "i686") or alias == "manylinux2014"]
    platforms.append(f"linux_{arch}")
    version = (int(platform.version.split(".")[0]), int(platform.version.split(".")[1]))
    return frozenset([*tags.cpython_tags(version, platforms=platforms),
                      *tags.compatible_tags(version, f"cp{version[0]}{version[1]}", platforms)])


__all__ = ["IMAGE_GLIBC_MINOR", "ImagePlatform", "check_wheels", "download_command", "image_platform", "installs"]
