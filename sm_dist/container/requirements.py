"""The source dir's requirements.txt, installed at job start as SageMaker's training toolkit does.

SageMaker's own entrypoint (sagemaker-training-toolkit) runs ``pip install -r requirements.txt``
in the code dir before the script (docs/PLATFORM.md §1.1). sm_dist's PID 1 replaces that
entrypoint as the container's first process, so it does the same, once per host, before torchrun.
A `wheels/` folder next to requirements.txt is used instead of the package index
(``--no-index --find-links wheels``): the way to install in a job without internet access
(network isolation, a VPC without NAT). Local mode sets SM_DIST_INSTALL_REQUIREMENTS=0: it
checks the caller's environment before starting instead of installing into it.

On a warm pool (`warm_cache`) the first install also keeps what it installed as wheels in the
persistent cache (``sm_dist/wheelhouse/<key>``, the key a hash of requirements.txt and the image's
Python and machine: pip's ``--report`` names them, ``pip wheel --no-deps`` saves them, from pip's own
cache in the same folder); the next job on the pool installs from there with ``--no-index``, without
the network, and falls back to the index when that fails.
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from sm_dist.container import warm_cache
from sm_dist.contract.container import INSTALL_REQUIREMENTS_ENV, REQUIREMENTS_FILE, WHEELS_DIR
from sm_dist.errors import ContainerStartError

_log = logging.getLogger("sm_dist.pid1")

#: Written last in a wheelhouse folder: every wheel the install needs is there.
COMPLETE_FILE = "complete"
#: pip's ``install --report`` (pip 22.2 and later): what it installed, and from where.
_REPORT_PIP = (22, 2)


def pip_command(code_dir: Path) -> list[str] | None:
    """The pip command for the code dir's requirements.txt, or None when there is none."""
    if not (code_dir / REQUIREMENTS_FILE).is_file():
        return None
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
           "-r", REQUIREMENTS_FILE]
    if (code_dir / WHEELS_DIR).is_dir():
        cmd += ["--no-index", "--find-links", WHEELS_DIR]
    return cmd


def wheelhouse(code_dir: Path, env: Mapping[str, str]) -> Path | None:
    """The warm-pool cache's folder for this requirements.txt on this image; None without a cache."""
    cache = warm_cache.cache_dir(env)
    if cache is None:
        return None
    key = hashlib.sha256((code_dir / REQUIREMENTS_FILE).read_bytes())
    key.update(f"{sys.implementation.name}{sys.version_info[0]}.{sys.version_info[1]}-{platform.machine()}".encode())
    return cache / warm_cache.OWN_FOLDER / "wheelhouse" / key.hexdigest()[:16]


def install(code_dir: Path, env: Mapping[str, str]) -> None:
    """pip-install requirements.txt (from the warm pool's wheelhouse when it has it); ContainerStartError
    naming pip's own error when it fails."""
    cmd = pip_command(code_dir)
    if cmd is None or env.get(INSTALL_REQUIREMENTS_ENV) == "0":
        return
    house = wheelhouse(code_dir, env)
    if house is not None and (house / COMPLETE_FILE).is_file():
        start = time.monotonic()
        if _pip(cmd + ["--no-index", "--find-links", str(house)], code_dir, env).returncode == 0:
            _log.info("installed %s from the warm-pool cache's wheels (no index) in %.1f s", REQUIREMENTS_FILE,
                      time.monotonic() - start)
            return
        _log.warning("installing %s from the warm-pool cache's wheels failed: from the index instead", REQUIREMENTS_FILE)
    keep = house is not None and _reports() and warm_cache.ensure_folder(house.parent)
    report = house.with_name(house.name + ".report.json") if house is not None and keep else None
    start = time.monotonic()
    done = _pip(cmd + (["--report", str(report)] if report else []), code_dir, env)
    if done.returncode != 0:
        errors = [line.strip() for line in done.stderr.splitlines() if line.strip().startswith("ERROR")]
        why = errors[0] if errors else f"pip exited with code {done.returncode}"
        raise ContainerStartError(
            f"{REQUIREMENTS_FILE}: {why}. Without internet access (network isolation, a VPC without NAT) put the "
            f"wheels in the source dir, for this image's Python and platform: pip download -r {REQUIREMENTS_FILE} "
            f"-d {WHEELS_DIR} --only-binary=:all: --python-version {sys.version_info[0]}.{sys.version_info[1]} "
            f"--implementation cp --platform manylinux2014_{platform.machine()}")
    _log.info("installed %s in %.1f s", REQUIREMENTS_FILE, time.monotonic() - start)
    if house is not None and report is not None:
        keep_wheels(house, report, code_dir, env)


def _pip(cmd: list[str], code_dir: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    _log.info("installing %s: %s", REQUIREMENTS_FILE, " ".join(cmd[1:]))
    done = subprocess.run(cmd, cwd=code_dir, capture_output=True, text=True, env=dict(env), check=False)
    sys.stderr.write(done.stdout + done.stderr)
    return done


def _reports() -> bool:
    """Whether this pip writes ``install --report``; False keeps installing without the wheelhouse."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        parts = version("pip").split(".")[:2]
        return tuple(int(p) for p in parts) >= _REPORT_PIP
    except (PackageNotFoundError, ValueError):
        return False


def keep_wheels(house: Path, report: Path, code_dir: Path, env: Mapping[str, str]) -> bool:
    """Save as wheels in `house` what pip's `report` says it installed; True when `house` is complete.
    A requirement pip did not install from an archive (a VCS checkout, a folder) leaves it incomplete:
    the next job installs from the index as this one did."""
    try:
        installed = json.loads(report.read_text(encoding="utf-8")).get("install", [])
        report.unlink()
    except (OSError, ValueError) as exc:
        _log.warning("cannot read pip's report %s: %s", report, exc)
        return False
    urls = [item["download_info"]["url"] for item in installed if "archive_info" in item.get("download_info", {})]
    if len(urls) < len(installed):
        _log.info("%s: not every requirement came from an archive; nothing kept in the warm-pool cache",
                  REQUIREMENTS_FILE)
        return False
    partial = house.with_name(house.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    if not warm_cache.ensure_folder(partial):
        return False
    if urls:
        cmd = [sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-input", "--no-deps",
               "-w", str(partial), *urls]
        done = subprocess.run(cmd, cwd=code_dir, capture_output=True, text=True, env=dict(env), check=False)
        if done.returncode != 0:
            _log.warning("cannot keep the installed wheels in the warm-pool cache: %s", done.stderr.strip()[-300:])
            shutil.rmtree(partial, ignore_errors=True)
            return False
    (partial / COMPLETE_FILE).write_text("\n".join(urls) + "\n", encoding="utf-8")
    shutil.rmtree(house, ignore_errors=True)
    partial.rename(house)
    _log.info("kept %d wheel(s) for %s in the warm-pool cache: %s", len(urls), REQUIREMENTS_FILE, house)
    return True
