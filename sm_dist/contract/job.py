"""The job handle: what `sm_dist.fit(...)` returns, whichever backend ran the plan.

Both backends implement `JobHandle` — the cloud `sm_dist.cloud.Job` (a SageMaker training job)
and the local `sm_dist.local.LocalJob` (the same job on this machine) — with the records defined
here, so a notebook or a script written against one works against the other. Standard library
only: the backends import this module, never each other.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

from sm_dist.contract.checkpoint import Manifest

#: TrainingJobStatus values after which nothing changes (the API's own vocabulary).
TERMINAL = ("Completed", "Failed", "Stopped")


@dataclass(frozen=True)
class JobStatus:
    """TrainingJobStatus with its secondary status and the latest message."""

    name: str
    status: str
    """InProgress, Completed, Failed, Stopping or Stopped."""
    secondary: str
    """SecondaryStatus (Starting, Downloading, Training, Uploading, ...; local mode: the stop reason)."""
    message: str = ""
    failure_reason: str | None = None

    @property
    def done(self) -> bool:
        """True once the status is terminal (Completed, Failed or Stopped)."""
        return self.status in TERMINAL

    def to_dict(self) -> dict[str, object]:
        """The fields and `done`, for JSON."""
        return {**asdict(self), "done": self.done}

    def __str__(self) -> str:
        text = f"{self.name}: {self.status} / {self.secondary}"
        text += f" — {self.message}" if self.message else ""
        return text + (f"\n  failure: {self.failure_reason}" if self.failure_reason else "")


@dataclass(frozen=True)
class CheckpointInfo:
    """One step folder under a job's checkpoint URI."""

    step: int
    uri: str
    committed: bool
    """The contract's rule (`contract.checkpoint.committed_manifest`): its manifest is there and parses."""
    total_bytes: int | None = None
    """Sum of the file sizes the manifest lists (or of the files found, when not committed)."""
    files: int | None = None
    world_size: int | None = None
    strategy: str | None = None
    created_unix: float | None = None

    def to_dict(self) -> dict[str, object]:
        """The fields, for JSON."""
        return asdict(self)


#: The listing's columns, as text and as HTML.
CHECKPOINT_COLUMNS = ("step", "committed", "MiB", "files", "world size", "strategy", "created (UTC)", "uri")


class CheckpointList(list[CheckpointInfo]):
    """What `checkpoints()` returns: a list of `CheckpointInfo`, newest first, that prints and
    shows in a notebook as a table."""

    def table_rows(self) -> list[tuple[str, ...]]:
        """One row of text cells per checkpoint (CHECKPOINT_COLUMNS)."""
        def text(value: object) -> str:
            return "-" if value is None else str(value)

        return [(str(c.step), "yes" if c.committed else "no",
                 "-" if c.total_bytes is None else f"{c.total_bytes / 2**20:,.2f}", text(c.files), text(c.world_size),
                 text(c.strategy),
                 "-" if c.created_unix is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(c.created_unix)),
                 c.uri) for c in self]

    def __repr__(self) -> str:
        if not self:
            return "no checkpoints"
        rows = [CHECKPOINT_COLUMNS, *self.table_rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(CHECKPOINT_COLUMNS))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)

    def _repr_html_(self) -> str:
        from sm_dist.markup import escape, table  # HTML only when a notebook asks

        if not self:
            return f"<p>{escape(repr(self))}</p>"
        committed = sum(c.committed for c in self)
        return table(CHECKPOINT_COLUMNS, self.table_rows(), caption=f"{len(self)} checkpoints, {committed} committed",
                     numeric=(0, 2, 3, 4), wrap=(7,))


def checkpoint_info(step: int, uri: str, manifest: Manifest | None, *, total_bytes: int | None = None,
                    files: int | None = None) -> CheckpointInfo:
    """One row of a listing; committed exactly when `manifest` (from committed_manifest) is not None."""
    if manifest is None:
        return CheckpointInfo(step=step, uri=uri, committed=False, total_bytes=total_bytes, files=files)
    return CheckpointInfo(
        step=step, uri=uri, committed=True, total_bytes=sum(f.size for f in manifest.files.values()),
        files=len(manifest.files), world_size=manifest.world_size, strategy=manifest.strategy,
        created_unix=manifest.created_unix,
    )


class Cost(Protocol):
    """What a job cost: `usd` (None while unknown) and a JSON-able form."""

    @property
    def usd(self) -> float | None: ...

    def to_dict(self) -> dict[str, object]: ...


class Summary(Protocol):
    """A job's summary: printed by `sm-dist fit` (str) and by `--json` (to_dict)."""

    def to_dict(self) -> dict[str, object]: ...


@runtime_checkable
class JobHandle(Protocol):
    """A training job, in the cloud or on this machine."""

    @property
    def name(self) -> str:
        """The job's name (a run's for a chain; the local job's own name)."""

    def status(self) -> JobStatus:
        """Its status now: TrainingJobStatus, SecondaryStatus and the latest message."""

    def wait(self) -> JobStatus:
        """Block until the job is done (a local job is done when its handle is returned)."""
        ...

    def logs(self, follow: bool = False) -> Iterator[str]:
        """Every host's log lines, each prefixed "[algo-N] "."""
        ...

    def stop(self) -> JobStatus:
        """Stop the job if it still runs (SageMaker: SIGTERM, then the grace period) and return its status."""

    def checkpoints(self) -> list[CheckpointInfo]:
        """Step folders at the checkpoint URI, newest first (a `CheckpointList`: a table in a notebook)."""
        ...

    def cost(self) -> Cost:
        """What the job cost: billable seconds × instances × the price, next to the pre-launch estimate."""

    def summary(self) -> Summary:
        """Status, steps, restarts, resume, chaos, verification and cost as one record (`to_dict()` for JSON)."""

    def tensorboard(self, start: bool = False, port: int = 6006) -> str:
        """`tensorboard --logdir ...` on the job's TensorBoard files (a job run with tensorboard=True): its S3
        prefix in the cloud, the folder local mode synced to; `start=True` starts it and returns its address."""
        ...


@runtime_checkable
class Steppable(Protocol):
    """A job one can step inside (`sm-dist debug`, `sm-dist stacks`): a shell in one host, every rank's stack."""

    def debug(self, host: str = "algo-1", command: str | None = None, start: bool = False) -> int:
        """A shell in `host` (`command`: run that there instead; a cloud job: print the SSM session, `start`
        opens it); its exit code."""
        ...

    def stacks(self) -> int:
        """Print every running rank's Python stack, per host; its exit code."""
        ...


@dataclass(frozen=True)
class Released:
    """What `release_pool()` ended: the warm pool a finished job kept (keep_alive_s), and for how long."""

    job: str
    retained_s: int | None
    """Seconds the pool was kept (None: not reported)."""
    retained_usd: float | None
    line: str
    """The one line `sm-dist release` prints."""

    def to_dict(self) -> dict[str, object]:
        """The fields but the line, and `released`, for JSON."""
        return {"job": self.job, "released": True, "retained_s": self.retained_s, "retained_usd": self.retained_usd}

    def __str__(self) -> str:
        return self.line


@runtime_checkable
class Releasable(Protocol):
    """A job that may keep a warm pool after it ends (`sm-dist release`)."""

    def release_pool(self) -> Released:
        """End the pool now; a ConfigError saying why when there is none to end."""
        ...


def tensorboard_command(logdir: str, *, start: bool = False, port: int = 6006) -> str:
    """The shell command that shows `logdir` (a folder or s3://...) in TensorBoard; with `start`, TensorBoard
    started in the background on `port` (this Python's `tensorboard` package) and the line saying where."""
    import shlex

    from sm_dist.errors import ConfigError, check_int

    check_int("port", port, 1, "expected a TCP port, 1..65535 (TensorBoard's default: 6006)", maximum=65535)
    command = shlex.join(["tensorboard", "--logdir", logdir, "--port", str(port)])
    if not start:
        return command
    import importlib.util
    import socket
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    if importlib.util.find_spec("tensorboard") is None:
        raise ConfigError("tensorboard", logdir, "the tensorboard package is not installed here: pip install "
                          f"'sm_dist[tensorboard]', or run: {command}")
    with socket.socket() as probe:  # TensorBoard would exit on a taken port, after this had said it runs there
        try:
            probe.bind(("localhost", port))
        except OSError:
            raise ConfigError("port", port, "is in use here (a TensorBoard started before?): pick another port "
                              "(--port)") from None
    log = Path(tempfile.gettempdir()) / f"sm-dist-tensorboard-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--port", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return (f"TensorBoard on http://localhost:{port}/ (pid {process.pid}; kill {process.pid} to stop it; its log "
            f"{log}): {command}")


__all__ = ["CHECKPOINT_COLUMNS", "TERMINAL", "CheckpointInfo", "CheckpointList", "Cost", "JobHandle", "JobStatus",
           "Releasable", "Released", "Steppable", "Summary", "checkpoint_info", "tensorboard_command"]
