"""A real, minimal pure-Python wheel for the tests that pip-install (no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def make_wheel(folder: Path, name: str = "smdist_probe_pkg", version: str = "1.0") -> Path:
    """`folder`/wheels holding `name`-`version`, built by pip from a throwaway project (no network)."""
    pytest.importorskip("setuptools")  # the build backend of the throwaway project
    project = folder / "project"
    (project / name).mkdir(parents=True)
    (project / name / "__init__.py").write_text("VALUE = 7\n")
    (project / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\n')
    wheels = folder / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(project)], check=True, capture_output=True)
    return wheels
