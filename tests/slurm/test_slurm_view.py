"""What a notebook shows of a Slurm job: the live view while `wait` follows it, then the summary and metrics.

Driven over a job folder written by hand, Slurm's answers given by `cluster.job_record` (as
test_slurm_plan.py does): no cluster, no process. The notebook's display is IPython's `display`, caught."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

from sm_dist.contract import log_lines
from sm_dist.contract.checkpoint import step_dirname
from sm_dist.contract.slurm_layout import ATTEMPT_LINE, EXITS_FILE, LOGS_FOLDER
from sm_dist.slurm import cluster
from sm_dist.slurm.job import SlurmJob
from sm_dist.slurm.view import SlurmView

SHA = "ab" * 32


def _write(path: Path, *lines: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.writelines(line + "\n" for line in lines)


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SlurmJob:
    """A two-node job, running for two polls (a worker restarted and a step saved between), then completed."""
    states = iter(["RUNNING", "RUNNING", "COMPLETED"])

    def job_record(job_id: str) -> dict[str, str] | None:  # then None: Slurm forgot the job (its exit record says)
        state = next(states, None)
        return None if state is None else {"JobState": state, "Reason": "None", "ExitCode": "0:0"}

    monkeypatch.setattr(cluster, "job_record", job_record)
    logs = tmp_path / "j" / LOGS_FOLDER
    _write(logs / "batch.log", ATTEMPT_LINE.format(job_id="7", attempt=0, nodes="sm-n[1-2]"))
    _write(logs / "sm-n1.log", log_lines.step_line(2, {"loss": 2.5, "lr": 0.01}))
    _write(logs / "sm-n2.log", "[sm_dist] starting torchrun")
    return SlurmJob("j", tmp_path / "j", "7", nodes=2, checkpoint_uri=str(tmp_path / "ckpt"))


def _more(job: SlurmJob, checkpoints: Path) -> tuple[list[float], Callable[[float], None]]:
    """The fake sleep: each poll the nodes log more (a restart, a resume), a checkpoint is committed."""
    logs = job.job_dir / LOGS_FOLDER
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 1:
            _write(logs / "sm-n2.log", log_lines.restart_line("sm-n2", "rank 1 SIGKILL"))
            (checkpoints / step_dirname(4)).mkdir(parents=True)
        else:
            _write(logs / "sm-n1.log", log_lines.step_line(6, {"loss": 1.5, "lr": 0.01}), log_lines.final_line(8, SHA))
            _write(logs / "sm-n2.log", log_lines.step_line(8, {"loss": 1.25, "lr": 0.01}))
            _write(job.job_dir / EXITS_FILE, "0 0")
    return polls, sleep


def test_wait_shows_the_nodes_steps_and_slurms_state_in_one_notebook_display(job: SlurmJob, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display

    shown: list[dict[str, str]] = []

    class Handle:
        def update(self, data: dict[str, str], raw: bool) -> None:
            shown.append(data)

    def display(data: dict[str, str], raw: bool, display_id: bool) -> Handle:
        shown.append(data)
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    polls, sleep = _more(job, tmp_path / "ckpt")
    view = SlurmView(job.name, job.job_id, job.job_dir, nodes=2, checkpoint_dir=tmp_path / "ckpt", notebook=True)
    status = job.wait(view=view, sleep=sleep)
    assert status.status == "Completed" and len(polls) == 2
    first, last = shown[1]["text/plain"], shown[-1]["text/plain"]
    assert f"Slurm job 7 on 2 nodes; logs in {job.job_dir / LOGS_FOLDER}" in first
    assert "InProgress/Training | sm-n1 step 2 | sm-n2 | attempts 1, restarts 0\n  link 1" in first, first
    assert "Completed | sm-n1 step 8 | sm-n2 step 8 | ckpt step 4 | attempts 1, restarts 1" in last, last
    html = shown[-1]["text/html"]
    assert ">sm-n2</td>" in html and ">8</td>" in html and "Slurm job 7 · Completed" in html


def test_outside_a_notebook_the_view_prints_a_line_when_the_state_changes(job: SlurmJob, tmp_path: Path) -> None:
    stream = io.StringIO()
    _, sleep = _more(job, tmp_path / "ckpt")
    view = SlurmView(job.name, job.job_id, job.job_dir, nodes=2, stream=stream, notebook=False)
    job.wait(view=view, sleep=sleep)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("j: Slurm job 7 on 2 nodes") and "restarts 1" in lines[-1] and "Completed" in lines[-1]


def test_a_finished_job_renders_its_summary_and_metrics_as_a_local_jobs(job: SlurmJob, tmp_path: Path) -> None:
    _, sleep = _more(job, tmp_path / "ckpt")
    job.wait(sleep=sleep)
    cluster_forgot = job.summary()  # the states are spent: Slurm no longer knows the job, its exit record says
    html = job._repr_html_()
    assert "j (Slurm job 7): Completed" in html and "job.metrics()" in html and "last step 8, 1 worker restarts" \
        in html, html
    assert cluster_forgot._repr_html_().count("<caption") == 1
    metrics = job.metrics()
    assert metrics.column("step") == [2, 6, 8] and metrics.column("loss") == [2.5, 1.5, 1.25]


def test_fit_in_a_notebook_shows_the_view_and_echoes_no_node_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`sm_dist.fit(..., slurm=...)` in a kernel: the cluster answers by hand (a job that already ran, its nodes'
    lines in the job folder), IPython's display caught."""
    import IPython.display

    import sm_dist
    from sm_dist.slurm import submit
    from tests.slurm.test_slurm_plan import ENTRYPOINTS, PARTITION_LINE

    def sbatch(script: Path) -> str:  # the job "runs" as it is submitted: its nodes' lines, its exit record
        logs = script.parent / LOGS_FOLDER
        _write(logs / "batch.log", ATTEMPT_LINE.format(job_id="7", attempt=0, nodes="sm-n[1-2]"))
        _write(logs / "sm-n1.log", log_lines.step_line(4, {"loss": 1.5}), log_lines.final_line(4, SHA))
        _write(logs / "sm-n2.log", log_lines.step_line(4, {"loss": 1.5}))
        _write(script.parent / EXITS_FILE, "0 0")
        return "7"

    shown: list[dict[str, str]] = []
    monkeypatch.setattr(cluster, "sbatch_path", lambda: "/usr/bin/sbatch")
    monkeypatch.setattr(cluster, "partitions", lambda: cluster.read_partitions(PARTITION_LINE))
    monkeypatch.setattr(cluster, "submit", sbatch)
    monkeypatch.setattr(cluster, "job_record", lambda job_id: None)  # Slurm forgot it: the exit record says
    monkeypatch.setattr(submit, "in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda data, raw, display_id: shown.append(data))
    job = sm_dist.fit(str(ENTRYPOINTS / "cnn.py"), instance_count=2, slurm={"root": str(tmp_path)})
    assert isinstance(job, SlurmJob) and job.status().status == "Completed"
    assert "[sm-n1]" not in capsys.readouterr().out  # the lines stay in the logs: job.logs()
    assert "Completed | sm-n1 step 4 | sm-n2 step 4 | attempts 1, restarts 0" in shown[-1]["text/plain"], shown
