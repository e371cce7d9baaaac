"""The SageMaker SDK's request for a local plan, kept per settings so a rehearsal need not import the SDK.

`build_request` serializes the request through ModelTrainer; importing the SDK (pydantic shapes,
pandas, scipy) costs seconds of CPU, the largest part of `sm-dist fit --local`'s start-up. The
serializer is a function of the settings, of the SDK's version and of the SageMaker config files
it reads (docs/PLATFORM.md §1.2); its answer for a local plan is kept in
``$SM_DIST_CACHE_HOME/requests/<key>.json`` and read back for the same inputs. The job name is the
one setting that changes from run to run (a new name each time): it is kept as a placeholder of the
same length and put back. The request read back is still checked by botocore (`validate_request`)
and the plan's constraints, as a new one is. A config override (`SAGEMAKER_*_CONFIG_OVERRIDE`, which
may name an S3 object) or a short job name (a placeholder could change other settings) skips the memo.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sm_dist.estimator.prices_live import cache_dir

if TYPE_CHECKING:
    from sm_dist.planning.request import RequestSpec

_log = logging.getLogger(__name__)

#: Below this length a job name may occur inside other settings by chance: no memo.
MIN_NAME_CHARS = 12
#: Stands in for the job name (cut to its length): letters only, so a valid job name still.
_PLACEHOLDER = "smdistmemojobname" * 4
#: What the SDK's answer depends on besides the settings: its packages, and this package's code.
_PACKAGES = ("sagemaker-train", "sagemaker-core", "pydantic")
_ENV_PREFIXES = ("SAGEMAKER_", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")


def _config_files() -> list[Path] | None:
    """The SageMaker config files the SDK reads (admin, user, local mode) where platformdirs puts them
    on Linux (the first XDG_CONFIG_DIRS entry, XDG_CONFIG_HOME); None elsewhere (no memo)."""
    if not sys.platform.startswith("linux"):
        return None
    site = (os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep)[0]
    user = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return [Path(site) / "sagemaker" / "config.yaml", Path(user) / "sagemaker" / "config.yaml",
            Path.home() / ".sagemaker" / "config.yaml"]


def _fingerprint(path: Path) -> str:
    """A config path's content (a folder: every file in it), or that it is absent."""
    if path.is_dir():
        return repr(sorted((str(p), p.read_bytes()) for p in path.rglob("*") if p.is_file()))
    return repr(path.read_bytes()) if path.is_file() else "absent"


def _key(spec: RequestSpec) -> tuple[str, str] | None:
    """(memo key, placeholder) for `spec`, or None when its answer is not to be kept."""
    name = spec.job_name
    placeholder = _PLACEHOLDER[:len(name)]
    text = repr(spec)
    if (len(name) < MIN_NAME_CHARS or placeholder in text
            or any(os.environ.get(f"SAGEMAKER_{w}_CONFIG_OVERRIDE") for w in ("ADMIN", "USER"))):
        return None
    files = _config_files()
    if files is None:
        return None
    try:
        versions = [version(p) for p in _PACKAGES]
        configs = [_fingerprint(p) for p in files]
    except (PackageNotFoundError, OSError):  # the SDK itself will say what is missing
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES))
    own = Path(__file__).with_name("request.py").read_bytes()  # the trainer built from the settings
    parts = [text.replace(name, placeholder), versions, configs, env, hashlib.sha256(own).hexdigest()]
    return hashlib.sha256(repr(parts).encode()).hexdigest(), placeholder


def _path(key: str) -> Path:
    return cache_dir() / "requests" / f"{key}.json"


def recall(spec: RequestSpec) -> dict[str, Any] | None:
    """The SDK's request for these settings when it was kept, with this job's name; else None."""
    found = _key(spec)
    if found is None:
        return None
    key, placeholder = found
    try:
        text = _path(key).read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        request = json.loads(text.replace(placeholder, spec.job_name))
    except ValueError:
        return None
    return request if isinstance(request, dict) else None


def keep(spec: RequestSpec, request: dict[str, Any]) -> None:
    """Keep the SDK's `request` for these settings (never fails the plan: a memo is optional)."""
    found = _key(spec)
    if found is None:
        return
    key, placeholder = found
    text = json.dumps(request, sort_keys=False)
    if placeholder in text:  # the SDK wrote the placeholder's letters itself: it would be replaced back
        return
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text.replace(spec.job_name, placeholder), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        _log.debug("cannot keep the request at %s: %s", path, exc)


__all__ = ["MIN_NAME_CHARS", "keep", "recall"]
