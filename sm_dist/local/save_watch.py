"""See a script's checkpoint saves begin, the moment they do (Linux inotify): chaos `kill-in-save:N`.

The hosts' checkpoint folders are watched, every folder under them too. A save is the writing of
one checkpoint: its first file appearing or changing under a host's folder. Writes to the same
checkpoint (Hugging Face's `checkpoint-40/`, DCP's `step_4/`, a `snapshot.pt` rewritten in place;
a path's checkpoint is `checkpoint_of`), on any host, are one save; a write to another checkpoint
begins the next, and so does a file of the same checkpoint written again after QUIET_S without a
write (the script saved it anew; a busy machine may pause a save between its files, never that long
inside one file's writes). `on_save(n, host,
rel)` is called from the watch's thread as the n-th save writes its first file (`rel`): a kill from there
lands while the script is still writing that checkpoint, its other files not written yet.

Not counted: folders being made (a save begins with its first file), names SageMaker's sync skips
(its markers, sm_dist's restore's temporary files), files moved into place (the in-job restore's
downloads), deletions.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import select
import struct
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from sm_dist.contract.container import sync_skipped

#: A file of the current checkpoint written again after this long without a write begins a new save
#: (a torch.save writes its file without such pauses; a script saves one checkpoint again a step later).
QUIET_S = 1.0
#: inotify's event bits (linux/inotify.h).
IN_MODIFY, IN_CREATE, IN_ISDIR = 0x2, 0x100, 0x40000000
_MASK = IN_MODIFY | IN_CREATE
_EVENT = struct.Struct("iIII")
_log = logging.getLogger(__name__)


def checkpoint_of(rel: str) -> str | None:
    """The checkpoint a written path belongs to: its path up to the first name with a number in it
    (`checkpoint-40/model.safetensors` -> `checkpoint-40`, `checkpoints/checkpoint_0/x.bin` ->
    `checkpoints/checkpoint_0`), or the whole path (`last.ckpt`); None for names never counted."""
    if not rel or sync_skipped(rel):
        return None
    parts = rel.split("/")
    for index, part in enumerate(parts):
        if re.search(r"\d", part):
            return "/".join(parts[: index + 1])
    return rel


class _Inotify:
    """The few calls of Linux's inotify API this needs (ctypes: the standard library has none)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)  # this process's own libc (find_library would run ldconfig)
        self._add = libc.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")

    def add(self, path: Path) -> int:
        wd = int(self._add(self.fd, os.fsencode(path), _MASK))
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path} failed")
        return wd

    def events(self, timeout: float) -> list[tuple[int, int, str]]:
        """(watch, mask, name) of what happened, waiting up to `timeout` seconds for the first."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return []
        try:
            data = os.read(self.fd, 64 * 1024)
        except BlockingIOError:
            return []
        out, offset = [], 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size: offset + _EVENT.size + length]
            out.append((wd, mask, os.fsdecode(raw.rstrip(b"\0"))))
            offset += _EVENT.size + length
        return out

    def close(self) -> None:
        os.close(self.fd)


class SaveWatch:
    """Counts the saves written into the hosts' checkpoint folders; calls `on_save` as each begins."""

    def __init__(self, folders: Mapping[str, Path], on_save: Callable[[int, str, str], None], saves: int = 0) -> None:
        """`saves`: those counted before (an earlier attempt of the job): the next is `saves + 1`."""
        self.folders = dict(folders)
        self.on_save = on_save
        self.saves = saves
        self._current: str | None = None
        self._files: set[str] = set()  # the current save's files
        self._last = 0.0
        self._where: dict[int, tuple[str, Path]] = {}  # watch -> (host, folder it watches)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._inotify: _Inotify | None = None

    def start(self) -> None:
        """Watch every host's folder (and the folders under it) from a background thread."""
        self._inotify = _Inotify()
        for host, folder in self.folders.items():
            self._watch_tree(host, folder)
        self._thread = threading.Thread(target=self._loop, name="save-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def _watch_tree(self, host: str, folder: Path) -> None:
        assert self._inotify is not None
        for path in [folder, *(p for p in folder.rglob("*") if p.is_dir())] if folder.is_dir() else []:
            try:
                self._where[self._inotify.add(path)] = (host, path)
            except OSError as exc:  # gone since the listing
                _log.debug("cannot watch %s: %s", path, exc)

    def _loop(self) -> None:
        assert self._inotify is not None
        while not self._stop.is_set():
            for wd, mask, name in self._inotify.events(0.2):
                where = self._where.get(wd)
                if where is None or not name:
                    continue
                host, parent = where
                path = parent / name
                if mask & IN_ISDIR:
                    if mask & IN_CREATE:  # the files written into it from now on, and any already there
                        self._watch_tree(host, path)
                        for inner in sorted(p for p in path.rglob("*") if p.is_file()):
                            self.seen(host, inner.relative_to(self.folders[host]).as_posix())
                    continue
                self.seen(host, path.relative_to(self.folders[host]).as_posix())

    def seen(self, host: str, rel: str, now: float | None = None) -> None:
        """A file written under a host's folder: count it as the next save when it begins one."""
        unit = checkpoint_of(rel)
        if unit is None:
            return
        now = time.monotonic() if now is None else now
        begins = unit != self._current or (rel in self._files and now - self._last >= QUIET_S)
        if begins:
            self._files = set()
        self._current, self._last = unit, now
        self._files.add(rel)
        if begins:
            self.saves += 1
            self.on_save(self.saves, host, rel)


__all__ = ["QUIET_S", "SaveWatch", "checkpoint_of"]
