"""The real error of a failed local job, read from the hosts' logs: a worker's own error (the parsing is
the contract's, `sm_dist.contract.worker_errors`, shared with the container's PID 1), else what
stopped a host before its container command ran (local mode's own helper, `sm_dist.local.mountns`);
and each host's own outcome: its exit code and its error, or that local mode stopped it after
another host failed (as SageMaker stops a job's other instances)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sm_dist.contract.worker_errors import WorkerError, cause, errors_in
from sm_dist.local.mountns import HELPER_PREFIX

if TYPE_CHECKING:
    from sm_dist.local.run_records import Outcome

_log = logging.getLogger("sm_dist.local.runner")  # the runner's log: where "stopping the others" was said


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def host_errors(logs: Mapping[str, Path]) -> dict[str, list[WorkerError]]:
    """Every host's error lines, in the order of its log (a log holds every attempt)."""
    return {host: errors_in(host, _read(path).replace("\r", "\n").splitlines()) for host, path in logs.items()}


def real_error(logs: Mapping[str, Path], first: Sequence[str] = ()) -> WorkerError | None:
    """The error most likely to be the cause: a host's own error (the last one a peer's death did not
    cause in its log), of the first host in `first` (those that failed first: the cause is the first
    failure, not what followed it) that has one, else of the first host in order; else the last
    collateral one; None when the logs hold no error line."""
    found = host_errors(logs)
    for host in [*(h for h in first if h in found), *found]:
        own = cause(e for e in found[host] if not e.collateral)
        if own is not None:
            return own
    return cause(e for errors in found.values() for e in errors)


def start_error(logs: Mapping[str, Path]) -> str | None:
    """Why a host stopped before its container command started (local mode's helper says so), with the host."""
    for host, path in logs.items():
        for line in _read(path).splitlines():
            if line.startswith(HELPER_PREFIX):
                return f"{line[len(HELPER_PREFIX):].strip()}  ({host}, before the container command started)"
    return None


def _own(error: WorkerError) -> str:
    return error.text + (f"  at {error.at}" if error.at else "") + (f"  (rank {error.rank})" if error.rank else "")


def not_restarted(failure: str) -> str | None:
    """Why PID 1 stopped the restarts, from its `output/failure` (`container.failure_text`: the
    error's line, then "not restarted: ..."); None when it did not say."""
    return next((line for line in failure.splitlines()[:3] if line.startswith("not restarted: ")), None)


def failed_first(hosts: Sequence[str], codes: Sequence[int | None]) -> tuple[list[str], list[str]]:
    """A host failed while others ran (exit codes, None: running): the hosts whose failure ends the job,
    and those still running, which local mode stops because of it (said in the log)."""
    first = [h for h, c in zip(hosts, codes, strict=True) if c not in (None, 0)]
    running = [h for h, c in zip(hosts, codes, strict=True) if c is None]
    failed = ", ".join(f"{h} (exit code {c})" for h, c in zip(hosts, codes, strict=True) if c not in (None, 0))
    _log.error("%s failed%s", failed, f"; stopping {', '.join(running)}" if running else "")
    return first, running


def host_outcomes(codes: Mapping[str, int], logs: Mapping[str, Path], first: Sequence[str],
                  stopped: Sequence[str]) -> dict[str, str]:
    """One line per host, its own: "exit 1: ValueError: ...  at train.py:22 in main  (rank 1)", "done",
    or "stopped after algo-2 failed" (with its own error first when it had raised one too)."""
    errors = host_errors(logs)
    after = f"stopped after {', '.join(first)} failed" if first else "stopped"
    out: dict[str, str] = {}
    for host, code in codes.items():
        own = cause(e for e in errors.get(host, []) if not e.collateral)
        if host in stopped:
            out[host] = f"{_own(own)}; then {after}" if own is not None else after
        elif code == 0:
            out[host] = "done"
        else:
            out[host] = f"exit {code}" + (f": {_own(own)}" if own is not None else "")
    return out


def explain_failure(outcome: Outcome, logs: Mapping[str, Path], codes: Mapping[str, int]) -> None:
    """Fill a failed job's `outcome`: the error (the cause: the first failure's), its fields and why it
    was not restarted, each host's own outcome, and `failures` of the hosts local mode stopped, whose
    own files can only say SIGTERM: "stopped after algo-N failed"."""
    found = real_error(logs, outcome.first_failed)
    outcome.error = found.line() if found else start_error(logs)
    outcome.error_detail = None if found is None else {
        **found.to_dict(), "not_restarted": not_restarted(outcome.failures.get(found.host, ""))}
    outcome.host_outcomes = host_outcomes(codes, logs, outcome.first_failed, outcome.stopped_hosts)
    for host in outcome.stopped_hosts:
        if outcome.host_outcomes.get(host, "").startswith("stopped"):
            outcome.failures[host] = outcome.host_outcomes[host]


__all__ = ["explain_failure", "failed_first", "host_errors", "host_outcomes", "not_restarted", "real_error", "start_error"]
