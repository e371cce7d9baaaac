"""Locate files shipped with sm_dist: the entrypoints and the infra templates.

In a wheel they live inside the package (`sm_dist/_entrypoints`, `sm_dist/_infra`, mapped by
pyproject's force-include); in a source checkout or an editable install they are the repo's
top-level `entrypoints/` and `infra/` folders.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """Return the folder of shipped resource `name` ("entrypoints" or "infra")."""
    if name not in ("entrypoints", "infra"):
        raise ValueError(f"unknown resource folder {name!r}")
    inside = _PACKAGE / f"_{name}"
    if inside.is_dir():
        return inside
    return _PACKAGE.parent / name


def package_dir() -> Path:
    """The installed `sm_dist` package folder (what the plan copies into a job bundle: sm_dist.planning.bundle)."""
    return _PACKAGE
