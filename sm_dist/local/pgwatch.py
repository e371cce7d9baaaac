"""What local mode can see of a job's process group, from outside the workers (Linux /proc).

torchrun gives every worker `WORLD_SIZE`, `RANK`, `MASTER_ADDR` and `MASTER_PORT`; a worker that
calls `init_process_group` (env://, the default) connects to the TCP store at MASTER_PORT and keeps
that connection for the group's lifetime (rank 0 also listens on it). A worker seen with no such
socket, sampled while it runs, never joined a process group: e.g. a script that trains one
independent copy per process. That is what this detects; it cannot see which collectives a script
runs, nor whether a group it created later has another size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sm_dist.local.procs import ProcInfo

_PROC = Path("/proc")
#: /proc/net/tcp state code of a listening socket.
_LISTEN = "0A"


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    except OSError:
        return set()
    return inodes


def _store_sockets(pid: int, port: int) -> bool:
    """True if `pid` holds a TCP socket to (or listening on) `port`."""
    inodes = _socket_inodes(pid)
    if not inodes:
        return False
    hex_port = f"{port:04X}"
    for table in ("tcp", "tcp6"):
        try:
            rows = (_PROC / str(pid) / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) < 10 or cols[9] not in inodes:
                continue
            local_port, remote_port, state = cols[1].rsplit(":", 1)[1], cols[2].rsplit(":", 1)[1], cols[3]
            if remote_port == hex_port or (local_port == hex_port and state == _LISTEN):
                return True
    return False


@dataclass
class GroupWatch:
    """Per worker (host, RANK): whether it was ever seen connected to the job's store."""

    expected_world_size: int | None = None
    joined: dict[tuple[str, str], bool] = field(default_factory=dict)
    world_sizes: set[str] = field(default_factory=set)

    def sample(self, host: str, worker: ProcInfo) -> None:
        """Look at one live worker (cheap once it has been seen joined)."""
        key = (host, worker.env.get("RANK", "?"))
        if self.joined.get(key):
            return
        self.world_sizes.add(worker.env.get("WORLD_SIZE", "?"))
        port = worker.env.get("MASTER_PORT", "")
        self.joined[key] = port.isdigit() and _store_sockets(worker.pid, int(port))

    def warnings(self) -> list[str]:
        """What the job may not have proven; empty when nothing looked wrong (or nothing was seen)."""
        out = []
        expected = str(self.expected_world_size) if self.expected_world_size else None
        other = sorted(w for w in self.world_sizes if expected and w != expected)
        if other:
            out.append(f"workers got WORLD_SIZE={','.join(other)}, the plan has {expected} processes")
        alone = sorted(f"rank {rank} on {host}" for (host, rank), ok in self.joined.items() if not ok)
        if alone:
            out.append(f"never saw a process group on {', '.join(alone)} (no connection to the MASTER_PORT store "
                       "while it ran): each may have trained alone, so this run does not prove distributed training")
        return out
