"""Local mode's warm pool: the hosts' persistent caches kept from one local `fit` to the next.

SageMaker keeps a job's instances in a warm pool for ResourceConfig.KeepAlivePeriodInSeconds and
runs the next job whose request matches (`sm_dist.planning.warm_pool`) on them, with the persistent cache the last job left
(docs/PLATFORM.md §1.13.1). Local mode rehearses it: a job whose request keeps its hosts alive
leaves each host's cache under ``warm-pools/<job>/algo-N`` next to its run folder (the local root's
parent: `<temp dir>/sm-dist-local` by default), with ``pool.json``: the fields SageMaker matches on,
when the pool became available and for how long. The next local job whose request has the same
values takes it over (a rename: two jobs cannot both take one pool) and each of its hosts sees its
folder at /opt/ml/sagemaker/warmpoolcache, named by SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY
(`sm_dist.container.warm_cache` then uses it). A pool past its keep-alive is removed, as SageMaker
ends it; a job that took a pool without keeping its own ends it too. The summary says whether the
run started warm or cold and, when a kept pool did not match, each setting that differs.
`sm-dist local clean` removes pools as it removes runs (`sm_dist.local.clean`); `sm-dist release JOB` ends one.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sm_dist.contract.container import WARMPOOL_CACHE_DIR
from sm_dist.errors import ConfigError
from sm_dist.local.layout import HostRoot
from sm_dist.planning.warm_pool import MATCH_FIELDS, pool_differences

_T = TypeVar("_T")

#: The folder next to the run folders that holds the kept pools.
POOLS_FOLDER = "warm-pools"
POOL_FILE = "pool.json"


def matched_fields(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request's values SageMaker matches a pool on (`planning.warm_pool.MATCH_FIELDS`, docs/PLATFORM.md
    §1.13), in the request's own shape: what `pool_differences` compares the next job's request with."""
    out: dict[str, Any] = {}
    for _setting, path in MATCH_FIELDS:
        node: Any = request
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None:
            parent = out
            for key in path[:-1]:
                parent = parent.setdefault(key, {})
            parent[path[-1]] = node
    return out


def keep_alive_s(request: Mapping[str, Any]) -> int:
    """ResourceConfig.KeepAlivePeriodInSeconds (0: no pool kept after the job)."""
    return int((request.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds") or 0)


@dataclass(frozen=True)
class Pool:
    """A kept pool: its folder and what `pool.json` says."""

    folder: Path
    job: str
    fields: dict[str, Any]
    available_at: float
    keep_alive_s: int

    @property
    def expires_at(self) -> float:
        return self.available_at + self.keep_alive_s


@dataclass(frozen=True)
class Start:
    """How a local job starts: on a taken-over pool (warm), an empty one, or none."""

    folder: Path | None
    """The job's pool folder (algo-N inside), or None: the job uses no pool."""
    line: str | None
    """The summary's line: warm or cold, and why; None for a job that keeps no pool and found none."""


def pools(folder: Path) -> list[Pool]:
    """The kept pools under `folder`, newest first (a folder whose pool.json cannot be read is skipped)."""
    found = []
    for path in folder.iterdir() if folder.is_dir() else []:
        try:
            data = json.loads((path / POOL_FILE).read_text(encoding="utf-8"))
            found.append(Pool(path, str(data["job"]), dict(data["fields"]), float(data["available_at"]),
                              int(data["keep_alive_s"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(found, key=lambda p: p.available_at, reverse=True)


def _differs(pool: Pool, request: Mapping[str, Any]) -> str:
    return f"the pool of job {pool.job} not reused: {'; '.join(pool_differences(request, pool.fields))}"


def take(folder: Path, request: Mapping[str, Any], job: str, now: float | None = None) -> Start:
    """Take over the newest live pool under `folder` that matches `request` (removing expired ones), or
    start cold with an empty pool when the job keeps one."""
    now = time.time() if now is None else now
    keep, mine = keep_alive_s(request), folder / job
    live = []
    for pool in pools(folder):
        if pool.expires_at <= now:
            shutil.rmtree(pool.folder, ignore_errors=True)  # SageMaker ended it
        else:
            live.append(pool)
    for pool in live:
        if not pool_differences(request, pool.fields):
            try:
                os.rename(pool.folder, mine)
            except OSError:  # another job took it first
                continue
            (mine / POOL_FILE).unlink(missing_ok=True)  # in use: no longer available
            return Start(mine, f"warm: on the hosts job {pool.job} kept (idle {now - pool.available_at:.0f} s of its "
                               f"{pool.keep_alive_s} s keep-alive), each with its cache at {WARMPOOL_CACHE_DIR}")
    if not keep:
        return Start(None, f"cold: {_differs(live[0], request)}" if live else None)
    mine.mkdir(parents=True, exist_ok=True)
    why = _differs(live[0], request) if live else "no pool kept"
    return Start(mine, f"cold: {why}; this job's hosts are kept {keep} s for the next")


def release(start: Start, request: Mapping[str, Any], job: str, now: float | None = None) -> None:
    """After the job: keep its pool for the keep-alive (pool.json written last), or end it."""
    if start.folder is None:
        return
    keep = keep_alive_s(request)
    if not keep:
        shutil.rmtree(start.folder, ignore_errors=True)
        return
    data = {"job": job, "fields": matched_fields(request), "available_at": time.time() if now is None else now,
            "keep_alive_s": keep}
    (start.folder / POOL_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def end(run: Path, job: str, now: float | None = None) -> Pool:
    """`sm-dist release` on local job `job` (its run folder `run`): end the pool it kept, as UpdateTrainingJob with
    keep-alive 0 ends a cloud job's (the folder goes); a ConfigError saying why when it keeps none now."""
    link = HostRoot("algo-1", run / "hosts" / "algo-1").container_path(WARMPOOL_CACHE_DIR)
    if not link.is_symlink():
        raise ConfigError("job", job, "nothing to release: it ran on no warm pool (launched without keep_alive_s, "
                          "--keep-alive-s)")
    folder = Path(os.readlink(link)).parent
    kept = next((p for p in pools(folder.parent) if p.folder == folder), None)
    if kept is None:
        raise ConfigError("job", job, "nothing to release: its hosts are kept no longer (a later matching job took "
                          "them over, its keep-alive ran out, or it kept none: launched without keep_alive_s)")
    shutil.rmtree(kept.folder, ignore_errors=True)
    if kept.expires_at <= (time.time() if now is None else now):
        raise ConfigError("job", job, f"nothing to release: its {kept.keep_alive_s} s keep-alive had run out")
    return kept


def run_on_pool(folder: Path, request: Mapping[str, Any], job: str,
                run: Callable[[Path | None], _T]) -> tuple[_T, str | None]:
    """`run(pool folder)` on the pool `take` gives, kept or ended after it however it ends (SageMaker keeps
    a pool after a stopped job, or one the script failed); (its result, the summary's warm/cold line)."""
    start = take(folder, request, job)
    try:
        return run(start.folder), start.line
    finally:
        release(start, request, job)


__all__ = ["POOLS_FOLDER", "POOL_FILE", "Pool", "Start", "end", "keep_alive_s", "matched_fields", "pools",
           "release", "run_on_pool", "take"]
