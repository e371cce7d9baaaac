"""The source dir's requirements.txt, installed at job start as SageMaker's training toolkit does.

SageMaker's own entrypoint (sagemaker-training-toolkit) runs ``pip install -r requirements.txt``
in the code dir before the script (docs/PLATFORM.md §1.1). sm_dist's launcher replaces that
entrypoint as the container's first process, so it does the same, once per host, before torchrun.
A `wheels/` folder next to requirements.txt is used instead of the package index
(``--no-index --find-links wheels``): the way to install in a job without internet access
(network isolation, a VPC without NAT). Local mode sets SM_DIST_INSTALL_REQUIREMENTS=0: it
checks the caller's environment before starting instead of installing into it.
"""

from __future__ import annotations

import logging
import platform
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from sm_dist.contract.container import INSTALL_REQUIREMENTS_ENV, REQUIREMENTS_FILE, WHEELS_DIR
from sm_dist.errors import ContainerStartError

_log = logging.getLogger("sm_dist.launcher")


def pip_command(code_dir: Path) -> list[str] | None:
    """The pip command for the code dir's requirements.txt, or None when there is none."""
    if not (code_dir / REQUIREMENTS_FILE).is_file():
        return None
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
           "-r", REQUIREMENTS_FILE]
    if (code_dir / WHEELS_DIR).is_dir():
        cmd += ["--no-index", "--find-links", WHEELS_DIR]
    return cmd


def install(code_dir: Path, env: Mapping[str, str]) -> None:
    """pip-install requirements.txt; ContainerStartError naming pip's own error when it fails."""
    cmd = pip_command(code_dir)
    if cmd is None or env.get(INSTALL_REQUIREMENTS_ENV) == "0":
        return
    _log.info("installing %s: %s", REQUIREMENTS_FILE, " ".join(cmd[1:]))
    done = subprocess.run(cmd, cwd=code_dir, capture_output=True, text=True, env=dict(env), check=False)
    sys.stderr.write(done.stdout + done.stderr)
    if done.returncode != 0:
        errors = [line.strip() for line in done.stderr.splitlines() if line.strip().startswith("ERROR")]
        why = errors[0] if errors else f"pip exited with code {done.returncode}"
        raise ContainerStartError(
            f"{REQUIREMENTS_FILE}: {why}. Without internet access (network isolation, a VPC without NAT) put the "
            f"wheels in the source dir, for this image's Python and platform: pip download -r {REQUIREMENTS_FILE} "
            f"-d {WHEELS_DIR} --only-binary=:all: --python-version {sys.version_info[0]}.{sys.version_info[1]} "
            f"--implementation cp --platform manylinux2014_{platform.machine()}")
