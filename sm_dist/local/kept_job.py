"""A local job kept on this machine, found by name: `sm-dist status | logs | cost | checkpoints | ... NAME`.

Every local run keeps its folder (`<temp dir>/sm-dist-local/<job>`, `clean.default_base`, or `--local-root`).
When the run ends, `keep_record` writes `job.json` there: what its `LocalJob` handle answered then (status,
summary, cost, checkpoints), since the local S3 endpoint that held the checkpoints stops with the run. `find`
reads it back as a `LocalJobFolder`, the job handle of a local job outside the process that ran it; a job that
still runs (its folder, no record yet) is InProgress, with the logs it wrote so far. A chained run's folder is
its first job's (`<run>-1`), found by the run's name too.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sm_dist.contract.chain import link_name
from sm_dist.contract.job import CheckpointInfo, CheckpointList, JobStatus, Released, tensorboard_command
from sm_dist.errors import ConfigError
from sm_dist.local import debug as local_debug
from sm_dist.local import tb_sync
from sm_dist.local.clean import default_base
from sm_dist.notebook.metrics import Metrics, read_metrics

if TYPE_CHECKING:
    from sm_dist.local.job import LocalJob

_log = logging.getLogger(__name__)
#: The record a finished local job leaves in its folder, and the version of its layout.
RECORD = "job.json"
RECORD_VERSION = 1
#: Seconds between looks at a running job's folder in `wait`.
WAIT_POLL_S = 2.0


def keep_record(base: Path, job: LocalJob) -> None:
    """Write what `job`'s handle answers into `base/job.json`, for `sm-dist status NAME` and the rest later."""
    summary, cost = job.summary(), job.cost()
    roots = [link.record.root for link in job.links if link.record is not None] or [job.run.root]
    record = {
        "version": RECORD_VERSION, "name": job.name, "status": job.status().to_dict(),
        "summary": summary.to_dict(), "summary_text": str(summary), "cost": cost.to_dict(), "cost_text": str(cost),
        "checkpoints": [c.to_dict() for c in job.checkpoints()], "log_roots": [str(root) for root in roots],
    }
    try:
        (base / RECORD).write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError as exc:  # the run's result stands without it; only `sm-dist status NAME` later lacks it
        _log.warning("cannot keep the job's record %s: %s", base / RECORD, exc)


@dataclass(frozen=True)
class Kept:
    """A record as the job's handle returned it when the job ended: `to_dict()` and its printed form."""

    data: dict[str, Any]
    text: str

    @property
    def usd(self) -> float | None:
        """A cost's dollars (a local job's: 0)."""
        value = self.data.get("usd", self.data.get("local_usd"))
        return None if value is None else float(value)

    def to_dict(self) -> dict[str, object]:
        return dict(self.data)

    def __str__(self) -> str:
        return self.text


class LocalJobFolder:
    """The handle of a local job found by name on this machine (`find`): its folder and the record it left."""

    def __init__(self, name: str, base: Path) -> None:
        self.name = name
        self.base = base

    def __repr__(self) -> str:
        return f"LocalJobFolder({self.name!r}, {str(self.base)!r})"

    def _record(self) -> dict[str, Any] | None:
        path = self.base / RECORD
        if not path.is_file():
            return None
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != RECORD_VERSION:
            raise ConfigError("job", self.name, f"{path} is a record of version {data.get('version')}, this sm_dist "
                              f"reads version {RECORD_VERSION}: read its logs (sm-dist logs {self.name})")
        return data

    def _run(self) -> Path | None:
        """The run folder with the hosts (a chain's newest link's)."""
        return local_debug.run_in(self.base)

    def _running(self) -> bool:
        run = self._run()
        return run is not None and (run / "tmp").is_dir() and any((run / "tmp").iterdir())

    def _finished(self) -> dict[str, Any]:
        record = self._record()
        if record is not None:
            return record
        if self._running():
            raise ConfigError("job", self.name, "still runs on this machine: this is known when it ends (its logs so "
                              f"far: sm-dist logs {self.name})")
        raise ConfigError("job", self.name, f"its folder {self.base} holds no {RECORD} (it ended before writing one: "
                          f"killed, or run by an older sm_dist): its logs are there (sm-dist logs {self.name})")

    def status(self) -> JobStatus:
        """As when the job ended (Completed, Failed or Stopped); InProgress while it runs."""
        record = self._record()
        if record is None and self._running():
            return JobStatus(self.name, "InProgress", "Training", f"local: running on this machine ({self.base})")
        fields = dict(self._finished()["status"])
        fields.pop("done", None)
        return JobStatus(**fields)

    def wait(self) -> JobStatus:
        """Block until the job has ended (its record is written), then its status."""
        while self._record() is None and self._running():
            time.sleep(WAIT_POLL_S)
        return self.status()

    def logs(self, follow: bool = False) -> Iterator[str]:
        """Every host's log lines so far, prefixed "[algo-N] " (a chain's: every job's in turn). `follow` changes
        nothing: the process that runs the job shows them as they come."""
        record, run = self._record(), self._run()
        if record is not None:
            roots = [Path(p) for p in record["log_roots"]]
        else:
            links = sorted((self.base / "run").glob("link-*"), key=lambda p: int(p.name[5:]) if p.name[5:].isdigit() else 0)
            roots = links or ([run] if run is not None else [])
        for root in roots:
            for path in sorted((root / "logs").glob("*.log")):
                for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                    yield f"[{path.stem}] {line}"

    def stop(self) -> JobStatus:
        """A finished job's status; a running one is stopped by the process that runs it (Ctrl-C there)."""
        if self._record() is None and self._running():
            raise ConfigError("job", self.name, "runs in the process that started it on this machine: stop it there "
                              "(Ctrl-C: SIGTERM to every host, then the grace period, as SageMaker stops a job)")
        return self.status()

    def checkpoints(self) -> CheckpointList:
        """The step folders at the checkpoint URI when the job ended, newest first."""
        return CheckpointList(CheckpointInfo(**c) for c in self._finished()["checkpoints"])

    def cost(self) -> Kept:
        """0 $ here, and the same wall-clock time priced on the chosen SageMaker instances (`LocalCost`)."""
        record = self._finished()
        return Kept(record["cost"], record["cost_text"])

    def summary(self) -> Kept:
        """What `sm-dist fit --local` printed when the job ended (`to_dict()`: its `--json`)."""
        record = self._finished()
        return Kept(record["summary"], record["summary_text"])

    def tensorboard(self, start: bool = False, port: int = 6006) -> str:
        """`tensorboard --logdir <run>/tensorboard`: what the job synced to its TensorBoard prefix."""
        run = self._run()
        folder = None if run is None else run / tb_sync.FOLDER
        if folder is None or not folder.is_dir():
            raise ConfigError("job", self.name, "ran locally without tensorboard=True (--tensorboard): no TensorBoard "
                              "folder")
        return tensorboard_command(str(folder), start=start, port=port)

    def metrics(self) -> Metrics:
        """The logged metrics, read from the hosts' logs."""
        return read_metrics(self.logs())

    def debug(self, host: str = "algo-1", command: str | None = None, start: bool = False) -> int:
        """A shell in `host`'s view of the job (`command`: run that instead), running or kept."""
        if start:
            raise ConfigError("--run", True, "is for a cloud job's SSM session; a local job's shell opens without it")
        return local_debug.shell(self._host_run(), host, command)

    def stacks(self) -> int:
        """Every running rank's stack, per host."""
        return local_debug.stacks(self._host_run())

    def release_pool(self) -> Released:
        """End the warm pool the job kept (keep_alive_s): its hosts' caches go."""
        from sm_dist.local.warm_pool import end

        pool = end(self._host_run(), self.name)
        idle = round(time.time() - pool.available_at)
        return Released(pool.job, idle, None, f"released the warm pool of {pool.job} (local: its hosts' caches, "
                        f"{pool.folder}, removed after {idle} s of its {pool.keep_alive_s} s keep-alive)")

    def _host_run(self) -> Path:
        run = self._run()
        if run is None:
            raise ConfigError("job", self.name, f"its folder {self.base} holds no hosts")
        return run


def find(name: str, region: str | None = None) -> LocalJobFolder | str:
    """The local job (or chained run) `name` on this machine: its name as local mode printed it, or its folder;
    else where it looked ("here (...)"). `region` is not asked for: a local job has none."""
    for base in (Path(name), default_base() / name):
        if (base / RECORD).is_file() or local_debug.run_in(base) is not None:
            return LocalJobFolder(_name(base, name), base)
    chain = default_base() / link_name(name, 1)  # a chained run keeps its first job's folder
    record = chain / RECORD
    if record.is_file() and json.loads(record.read_text(encoding="utf-8")).get("name") == name:
        return LocalJobFolder(name, chain)
    return f"here (no local run of that name under {default_base()})"


def _name(base: Path, typed: str) -> str:
    """The job's own name: the record's, else the folder's (a path typed names its folder)."""
    record = base / RECORD
    if record.is_file():
        return str(json.loads(record.read_text(encoding="utf-8")).get("name") or base.name)
    return base.name if Path(typed) == base else typed


__all__ = ["RECORD", "Kept", "LocalJobFolder", "find", "keep_record"]
