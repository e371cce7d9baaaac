"""What a local run is told and what it reports: `RunSettings` (how local mode runs a job, apart from
the job itself), `Outcome` (how the job ended) and `RunRecord` (everything one run left behind),
shared by the runner (`sm_dist.local.runner`), the failure reading (`sm_dist.local.failure`), the
chain of runs (`sm_dist.local.chain`) and the job handle (`sm_dist.local.job`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sm_dist.contract.faults import Fault
from sm_dist.local.agent import LineSink
from sm_dist.local.progress import Progress
from sm_dist.local.stores import Store

#: Managed spot restarts a job as long as MaxWaitTimeInSeconds allows; local mode caps the count.
DEFAULT_MAX_JOB_RESTARTS = 3


def print_line(host: str, line: str, stream: TextIO | None = None) -> None:
    """Default log sink: the line with a host prefix, as CloudWatch shows one stream per host."""
    out = stream or sys.stdout
    out.write(f"[{host}] {line}\n")
    out.flush()


@dataclass
class Outcome:
    """How a local job ended."""

    status: str = "InProgress"  # InProgress | Completed | Failed | Stopped
    job_restarts: int = 0
    exit_codes: list[dict[str, int]] = field(default_factory=list)  # per attempt
    failures: dict[str, str] = field(default_factory=dict)  # host -> output/failure
    restored_files: list[int] = field(default_factory=list)  # per attempt
    stopped_reason: str | None = None  # "MaxRuntimeExceeded" when the time limit stopped it
    error: str | None = None  # the failing worker's own error line, host and rank (from the logs)
    error_detail: dict[str, object] | None = None  # that error's fields (type, message, file, line, host, rank)
    first_failed: list[str] = field(default_factory=list)  # the hosts whose failure ended the job
    stopped_hosts: list[str] = field(default_factory=list)  # the hosts local mode stopped because of it
    host_outcomes: dict[str, str] = field(default_factory=dict)  # host -> its own outcome (sm_dist.local.failure)
    shared_opt_ml: bool = False  # no private /opt/ml per host here (sm_dist.local.mountns): paths remapped only
    warnings: list[str] = field(default_factory=list)  # what the summary must say (the checkpoint sync's problems)
    restart_causes: list[str] = field(default_factory=list)  # "restart N: HOST CAUSE" (sm_dist.local.restarts)
    tensorboard_uploads_running: int = 0  # TensorBoard files synced while the job ran (before the last pass)
    started: float = field(default_factory=time.time)
    ended: float | None = None


@dataclass
class RunSettings:
    """How local mode runs a job (not part of the job itself)."""

    job_root: Path
    store: Store | None = None
    tensorboard_store: Store | None = None  # TensorBoardOutputConfig.S3OutputPath (sm_dist.local.tb_sync)
    faults: Sequence[Fault] = ()
    grace_seconds: float = 120.0
    sync_interval: float = 0.5
    extra_env: Mapping[str, str] = field(default_factory=dict)
    on_line: LineSink = print_line
    max_job_restarts: int = DEFAULT_MAX_JOB_RESTARTS
    s3_fault_switch: Callable[[float], None] | None = None  # fail the endpoint for N seconds
    max_runtime_s: float | None = None  # StoppingCondition.MaxRuntimeInSeconds, over all attempts
    nproc_per_host: int | None = None  # worker processes per host, when known (thread budget)
    # the live view, called every supervise tick with the LocalRunner (Any: the records do not import the runner)
    on_tick: Callable[[Any], None] | None = None
    private_opt_ml: bool = True  # show each host its own folder at /opt/ml where the OS allows it


@dataclass
class RunRecord:
    """Everything one run (the chaos run or the verify run) left behind."""

    outcome: Outcome
    progress: Progress
    in_job_restarts: int
    fired: list[str]
    root: Path
    events: list[str] = field(default_factory=list)
    checkpoint_keys: dict[str, int] = field(default_factory=dict)
    """Files at the checkpoint URI when the run ended -> size (the local endpoint stops with the run)."""
    checkpoint_manifests: dict[str, bytes] = field(default_factory=dict)
    """Step folder -> its manifest's bytes when the run ended (what decides "committed")."""
    checkpoint_written: bool | None = None
    """Whether anything reached the checkpoint URI while the run ran (None: no URI, or it could not be listed)."""
    warnings: list[str] = field(default_factory=list)
    """What this run could not prove (pgwatch: world size, process group)."""
    tensorboard_uri: str | None = None
    """The run's TensorBoardOutputConfig.S3OutputPath on the local endpoint (None: tensorboard off)."""
    tensorboard_keys: dict[str, int] = field(default_factory=dict)
    """What that prefix held when the run ended -> size, downloaded to `<root>/tensorboard`."""

    @property
    def seconds(self) -> float:
        return (self.outcome.ended or self.outcome.started) - self.outcome.started
