"""The runtime's metric lines into MLflow (sm_dist.runtime.mlflow_log), in this process, with a real
MLflow file store read back through MlflowClient (docs/PLATFORM.md §1.15).

Marked slow: importing mlflow 3.17 runs `uname -p` (its telemetry schema calls platform.platform()).
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from sm_dist.runtime import mlflow_log
from sm_dist.runtime.metrics import log_metrics


@pytest.fixture
def mlflow() -> Any:
    """mlflow, imported in a test (its import starts a process: see above)."""
    return pytest.importorskip("mlflow")


def MlflowClient(uri: str) -> Any:  # noqa: N802  (mlflow's class, imported once a test has imported mlflow)
    from mlflow.tracking import MlflowClient as client

    return client(uri)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow: Any) -> Iterator[str]:
    """A file store, the plan's variables set, and no run of mlflow's or ours left over."""
    uri = (tmp_path / "mlruns").as_uri()
    for key, value in {"MLFLOW_TRACKING_URI": uri, "SM_DIST_MLFLOW": "1", "MLFLOW_EXPERIMENT_NAME": "cnn",
                       "MLFLOW_RUN_NAME": "cnn-job-1", "TRAINING_JOB_NAME": "cnn-job-1",
                       "MLFLOW_ALLOW_FILE_STORE": "true"}.items():  # as local mode sets it (PLATFORM §1.15)
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)  # mlflow.set_experiment() sets it
    monkeypatch.setattr(mlflow.tracking.fluent, "_active_experiment_id", None)  # a test's set_experiment stays in it
    mlflow_log._reset()
    yield uri
    mlflow_log._reset()
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow.set_tracking_uri(None)


def _finish() -> None:
    worker = mlflow_log._worker
    assert worker is not None
    worker.finish()
    assert not worker.is_alive()


def _runs(uri: str, experiment: str = "cnn") -> list[Any]:
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    return [] if found is None else client.search_runs([found.experiment_id])


def test_each_line_is_logged_with_its_step_into_one_run(store: str) -> None:
    out = io.StringIO()
    for step in (1, 2, 3):
        log_metrics(step, {"loss": torch.tensor(1.0 / step), "lr": 0.1, "grad_norm": float("inf")}, stream=out)
    _finish()
    [run] = _runs(store)
    assert run.info.run_name == "cnn-job-1" and run.info.status == "FINISHED"
    assert run.data.tags["sm_dist_job"] == "cnn-job-1"
    history = MlflowClient(store).get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5), (3, pytest.approx(1 / 3))]
    assert set(run.data.metrics) == {"loss", "lr"}  # inf is printed, and not sent: MLflow refuses it
    assert out.getvalue().count("[sm_dist] step=") == 3  # the printed lines are unchanged


def test_a_restarted_rank_0_continues_the_jobs_run(store: str) -> None:
    """After torchrun's restart a new rank 0 process finds the job's run by its tag: still one run."""
    log_metrics(1, {"loss": 2.0}, stream=io.StringIO())
    mlflow_log._reset()  # the process ends; the next one starts with nothing
    log_metrics(2, {"loss": 1.0}, stream=io.StringIO())
    _finish()
    [run] = _runs(store)
    assert [m.step for m in MlflowClient(store).get_metric_history(run.info.run_id, "loss")] == [1, 2]


def test_mlflow_being_imported_by_the_logger_is_not_touched(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker thread imports mlflow while rank 0 goes on; a half-imported module is never called
    (a first version crashed training with "partially initialized module 'mlflow' has no attribute")."""
    import importlib.machinery
    import sys
    import types

    half = types.ModuleType("mlflow")
    half.__spec__ = importlib.machinery.ModuleSpec("mlflow", None)
    half.__spec__._initializing = True  # type: ignore[attr-defined]  # what importlib sets meanwhile
    monkeypatch.setitem(sys.modules, "mlflow", half)
    assert mlflow_log._scripts_run() == (None, None)
    broken = types.ModuleType("mlflow")  # imported, but not the mlflow this module knows
    monkeypatch.setitem(sys.modules, "mlflow", broken)
    assert mlflow_log._scripts_run() == (None, None)


def test_off_without_the_plans_variable(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SM_DIST_MLFLOW")
    log_metrics(1, {"loss": 1.0}, stream=io.StringIO())
    assert mlflow_log._worker is None and _runs(store) == []


def test_the_scripts_active_run_is_the_one_run(store: str, mlflow: Any) -> None:
    mlflow.set_tracking_uri(store)
    mlflow.set_experiment("mine")
    with mlflow.start_run(run_name="the-users") as users:
        mlflow.log_param("lr", 0.1)
        log_metrics(5, {"loss": 0.25}, stream=io.StringIO())
        _finish()
    assert _runs(store) == []  # no run in MLFLOW_EXPERIMENT_NAME's experiment
    [run] = _runs(store, "mine")
    assert run.info.run_id == users.info.run_id and run.data.metrics == {"loss": 0.25}


def test_the_scripts_later_mlflow_calls_continue_smdists_run(store: str, mlflow: Any) -> None:
    log_metrics(1, {"loss": 2.0}, stream=io.StringIO())
    worker = mlflow_log._worker
    assert worker is not None
    for _ in range(200):  # the worker creates the run on its first line
        if worker.run_id is not None:
            break
        worker.join(0.05)
    mlflow.set_tracking_uri(store)
    mlflow.log_metric("accuracy", 0.9, step=1)  # a script's own call, after sm_dist's first line
    mlflow.end_run()
    _finish()
    [run] = _runs(store)
    assert set(run.data.metrics) == {"loss", "accuracy"} and run.info.status == "FINISHED"


def test_a_script_run_started_after_smdists_gets_the_lines(store: str, mlflow: Any) -> None:
    """The script's first mlflow call raced sm_dist's first line (seen as a new user: `mlflow.log_metric` right
    after the first step left two runs): sm_dist's lines move to the script's run and its own is deleted."""
    log_metrics(1, {"loss": 2.0}, stream=io.StringIO())
    worker = mlflow_log._worker
    assert worker is not None
    for _ in range(400):  # sm_dist's run exists before the script starts its own
        if worker.run_id is not None:
            break
        worker.join(0.05)
    mlflow.set_tracking_uri(store)
    sm_dists_run = os.environ.pop("MLFLOW_RUN_ID")  # as if the script's call came before sm_dist set it
    with mlflow.start_run(run_name="the-scripts") as users:
        mlflow.log_metric("accuracy", 0.5, step=1)
        log_metrics(2, {"loss": 1.0}, stream=io.StringIO())
        _finish()
    [run] = _runs(store)
    assert run.info.run_id == users.info.run_id != sm_dists_run
    assert [m.step for m in MlflowClient(store).get_metric_history(run.info.run_id, "loss")] == [1, 2]


def test_an_unreachable_server_is_one_warning_and_training_goes_on(store: str, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with caplog.at_level(logging.WARNING, logger="sm_dist.runtime.mlflow_log"):
        for step in range(1, 4):
            log_metrics(step, {"loss": 1.0}, stream=io.StringIO())  # never waits for the server
        _finish()
        log_metrics(4, {"loss": 1.0}, stream=io.StringIO())
    warnings = [r.getMessage() for r in caplog.records if r.name == "sm_dist.runtime.mlflow_log"]
    assert len(warnings) == 1 and "not logged to MLflow (http://127.0.0.1:9)" in warnings[0]
    assert "training goes on" in warnings[0] and "\n" not in warnings[0]
    assert mlflow_log._worker is not None and mlflow_log._worker.failed


def test_mlflow_not_importable_is_one_warning(store: str, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)  # `from mlflow.tracking import ...` fails
    with caplog.at_level(logging.WARNING, logger="sm_dist.runtime.mlflow_log"):
        log_metrics(1, {"loss": 1.0}, stream=io.StringIO())
        _finish()
    [warning] = [r.getMessage() for r in caplog.records if r.name == "sm_dist.runtime.mlflow_log"]
    assert "mlflow is not importable" in warning and "requirements.txt" in warning
