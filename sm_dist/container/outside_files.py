"""Checkpoints a script wrote where SageMaker does not sync them (standard library only).

SageMaker syncs CheckpointConfig.LocalPath (/opt/ml/checkpoints) and nothing else
(docs/PLATFORM.md §1.4). A script that saves `snapshot.pt` in its working directory (the code
dir: pytorch/examples' multinode.py does), or under /tmp, resumes after an in-job restart from
whatever its own host has — another host may have another copy, or none — and after a
whole-job (spot) restart from nothing. `find` lists such files written since PID 1
started; the worker step says so at every restart, and the restore compares the lists of all
hosts (`sm_dist.runtime.restore.folder_restore`): different lists are a split resume, named
before it shows as a hang or a rendezvous error.

The checkpoint folder is skipped by identity, not only by path: in local mode its real path is under
the job's folder (`$SM_DIST_OPT_ML`, or a bind mount on /opt/ml), and a file there is never outside
it. The temporary folder looked at is the host's own (`$TMPDIR`; local mode gives each host one):
where a local host has none, the machine's shared /tmp holds other hosts' and other programs' files,
so it is not looked at.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sm_dist.contract.container import OPT_ML_ENV, checkpoint_like, opt_ml_root, remap

#: Files looked at per folder at most (a code dir with a dataset in it stays cheap).
MAX_ENTRIES = 20_000


@dataclass(frozen=True)
class OutsideFile:
    """A checkpoint-like file outside the synced folder: where (the folder's role), its path there
    (the same on every host), its full path, its size."""

    where: str
    rel: str
    path: str
    size: int

    def text(self) -> str:
        return f"{self.path} ({self.where}, {self.size:,} bytes)"

    def key(self) -> str:
        """What two hosts compare: the folder's role and the path in it."""
        return f"{self.where}: {self.rel}"


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _skipped(path: Path, skip: tuple[Path, ...], same: set[tuple[int, int]]) -> bool:
    """`path` is (or is under) a skipped folder: by path, or the same folder by another path."""
    return any(path == s or s in path.parents for s in skip) or _identity(path) in same


def _walk(root: Path, since: float, skip: tuple[Path, ...]) -> list[tuple[str, str, int]]:
    found: list[tuple[str, str, int]] = []
    seen = 0
    same = {i for i in map(_identity, skip) if i is not None}
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not _skipped(Path(top, d), skip, same)]
        for name in files:
            seen += 1
            if seen > MAX_ENTRIES:
                return found
            path = Path(top, name)
            rel = path.relative_to(root).as_posix()
            if not checkpoint_like(rel):
                continue
            try:
                st = path.stat()
            except OSError:
                continue
            if st.st_mtime >= since:
                found.append((rel, str(path), st.st_size))
    return found


def host_temp_dir(env: Mapping[str, str]) -> Path | None:
    """This host's temporary folder: `$TMPDIR`; else the system's in a container of its own (the cloud);
    None for a local host without one (the machine's /tmp is shared with the other hosts)."""
    if env.get("TMPDIR"):
        return Path(env["TMPDIR"])
    return None if env.get(OPT_ML_ENV) else Path(tempfile.gettempdir())


def find(since: float, synced: Path | None, skip: tuple[Path, ...] = (),
         work_dir: Path | None = None, env: Mapping[str, str] | None = None) -> list[OutsideFile]:
    """Checkpoint-like files modified since `since` (Unix seconds) in the working directory (`work_dir`
    when given: PID 1's is not the script's) and this host's temporary folder (`host_temp_dir`
    of `env`, default os.environ), outside `synced` (the checkpoint folder, also as a container path
    moved under `$SM_DIST_OPT_ML`) and `skip`."""
    env = os.environ if env is None else env
    real = Path(remap(str(synced), opt_ml_root(env))) if synced is not None else None
    skip = tuple(p for p in (*skip, synced, real) if p is not None)
    same = {i for i in map(_identity, skip) if i is not None}
    out: list[OutsideFile] = []
    roots = {(work_dir or Path.cwd()): "the working directory"}
    temp = host_temp_dir(env)
    if temp is not None:
        roots.setdefault(temp, "the temporary folder")
    for root, where in roots.items():
        if _skipped(root, skip, same):
            continue
        out.extend(OutsideFile(where, rel, path, size) for rel, path, size in _walk(root, since, skip))
    return sorted(out, key=lambda f: f.path)
