"""Where checkpoint files live: the storage interface and the "local" (directory) storage.

Every storage works the same way: a rank writes its files into a private *staging* folder on
local disk, then *publishes* each one into the step folder (rename, copy or upload), and rank 0
*commits* by writing the manifest last. Nothing a storage exposes under a final name is ever
half written: a reader sees a file completely or not at all. Standard library only.
"""

from __future__ import annotations

import logging
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from sm_dist.contract.checkpoint import (
    MANIFEST_NAME,
    Manifest,
    parse_step,
    sha256_file,
    step_dirname,
)
from sm_dist.errors import CheckpointError

_log = logging.getLogger(__name__)


class Storage(ABC):
    """Interface of a checkpoint storage; paths inside a step folder are '/'-separated."""

    uri: str = ""

    @abstractmethod
    def stage_dir(self, step: int, rank: int) -> Path:
        """A fresh, empty local folder where `rank` writes its files for `step`."""

    @abstractmethod
    def publish(self, step: int, src: Path, rel: str) -> None:
        """Make the staged file `src` durable as `rel` inside the step folder."""

    @abstractmethod
    def commit(self, step: int, text: str, midway: Callable[[], None] | None = None) -> None:
        """Write the manifest (last, once, atomically). `midway` is a test hook (see faults)."""

    @abstractmethod
    def list_steps(self) -> list[int]:
        """Steps that have a folder, committed or not, ascending."""

    @abstractmethod
    def read_manifest(self, step: int) -> bytes | None:
        """The manifest bytes of `step`, or None if the step was never committed."""

    @abstractmethod
    def verify(self, step: int, manifest: Manifest) -> list[str]:
        """Problems found comparing stored files with the manifest (empty list: good)."""

    @abstractmethod
    def local_copy(self, step: int, manifest: Manifest, rels: list[str]) -> Path:
        """A local folder holding the files `rels` of `step`, each verified against the manifest."""

    @abstractmethod
    def delete(self, step: int) -> None:
        """Remove a step folder, manifest first (a half-deleted folder is never 'committed')."""

    def is_durable(self, step: int) -> bool:
        """True when `step` is safe where a restarted job will look (decides retention)."""
        return True

    def release(self, step: int) -> None:
        """Drop what `local_copy(step)` fetched, once it is loaded. Default: nothing to drop
        (a local folder is the checkpoint itself); S3 storage deletes its download."""

    def check_access(self) -> None:
        """Fail early with a CheckpointError if the storage cannot be written (rank 0 only)."""


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename in it survives a power loss (POSIX)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(path: Path, data: bytes, midway: Callable[[], None] | None = None) -> None:
    """Write `data` to `path` and fsync it; calls `midway` after the first half (test hook)."""
    half = len(data) // 2
    with open(path, "wb") as handle:
        handle.write(data[:half])
        if midway is not None:
            handle.flush()
            os.fsync(handle.fileno())
            midway()
        handle.write(data[half:])
        handle.flush()
        os.fsync(handle.fileno())


def verify_files(folder: Path, manifest: Manifest, rels: list[str] | None = None) -> list[str]:
    """Compare files under `folder` with the manifest: presence, size, then sha256."""
    problems = []
    for rel in manifest.files if rels is None else rels:
        entry = manifest.files[rel]
        path = folder / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
        elif path.stat().st_size != entry.size:
            problems.append(f"{rel}: {path.stat().st_size} bytes, manifest says {entry.size}")
        elif sha256_file(path) != entry.sha256:
            problems.append(f"{rel}: sha256 differs from the manifest (corrupted)")
    return problems


class LocalStorage(Storage):
    """Checkpoints in a directory (tests, local mode, a shared file system)."""

    #: Suffix of temporary names; SageMakerSyncStorage uses the one SageMaker's uploader skips.
    tmp_suffix = ".tmp"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.uri = str(self.root)
        self._verified: set[tuple[int, str]] = set()  # (step, file) this process already hashed

    def _step(self, step: int) -> Path:
        return self.root / step_dirname(step)

    def _stage_root(self) -> Path:
        return self.root / ".staging"

    def stage_dir(self, step: int, rank: int) -> Path:
        path = self._stage_root() / f"{step_dirname(step)}-rank{rank:05d}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def publish(self, step: int, src: Path, rel: str) -> None:
        dest = self._step(step) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(src, dest)  # same file system: atomic, no copy
        except OSError:
            tmp = dest.with_name(dest.name + self.tmp_suffix)
            shutil.copyfile(src, tmp)
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, dest)
        fsync_dir(dest.parent)

    def commit(self, step: int, text: str, midway: Callable[[], None] | None = None) -> None:
        folder = self._step(step)
        final = folder / MANIFEST_NAME
        data = text.encode("utf-8")
        if final.exists():
            if final.read_bytes() == data:
                return
            raise CheckpointError(f"{final} already exists with other content; refusing to overwrite a commit")
        tmp = folder / (MANIFEST_NAME + self.tmp_suffix)
        write_durable(tmp, data, midway)
        os.replace(tmp, final)
        fsync_dir(folder)

    def list_steps(self) -> list[int]:
        if not self.root.is_dir():
            return []
        steps = (parse_step(p.name) for p in self.root.iterdir() if p.is_dir())
        return sorted(s for s in steps if s is not None)

    def read_manifest(self, step: int) -> bytes | None:
        try:
            return (self._step(step) / MANIFEST_NAME).read_bytes()
        except FileNotFoundError:
            return None

    def verify(self, step: int, manifest: Manifest) -> list[str]:
        problems = verify_files(self._step(step), manifest)
        if not problems:
            self._verified.update((step, rel) for rel in manifest.files)
        return problems

    def local_copy(self, step: int, manifest: Manifest, rels: list[str]) -> Path:
        unchecked = [rel for rel in rels if (step, rel) not in self._verified]  # don't hash twice
        problems = verify_files(self._step(step), manifest, unchecked)
        if problems:
            raise CheckpointError(f"{self._step(step)}: {'; '.join(problems)}")
        return self._step(step)

    def delete(self, step: int) -> None:
        folder = self._step(step)
        self._verified = {key for key in self._verified if key[0] != step}
        (folder / MANIFEST_NAME).unlink(missing_ok=True)
        if folder.is_dir():
            fsync_dir(folder)
        shutil.rmtree(folder, ignore_errors=True)

    def check_access(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".probe{os.getpid()}{self.tmp_suffix}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise CheckpointError(f"checkpoint folder {self.root} is not writable ({exc.strerror}); "
                                  "pick a writable folder") from None


__all__ = ["LocalStorage", "Storage", "fsync_dir", "verify_files", "write_durable"]
