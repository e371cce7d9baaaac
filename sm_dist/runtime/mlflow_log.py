"""Rank 0's metric lines into MLflow as well, when the job was planned with `mlflow=`.

The plan sets `SM_DIST_MLFLOW=1` next to `MLFLOW_TRACKING_URI` (the tracking server's ARN, or local
mode's file store), `MLFLOW_EXPERIMENT_NAME` and `MLFLOW_RUN_NAME` (sm_dist.planning.mlflow_setting).
`metrics.log_metrics` calls `log_step` after printing its line. With the variable unset that is one
dictionary lookup and mlflow is never imported; with it set, the line is put on a queue and a
daemon thread logs it, so a slow or unreachable server (mlflow's HTTP client retries for minutes)
never holds up a step.

One run: the script's own active MLflow run, if it has one when a line is logged; else the run in
the user's `MLFLOW_RUN_ID`; else sm_dist's run for the job, tagged `sm_dist_job=<TRAINING_JOB_NAME>`
in the script's active experiment (else `MLFLOW_EXPERIMENT_NAME`) and named `MLFLOW_RUN_NAME`: found
again after a restart, created the first time. Its id goes into `MLFLOW_RUN_ID`, so a later
`mlflow.start_run()` or `mlflow.log_metric()` of the script continues that run; should the script's
first MLflow call have raced sm_dist's first line and started a run of its own, sm_dist moves its
lines there and deletes its run. Every line
is logged with its step number (`log_batch`, the lines queued meanwhile in one call). At exit the
queue is drained (at most `DRAIN_S`) and sm_dist's own run is ended. Anything that goes wrong
(mlflow not importable, the server unreachable, credentials refused) is one warning line and no
more MLflow logging: training goes on. docs/PLATFORM.md §1.15.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_log = logging.getLogger(__name__)

#: Set by the plan when `mlflow=` is given (sm_dist.planning.mlflow_setting.LOG_ENV).
LOG_ENV = "SM_DIST_MLFLOW"
#: The run's name (mlflow reads no such variable; the plan sets it from MlflowConfig.MlflowRunName).
RUN_NAME_ENV = "MLFLOW_RUN_NAME"
#: The run's tag naming its training job: a restarted rank 0 (torchrun's restart, the next attempt) finds
#: the job's run by it and continues it.
JOB_TAG = "sm_dist_job"
#: How long the process waits at exit for the queued lines to reach the server.
DRAIN_S = 30.0
#: Lines kept to move to the script's own run should it start one after sm_dist's (see `_Worker._move`).
MOVE_MAX_LINES = 1000
#: MLflow's log_batch takes at most 1000 metrics a call.
BATCH_MAX = 1000


@dataclass(frozen=True)
class _Line:
    step: int
    values: Mapping[str, float]
    timestamp_ms: int
    active_run: str | None
    """The script's active run when the line was logged (mlflow keeps it per thread)."""
    active_experiment: str | None


_STOP = object()
_worker: _Worker | None = None


def log_step(step: int, metrics: Mapping[str, object]) -> None:
    """Queue `metrics` at `step` for MLflow when the plan asked for it (rank 0 calls this)."""
    global _worker
    if os.environ.get(LOG_ENV) != "1":
        return
    if _worker is None:
        _worker = _Worker()
        _worker.start()
    if _worker.failed:
        return
    values = {key: number for key, value in metrics.items() if (number := _number(value)) is not None}
    if values:
        run, experiment = _scripts_run()
        _worker.lines.put(_Line(step, values, int(time.time() * 1000), run, experiment))


def _number(value: object) -> float | None:
    """The value as the metric line prints it (numbers, 0-d tensors, numpy scalars); None for inf (MLflow refuses it)."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isinf(number) else number


def _scripts_run() -> tuple[str | None, str | None]:
    """(the script's active run id, its active experiment id), read in the script's thread. Never imports
    mlflow, never touches it while it is being imported (by this module's thread), never raises."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is None or getattr(getattr(mlflow, "__spec__", None), "_initializing", False):
        return None, None
    try:
        active = mlflow.active_run()
        fluent = sys.modules.get("mlflow.tracking.fluent")
        return (active.info.run_id if active is not None else None,
                getattr(fluent, "_active_experiment_id", None) if fluent is not None else None)
    except Exception:  # mlflow half-imported or changed: the line still goes to sm_dist's run
        return None, None


def _warn(why: str) -> None:
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    _log.warning("[sm_dist] metric lines not logged to MLflow (%s): %s; training goes on", uri, why)


class _Worker(threading.Thread):
    """Logs the queued lines into one run; stops for good after its first failure."""

    def __init__(self) -> None:
        super().__init__(name="sm_dist-mlflow", daemon=True)
        self.lines: queue.Queue[Any] = queue.Queue()
        self.failed = False
        self.run_id: str | None = None
        self.ours = False
        self.created: list[_Line] | None = None
        """The lines sent to a run this process created, while they may still move to the script's run."""
        atexit.register(self.finish)

    def run(self) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            return self._fail("mlflow is not importable in the job (add mlflow, and sagemaker-mlflow for a tracking "
                              "server's ARN, to requirements.txt)")
        try:
            client = MlflowClient()
            while (batch := self._next()) is not None:
                self._log(client, batch)
            self._end(client)
        except Exception as exc:  # any failure to reach or use the server: never a crash of training
            first = str(exc).splitlines()[0] if str(exc) else ""
            self._fail(f"{type(exc).__name__}: {first}")

    def _fail(self, why: str) -> None:
        self.failed = True
        _warn(why)

    def _next(self) -> list[_Line] | None:
        """The next line and those queued behind it (up to BATCH_MAX metrics); None at the stop mark."""
        item = self.lines.get()
        if item is _STOP:
            return None
        batch = [item]
        while sum(len(line.values) for line in batch) < BATCH_MAX:
            try:
                item = self.lines.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                self.lines.put(_STOP)  # this batch first, then stop
                break
            batch.append(item)
        return batch

    def _log(self, client: Any, batch: list[_Line]) -> None:
        active = next((line.active_run for line in reversed(batch) if line.active_run), None)
        if self.run_id is None:
            self.run_id = self._run(client, batch[0], active)
        elif active and active != self.run_id and self.created is not None:
            self._move(client, active)
        self._send(client, self.run_id, batch)
        if self.created is not None:
            self.created.extend(batch)
            if len(self.created) > MOVE_MAX_LINES:
                self.created = None

    @staticmethod
    def _send(client: Any, run_id: str, lines: list[_Line]) -> None:
        from mlflow.entities import Metric

        metrics = [Metric(key, value, line.timestamp_ms, line.step) for line in lines for key, value in line.values.items()]
        for start in range(0, len(metrics), BATCH_MAX):
            client.log_batch(run_id, metrics=metrics[start:start + BATCH_MAX])

    def _move(self, client: Any, active: str) -> None:
        """The script started a run of its own after sm_dist created one (its first mlflow call raced sm_dist's
        first line): the lines go to the script's run, and sm_dist's is deleted, so the job has one run."""
        old, self.run_id, self.ours = self.run_id, active, False
        self._send(client, active, self.created or [])
        self.created = None
        if old is not None:
            client.delete_run(old)
            if os.environ.get("MLFLOW_RUN_ID") == old:
                del os.environ["MLFLOW_RUN_ID"]

    def _run(self, client: Any, first: _Line, active: str | None) -> str:
        """The script's active run, the user's MLFLOW_RUN_ID, or ours: this job's run if an earlier rank 0
        (before a restart) created it, else a new one."""
        if active:
            return active
        if os.environ.get("MLFLOW_RUN_ID"):
            return os.environ["MLFLOW_RUN_ID"]
        experiment = first.active_experiment
        if not experiment:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "Default"
            found = client.get_experiment_by_name(name)
            experiment = found.experiment_id if found is not None else client.create_experiment(name)
        job = os.environ.get("TRAINING_JOB_NAME", "")
        earlier = client.search_runs([experiment], f"tags.{JOB_TAG} = '{job}'", max_results=1) if job else []
        if earlier:
            run = earlier[0]
        else:
            run = client.create_run(experiment, run_name=os.environ.get(RUN_NAME_ENV) or None, tags={JOB_TAG: job})
            self.created = []
        self.ours = True
        os.environ.setdefault("MLFLOW_RUN_ID", run.info.run_id)  # the script's later mlflow calls continue it
        return str(run.info.run_id)

    def _end(self, client: Any) -> None:
        if self.ours and self.run_id is not None and client.get_run(self.run_id).info.status == "RUNNING":
            client.set_terminated(self.run_id)

    def finish(self) -> None:
        """At exit: let the queued lines go out (at most DRAIN_S) and end sm_dist's run."""
        if self.is_alive():
            self.lines.put(_STOP)
            self.join(DRAIN_S)


def _reset() -> None:
    """Forget the worker (tests: a new process's state)."""
    global _worker
    if _worker is not None:
        _worker.finish()
    _worker = None


__all__ = ["DRAIN_S", "LOG_ENV", "log_step"]
