"""Every in-job restart explained: PID 1's `[sm_dist] restart` line (from torchrun's output as
it prints it), local mode's list of causes, the live view and the summary."""

from __future__ import annotations

from pathlib import Path

import pytest
from _torchrun_lines import USERS_OWN

from sm_dist.container.failure_watch import FailureWatch
from sm_dist.container.torchrun import Supervisor
from sm_dist.contract.log_lines import RestartLine, read_line, read_restart, restart_line
from sm_dist.contract.worker_errors import MARKERS_HINT
from sm_dist.local.cost import LocalCost
from sm_dist.local.restarts import SAME_RESTART_S, Restarts
from sm_dist.local.summary import LocalSummary, render_summary
from sm_dist.local.view import CAUSE_CHARS, HostState, Snapshot

FAILED = ("E1124 14:41:13.491000 8114 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: "
          "{code}) local_rank: {local} (pid: 8119) of binary: /usr/bin/python3")
PEER_GONE = ["[rank0]: Traceback (most recent call last):", '[rank0]:   File "train.py", line 9, in <module>',
             "[rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer"]


def _feed(watch: FailureWatch, lines: list[str]) -> list[str]:
    for line in lines:
        assert watch.feed(line) is None
    taken, watch.restarts[:] = list(watch.restarts), []
    return taken


def test_pid1_names_each_restarts_cause() -> None:
    watch = FailureWatch("algo-2")
    assert _feed(watch, [*USERS_OWN, FAILED.format(code=1, local=1)]) == [
        "rank 1 — ValueError: shape mismatch in batch 3 on rank 1 at raises.py:22 in check_batch"]
    hook = "[rank1]: [sm_dist] fault hook crash-in-save:8: SIGKILL rank 1"
    assert _feed(watch, [hook, FAILED.format(code=-9, local=1)]) == ["local rank 1 killed by SIGKILL (crash-in-save:8)"]
    assert _feed(watch, [FAILED.format(code=-9, local=0)]) == ["local rank 0 killed by SIGKILL"]
    watch.hung("hang: rank 1 on algo-2 made no progress for 20 s after step 10: stopped outside any collective")
    assert _feed(watch, [FAILED.format(code=-9, local=1)]) == [
        "hang: rank 1 on algo-2 made no progress for 20 s after step 10: stopped outside any collective"]
    assert _feed(FailureWatch("algo-1"), [*PEER_GONE, FAILED.format(code=1, local=0)]) == [
        "after another rank failed: rank 0 — RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error: "
        "Connection reset by peer at train.py:9 in <module>"]


def test_no_restart_line_where_torchrun_does_not_restart() -> None:
    stopped = FailureWatch("algo-1")
    for line in [*PEER_GONE[:2], "[rank0]: ModuleNotFoundError: No module named 'x'"]:
        assert stopped.feed(line) is None
    assert stopped.feed(FAILED.format(code=1, local=0)) is not None and stopped.restarts == []  # not restarted
    spent = FailureWatch("algo-1", max_restarts=1)
    for _ in range(2):
        spent.feed(FAILED.format(code=-9, local=0))
    assert spent.restarts == ["local rank 0 killed by SIGKILL"]  # the second failure ended torchrun


def test_the_supervisor_prints_the_line_unless_it_is_stopping(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    sup = Supervisor(["true"], {}, tmp_path, FailureWatch("algo-2"))
    for line in [*USERS_OWN, FAILED.format(code=1, local=1)]:
        sup._line(line)
    printed = capsys.readouterr().err.splitlines()
    assert [read_restart(line) for line in printed] == [RestartLine(
        "algo-2", "rank 1 — ValueError: shape mismatch in batch 3 on rank 1 at raises.py:22 in check_batch")]
    sup.signals.append(15)  # a stop signal: the failures that follow are the stop's, not restarts
    sup._line(FAILED.format(code=-15, local=0))
    assert capsys.readouterr().err == ""


def test_the_line_is_one_line_and_not_another_sm_dist_line() -> None:
    line = restart_line("algo-2", f"rank 0 — OSError: [Errno 39] Directory not empty: '/opt/ml/checkpoints/c_0'\n"
                                  f"  {MARKERS_HINT}")
    assert "\n" not in line and read_line(line) is None
    found = read_restart(f"[algo-2] {line}")
    assert found is not None and found.host == "algo-2" and found.cause.endswith("copy the newest checkpoint in")
    assert read_restart("[sm_dist] resumed step=8 epoch=1") is None


def test_local_mode_lists_one_cause_per_restart() -> None:
    restarts = Restarts()
    restarts.add(RestartLine("algo-1", "after another rank failed: rank 0 — RuntimeError: Connection reset by peer"),
                 now=100.0)
    restarts.add(RestartLine("algo-2", "rank 1 — ValueError: boom at train.py:22"), now=101.0)
    restarts.add(RestartLine("algo-2", "local rank 0 killed by SIGKILL"), chaos_fired=["kill:10"], now=200.0)
    restarts.add(RestartLine("algo-1", "hang (waiting): rank 0 on algo-1 made no progress"), now=300.0)
    restarts.add(RestartLine("algo-2", "hang: rank 1 on algo-2 made no progress for 20 s"), now=305.0)
    restarts.add(RestartLine("algo-1", "after another rank failed: rank 0 — RuntimeError: Broken pipe"),
                 now=400.0 + SAME_RESTART_S)  # nobody else's cause near it: the only word on that restart
    assert restarts.explained() == [
        "restart 1: algo-2 rank 1 — ValueError: boom at train.py:22",
        "restart 2: algo-2 local rank 0 killed by SIGKILL (chaos kill:10)",
        "restart 3: algo-2 hang: rank 1 on algo-2 made no progress for 20 s",
        "restart 4: algo-1 after another rank failed: rank 0 — RuntimeError: Broken pipe",
    ]
    assert restarts.explained(4) == restarts.explained()  # /proc saw four restarts
    assert len(restarts.explained(3)) == 3  # three: the peer's line explains none of them


def test_a_kill_in_save_is_one_restart_though_every_host_was_killed() -> None:
    """kill-in-save SIGKILLs every host's workers: the second host's kill line is the same restart; a
    later kill nobody's chaos made is a restart of its own."""
    restarts = Restarts()
    restarts.add(RestartLine("algo-2", "local rank 0 killed by SIGKILL"), chaos_fired=["kill-in-save:2"], now=10.0)
    restarts.add(RestartLine("algo-1", "local rank 0 killed by SIGKILL"), chaos_fired=["kill-in-save:2"], now=11.0)
    restarts.add(RestartLine("algo-1", "local rank 0 killed by SIGKILL"), chaos_fired=["kill-in-save:2"],
                 now=20.0 + SAME_RESTART_S)
    assert restarts.explained() == ["restart 1: algo-2 local rank 0 killed by SIGKILL (chaos kill-in-save:2)",
                                    "restart 2: algo-1 local rank 0 killed by SIGKILL"]


def test_a_peers_line_is_no_restart_when_the_failing_host_stopped_the_job() -> None:
    """algo-2's PID 1 stopped torchrun on the script's own error (no restart); algo-1's ranks had
    failed because of it and its PID 1 printed its line before the stop reached it."""
    restarts = Restarts()
    restarts.add(RestartLine("algo-1", "after another rank failed: rank 0 — RuntimeError: Connection closed by peer"))
    assert restarts.explained(0) == []


def test_the_summary_and_the_live_view_show_the_causes() -> None:
    causes = ("restart 1: algo-2 rank 1 — ValueError: boom at train.py:22",
              "restart 2: algo-2 local rank 0 killed by SIGKILL (chaos kill:10)")
    cost = LocalCost(local_usd=0.0, instance_type="ml.g5.xlarge", instance_count=2, billable_seconds=60.0,
                     usd_per_hour=None, sagemaker_usd=None, price_date=None, price_source=None)
    summary = LocalSummary(job_name="j", status="Completed", hosts=2, processes_per_host=2, wall_seconds=30.0,
                           cost=cost, restarts=2, in_job_restarts=2, restart_causes=causes)
    text = render_summary(summary)
    assert f"    {causes[0]}\n    {causes[1]}" in text
    assert summary.to_dict()["restart_causes"] == list(causes)
    hosts = (HostState("algo-1", "running", 12, None), HostState("algo-2", "running", 12, None))
    snap = Snapshot("", 40.0, hosts, 2, last_restart=causes[1])
    assert snap.line().endswith("| restarts 2 (last: algo-2 local rank 0 killed by SIGKILL (chaos kill:10))")
    assert "last: algo-2 local rank 0 killed by SIGKILL" in snap.html()
    assert snap.key() != Snapshot("", 40.0, hosts, 2, last_restart=causes[0]).key()
    long = Snapshot("", 1.0, hosts, 1, last_restart="restart 1: " + "x" * 500)
    assert len(long.line()) < 250 and long.line().endswith("…)")
    assert Snapshot("", 1.0, hosts, 0).line().endswith("| restarts 0") and CAUSE_CHARS == 120


def test_a_repeated_hang_is_the_jobs_error_though_a_peers_error_ended_it_first(tmp_path: Path) -> None:
    """The stuck rank's PID 1 gave up on the same hang again, but algo-1's gloo error (its peer killed)
    ended the job before algo-2 wrote its failure: the error is the hang, its rank and its line, and
    algo-2's own outcome and failure say the hang (they said only "stopped after algo-1 failed")."""
    from sm_dist.local.config import LocalJobConfig
    from sm_dist.local.runner import LocalRunner, RunSettings

    config = LocalJobConfig(job_name="j", container_command=("true",), instance_type="ml.g5.xlarge",
                            instance_count=2, code_dir=tmp_path)
    runner = LocalRunner(config, RunSettings(job_root=tmp_path / "job"))
    stuck = ("rank 1 on algo-2 made no progress for 15 s: stopped outside any collective (rank 1 at train.py, "
             "line 19, in load_batch); the same place as the hang before it: not restarted")
    runner._on_line("algo-2", "[sm_dist] hang: " + stuck)
    runner.outcome.status = "Failed"
    runner.outcome.error = "rank 0 on algo-1: RuntimeError: Connection closed by peer"
    runner.outcome.failures = {"algo-1": "RuntimeError: Connection closed by peer", "algo-2": "stopped after algo-1 failed"}
    runner.outcome.host_outcomes = {"algo-1": "exit 1: RuntimeError: Connection closed by peer",
                                    "algo-2": "stopped after algo-1 failed"}
    runner._explain_stop()
    assert runner.outcome.error == "hang: " + stuck
    # the stuck rank's host has its own reason line; the peer's error stays algo-1's
    assert runner.outcome.host_outcomes == {"algo-1": "exit 1: RuntimeError: Connection closed by peer",
                                            "algo-2": f"hang: {stuck}; then stopped after algo-1 failed"}
    assert runner.outcome.failures == {"algo-1": "RuntimeError: Connection closed by peer", "algo-2": "hang: " + stuck}
    assert runner.outcome.warnings == []  # no "restarting" warning for the hang that was not restarted


def test_the_summary_names_a_checkpoint_the_workers_removed_once(tmp_path: Path) -> None:
    """Each host's worker removes the same cut-short checkpoint and says so: one warning names both hosts (and each
    host's reason when they differ)."""
    from sm_dist.contract.checkpoint_whole import removed_line
    from sm_dist.local.config import LocalJobConfig
    from sm_dist.local.runner import LocalRunner, RunSettings

    config = LocalJobConfig(job_name="j", container_command=("true",), instance_type="ml.g5.xlarge",
                            instance_count=2, code_dir=tmp_path)
    runner = LocalRunner(config, RunSettings(job_root=tmp_path / "job"))
    why = "no trainer_state.json (Hugging Face Trainer writes it last)"
    for host in ("algo-2", "algo-1", "algo-2"):
        runner._on_line(host, "[sm_dist worker] " + removed_line(host, "/opt/ml/checkpoints/checkpoint-40", why))
    assert runner.outcome.warnings == [
        f"/opt/ml/checkpoints/checkpoint-40 was not written to its end ({why}): a fault hit the save; removed on "
        "algo-2, algo-1 before the script resumed, from the newest whole checkpoint"]
    # hosts that found it cut short at different points (algo-1 wrote its shard, algo-2 nothing yet): still one
    # warning, with each host's reason (was two, one per reason: seen in a clean-clone run of the DCP kill-in-save test)
    dcp = "*.distcp files but no .metadata (torch.distributed.checkpoint writes it last)"
    runner._on_line("algo-1", "[sm_dist worker] " + removed_line("algo-1", "/opt/ml/checkpoints/step_4", dcp))
    runner._on_line("algo-2", "[sm_dist worker] " + removed_line("algo-2", "/opt/ml/checkpoints/step_4", "empty"))
    assert runner.outcome.warnings[1:] == [
        f"/opt/ml/checkpoints/step_4 was not written to its end (algo-1: {dcp}; algo-2: empty): a fault hit the save; "
        "removed on algo-1, algo-2 before the script resumed, from the newest whole checkpoint"]


def test_a_job_that_completed_as_its_max_runtime_came_has_no_error(tmp_path: Path) -> None:
    """Every host exited 0 within the stop's grace (the script had just finished): status Completed, and the
    summary's error does not say it was stopped."""
    from sm_dist.local.config import LocalJobConfig
    from sm_dist.local.runner import LocalRunner, RunSettings

    config = LocalJobConfig(job_name="j", container_command=("true",), instance_type="ml.g5.xlarge",
                            instance_count=2, code_dir=tmp_path)
    runner = LocalRunner(config, RunSettings(job_root=tmp_path / "job", max_runtime_s=40))
    runner.outcome.stopped_reason = "MaxRuntimeExceeded"
    runner.outcome.status = "Completed"
    runner._explain_stop()
    assert runner.outcome.error is None
    runner.outcome.status = "Stopped"
    runner._explain_stop()
    assert runner.outcome.error is not None and runner.outcome.error.startswith("stopped at its MaxRuntime")
