"""PID 1's other duty: wait for the orphans it adopts, so none stays a zombie.

In the cloud PID 1 is PID 1 of the container. A process whose parent dies is reparented to
it (the DataLoader workers of a rank torchrun killed, a double-forked helper), and when it exits its
entry stays in the process table, a zombie, until PID 1 waits for it: across torchrun's restarts they
pile up. Outside a container (local mode, the tests) `become_subreaper` makes PID 1 adopt its
descendants' orphans the same way (docs/PLATFORM.md §1.3).

PID 1 waits for torchrun itself (subprocess.Popen.wait). A blanket `waitpid(-1)` would race
that wait and could take torchrun's exit status (Popen then reports 0). So the reaper waits only for
children that already exited (state Z in /proc) and that it was not told to leave alone, each by pid.
Standard library only; on a system without /proc or prctl it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
import threading
from collections.abc import Collection
from pathlib import Path

_log = logging.getLogger("sm_dist.pid1")

#: prctl option: orphaned descendants are reparented to the nearest living subreaper ancestor, which
#: can wait(2) for them (<linux/prctl.h>; Linux 3.4+; docs/PLATFORM.md §1.3).
PR_SET_CHILD_SUBREAPER = 36
#: Seconds between two looks for exited orphans.
REAP_EVERY_S = 1.0
_PROC = Path("/proc")


def become_subreaper() -> bool:
    """Adopt the orphans of this process's descendants (prctl PR_SET_CHILD_SUBREAPER); False where the
    system has no such call (not Linux) or refuses it. PID 1 of a container adopts them anyway."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int, proc: Path = _PROC) -> list[int]:
    """The pids whose parent is `pid` (its threads' children files; every /proc entry where the kernel
    has none)."""
    task = proc / str(pid) / "task"
    try:
        found = [int(c) for t in task.iterdir() for c in (t / "children").read_text().split()]
    except (OSError, ValueError):
        return [int(n) for n in _listdir(proc) if n.isdigit() and _stat(proc, n)[1:2] == [str(pid)]]
    return found


def exited(pid: int, proc: Path = _PROC) -> bool:
    """Whether `pid` is a zombie: it exited and its parent has not waited for it yet."""
    return _stat(proc, str(pid))[:1] == ["Z"]


def reap_orphans(keep: Collection[int], proc: Path = _PROC) -> list[int]:
    """Wait for every exited child of this process but those in `keep`; the pids reaped."""
    reaped = []
    for pid in children(os.getpid(), proc):
        if pid in keep or not exited(pid, proc):
            continue
        with contextlib.suppress(ChildProcessError):  # waited for elsewhere meanwhile
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped.append(pid)
    return reaped


class Reaper:
    """A thread reaping exited orphans every REAP_EVERY_S until `stop` (which reaps once more)."""

    def __init__(self, keep: Collection[int], every_s: float = REAP_EVERY_S) -> None:
        self.keep, self.every_s = keep, every_s
        self.reaped: list[int] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sm-dist-reaper", daemon=True)

    def start(self) -> Reaper:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopped.wait(self.every_s):
            self._reap()

    def _reap(self) -> None:
        found = reap_orphans(self.keep)
        if found:
            _log.info("reaped %d orphaned process(es): %s", len(found), " ".join(map(str, found)))
            self.reaped += found

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=10)
        self._reap()


def _listdir(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _stat(proc: Path, pid: str) -> list[str]:
    """/proc/<pid>/stat after the command name: [state, ppid, ...]; [] when unreadable."""
    try:
        return (proc / pid / "stat").read_text().rpartition(")")[2].split()
    except OSError:
        return []


__all__ = ["PR_SET_CHILD_SUBREAPER", "REAP_EVERY_S", "Reaper", "become_subreaper", "children", "exited",
           "reap_orphans"]
