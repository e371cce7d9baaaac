"""Checkpoints a script wrote where SageMaker does not sync them (standard library only).

SageMaker syncs CheckpointConfig.LocalPath (/opt/ml/checkpoints) and nothing else
(docs/PLATFORM.md §1.4). A script that saves `snapshot.pt` in its working directory (the code
dir: pytorch/examples' multinode.py does), or under /tmp, resumes after an in-job restart from
whatever its own host has — another host may have another copy, or none — and after a
whole-job (spot) restart from nothing. `find` lists such files written since the launcher
started; the worker step says so at every restart, and the restore compares the lists of all
hosts (`sm_dist.runtime.checkpoint.folder_restore`): different lists are a split resume, named
before it shows as a hang or a rendezvous error.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sm_dist.contract.container import checkpoint_like

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


def _walk(root: Path, since: float, skip: tuple[Path, ...]) -> list[tuple[str, str, int]]:
    found: list[tuple[str, str, int]] = []
    seen = 0
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not any(Path(top, d) == s or s in Path(top, d).parents for s in skip)]
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


def find(since: float, synced: Path | None, skip: tuple[Path, ...] = (),
         work_dir: Path | None = None) -> list[OutsideFile]:
    """Checkpoint-like files modified since `since` (Unix seconds) in the working directory (`work_dir`
    when given: the launcher's is not the script's) and the temporary folder, outside `synced` (the
    checkpoint folder) and `skip`."""
    skip = tuple(p for p in (*skip, synced) if p is not None)
    out: list[OutsideFile] = []
    roots = {(work_dir or Path.cwd()): "the working directory", Path(tempfile.gettempdir()): "the temporary folder"}
    for root, where in roots.items():
        if any(root == s or s in root.parents for s in skip):
            continue
        out.extend(OutsideFile(where, rel, path, size) for rel, path, size in _walk(root, since, skip))
    return sorted(out, key=lambda f: f.path)
