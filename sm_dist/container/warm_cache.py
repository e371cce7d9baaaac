"""The warm pool's persistent cache: what a relaunch on the same instances need not do again.

A job with ResourceConfig.KeepAlivePeriodInSeconds leaves its instances in a warm pool; the next
matching job runs on them and finds the folder SageMaker mounts at /opt/ml/sagemaker/warmpoolcache
and names in SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY as the last job left it (docs/PLATFORM.md
§1.13.1). Everything else is new each job: the container, its /tmp and site-packages; the input
channels, the code bundle among them, are downloaded again before PID 1 starts (so the bundle is
not cached here: it is in place before anything could read a cache).

When the variable names a folder that exists, PID 1 points at it the caches of what a job redoes at
start, each only where the container's environment (the image's, the request's `environment=`)
leaves the variable unset:

- PIP_CACHE_DIR, ``<cache>/pip``; and requirements.txt's wheelhouse (`requirements`): the wheels
  the first install fetched, keyed by the file and the image's Python, installed by the next job
  with ``--no-index``, without the network;
- HF_HOME, ``<cache>/huggingface``: the Hugging Face hub's downloads and datasets;
- TORCHINDUCTOR_CACHE_DIR ``<cache>/torchinductor`` and TRITON_CACHE_DIR ``<cache>/triton``:
  torch.compile's compiled kernels (by default under /tmp and ~/.triton, gone with the container).

PID 1 also notes the job in ``<cache>/sm_dist/last_job`` so that each host's log says whether the
job found the cache warm (and which job left it) or empty. Standard library only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from sm_dist.contract.container import WARMPOOL_CACHE_ENV, WARMPOOL_CACHE_FOLDERS

_log = logging.getLogger("sm_dist.pid1")

#: The variables pointed into the cache, and their folder in it (the contract's: local mode reads it too).
CACHE_FOLDERS = WARMPOOL_CACHE_FOLDERS
#: sm_dist's own folder in the cache (the wheelhouse, the last job's name).
OWN_FOLDER = "sm_dist"
LAST_JOB_FILE = "last_job"


def cache_dir(env: Mapping[str, str]) -> Path | None:
    """The persistent cache, when the job runs on a warm pool: the variable's folder, if it exists."""
    value = env.get(WARMPOOL_CACHE_ENV)
    if not value or not Path(value).is_dir():
        return None
    return Path(value)


def cache_environment(env: Mapping[str, str], cache: Path) -> dict[str, str]:
    """The cache variables `env` does not set, each pointing at its folder in `cache`."""
    return {name: str(cache / folder) for name, folder in CACHE_FOLDERS.items() if not env.get(name)}


def note_job(cache: Path, job: str, host: str) -> str | None:
    """Record this job as the cache's last; the job recorded before it (None: the cache was empty)."""
    own = cache / OWN_FOLDER
    path = own / LAST_JOB_FILE
    try:
        before = path.read_text(encoding="utf-8").strip() or None
    except OSError:
        before = None
    try:
        own.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{job}\n", encoding="utf-8")
    except OSError as exc:  # a full or read-only cache must not stop the job
        _log.warning("host %s: cannot write %s: %s", host, path, exc)
    return before


def apply(env: Mapping[str, str], job: str, host: str) -> dict[str, str]:
    """`env` with the cache's variables added (none without a cache), after saying on this host's log
    whether the cache was warm: left by an earlier job, or empty."""
    out = dict(env)
    cache = cache_dir(env)
    if cache is None:
        return out
    added = cache_environment(env, cache)
    out.update(added)
    before = note_job(cache, job, host)
    state = f"warm, left by job {before}" if before else "empty: the first job on this warm pool"
    kept = ", ".join(added) if added else "none (each is set already)"
    _log.info("host %s: warm-pool cache %s (%s); pointed into it: %s", host, cache, state, kept)
    return out


def ensure_folder(path: Path) -> bool:
    """Create `path` (a cache folder); False when the cache cannot hold it."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        _log.warning("cannot create %s in the warm-pool cache: %s", path, exc)
        return False
    return True


__all__ = ["CACHE_FOLDERS", "LAST_JOB_FILE", "OWN_FOLDER", "apply", "cache_dir", "cache_environment",
           "ensure_folder", "note_job"]
