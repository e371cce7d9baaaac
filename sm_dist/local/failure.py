"""The real error of a failed local job, read from the hosts' logs: a worker's own error (the parsing is
the contract's, `sm_dist.contract.worker_errors`, shared with the container's launcher), else what
stopped a host before its container command ran (local mode's own helper, `sm_dist.local.mountns`)."""

from __future__ import annotations

from pathlib import Path

from sm_dist.contract.worker_errors import WorkerError, cause, errors_in
from sm_dist.local.mountns import HELPER_PREFIX


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def real_error(logs: dict[str, Path]) -> WorkerError | None:
    """The error most likely to be the cause: the last non-collateral one (hosts in order; a log
    holds every attempt, the last is the one that failed the job), else the last collateral one;
    None when the logs hold no error line."""
    every: list[WorkerError] = []
    for host, path in logs.items():
        every.extend(errors_in(host, _read(path).replace("\r", "\n").splitlines()))
    return cause(every)


def start_error(logs: dict[str, Path]) -> str | None:
    """Why a host stopped before its container command started (local mode's helper says so), with the host."""
    for host, path in logs.items():
        for line in _read(path).splitlines():
            if line.startswith(HELPER_PREFIX):
                return f"{line[len(HELPER_PREFIX):].strip()}  ({host}, before the container command started)"
    return None


__all__ = ["real_error", "start_error"]
