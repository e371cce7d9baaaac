"""The real error of a failed local job, read from the hosts' logs (the parsing is the contract's,
`sm_dist.contract.worker_errors`, shared with the container's launcher)."""

from __future__ import annotations

from pathlib import Path

from sm_dist.contract.worker_errors import WorkerError, cause, errors_in


def real_error(logs: dict[str, Path]) -> WorkerError | None:
    """The error most likely to be the cause: the last non-collateral one (hosts in order; a log
    holds every attempt, the last is the one that failed the job), else the last collateral one;
    None when the logs hold no error line."""
    every: list[WorkerError] = []
    for host, path in logs.items():
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        every.extend(errors_in(host, text.replace("\r", "\n").splitlines()))
    return cause(every)


__all__ = ["real_error"]
