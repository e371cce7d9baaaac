"""Before a local run or a Slurm job: does this Python environment satisfy the source dir's requirements.txt?

In the cloud PID 1 pip-installs requirements.txt at job start (sm_dist.container.requirements);
local mode's hosts and a Slurm job's nodes run in the caller's environment, which sm_dist does not change
(N nodes pip-installing into one shared environment at once would race). A missing or
too-old package would otherwise surface as an ImportError on every host after start-up, or
not at all when the script catches it. Requirement lines are read with `packaging` (PEP 508:
versions, extras, environment markers), the installed versions with importlib.metadata; pip
options (-r, -e, --index-url) and lines packaging cannot parse are not checked, and said so.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path


def unmet(path: Path) -> tuple[list[str], list[str]]:
    """(requirements this environment does not satisfy, lines not checked)."""
    from packaging.requirements import InvalidRequirement, Requirement

    missing, unchecked = [], []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            unchecked.append(line)
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            unchecked.append(line)
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            missing.append(f"{req} (not installed)")
            continue
        if req.specifier and not req.specifier.contains(installed, prereleases=True):
            missing.append(f"{req} ({installed} installed)")
    return missing, unchecked
