"""A Slurm job's attempts as chain links: the batch script's decision after each one is the cloud chain's
(`sm_dist.contract.chain.decide`), and `SlurmJob.status` says which link runs and why the run ended. Fast: the
decision module is called in this process on a job folder laid out as the submitting side lays it out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sm_dist.container import slurm_chain
from sm_dist.contract.chain import ChainPolicy
from sm_dist.contract.checkpoint import MANIFEST_NAME, Manifest, step_dirname
from sm_dist.contract.slurm_layout import (
    BATCH_LOG,
    CHAIN_POLICY_FILE,
    CONFIG_FOLDER,
    HOSTS_FOLDER,
    policy_record,
    read_links,
)
from sm_dist.slurm import cluster
from sm_dist.slurm.job import SlurmJob


def _job(tmp_path: Path, policy: ChainPolicy, *, start_steps: tuple[int, ...] = ()) -> tuple[Path, Path]:
    job_dir, ckpt = tmp_path / "job", tmp_path / "ckpt"
    (job_dir / CONFIG_FOLDER).mkdir(parents=True)
    (job_dir / "logs").mkdir()
    ckpt.mkdir()
    for step in start_steps:
        _commit(ckpt, step)
    record = policy_record("run", policy.to_tag(), str(ckpt))
    (job_dir / CONFIG_FOLDER / CHAIN_POLICY_FILE).write_text(json.dumps(record), encoding="utf-8")
    return job_dir, ckpt


def _commit(ckpt: Path, step: int) -> None:
    folder = ckpt / step_dirname(step)
    folder.mkdir()
    (folder / MANIFEST_NAME).write_text(Manifest(step=step, epoch=0, world_size=2, sharded=False).to_json(),
                                        encoding="utf-8")


def _after(job_dir: Path, code: int, attempt: int, monkeypatch: pytest.MonkeyPatch,
           seconds: float = 600.0) -> tuple[int, str]:
    """The decision module's exit code (0: requeue) and its reason, as the batch script runs it at `attempt`."""
    monkeypatch.setenv("SLURM_RESTART_COUNT", str(attempt))
    return slurm_chain.main([str(job_dir), str(code), str(seconds)]), read_links(job_dir)[-1]["reason"]


def test_a_saved_stop_with_progress_is_the_next_link_until_max_links(tmp_path: Path, monkeypatch) -> None:
    job_dir, ckpt = _job(tmp_path, ChainPolicy(max_links=2), start_steps=(4,))  # a reused folder: step 4 is old
    _commit(ckpt, 10)
    assert _after(job_dir, 143, 0, monkeypatch) == (0, "run-1 reached its MaxRuntime; next: run-2")
    _commit(ckpt, 20)
    rc, reason = _after(job_dir, 143, 1, monkeypatch)
    assert rc == 1 and reason == "run-2 reached its MaxRuntime; the run stops: max_links=2 links ran"
    links = read_links(job_dir)
    assert [(k["link"], k["step_before"], k["step"], k["action"]) for k in links] == [(1, 4, 10, "next"),
                                                                                       (2, 10, 20, "stop")]


def test_a_saved_stop_without_progress_ends_the_run(tmp_path: Path, monkeypatch) -> None:
    job_dir, _ckpt = _job(tmp_path, ChainPolicy(max_links=5), start_steps=(8,))
    rc, reason = _after(job_dir, 143, 0, monkeypatch)  # saved at the signal, but step 8 was there before the link started
    assert rc == 1 and reason.startswith("run-1 reached its MaxRuntime and wrote no checkpoint: the next link would "
                                         "start where this one did; the run stops")


def test_the_budget_counts_each_links_seconds(tmp_path: Path, monkeypatch) -> None:
    # $36/h: a 1,000 s link costs $10; what is left of $12 buys less than a minute after the overhead
    job_dir, ckpt = _job(tmp_path, ChainPolicy(max_links=9, budget_usd=12.0, usd_per_hour=36.0))
    _commit(ckpt, 2)
    rc, reason = _after(job_dir, 143, 0, monkeypatch, seconds=1000)
    assert rc == 1 and "the run stops: the $12 budget is spent ($10.00 billed)" in reason


def test_requeues_slurm_made_itself_count_as_links(tmp_path: Path, monkeypatch) -> None:
    job_dir, ckpt = _job(tmp_path, ChainPolicy(max_links=3))
    _commit(ckpt, 6)
    # attempts 0 and 1 ended on a failed node (Slurm requeued them; the batch script took no decision)
    rc, reason = _after(job_dir, 143, 2, monkeypatch)
    assert rc == 1 and reason == "run-3 reached its MaxRuntime; the run stops: max_links=3 links ran"


def test_completed_and_failed_attempts_end_the_run_and_say_why(tmp_path: Path, monkeypatch) -> None:
    job_dir, _ckpt = _job(tmp_path, ChainPolicy(max_links=3))
    failure = job_dir / HOSTS_FOLDER / "sm-n1" / "output" / "failure"
    failure.parent.mkdir(parents=True)
    failure.write_text("ValueError: bad at train.py:5\nmore\n", encoding="utf-8")
    rc, reason = _after(job_dir, 1, 0, monkeypatch)
    assert rc == 1 and reason.startswith("run-1 failed: sm-n1: ValueError: bad at train.py:5; the run ends")
    done_dir, _ = _job(tmp_path / "done", ChainPolicy(max_links=3))
    assert _after(done_dir, 0, 0, monkeypatch) == (1, "run-1 completed: the run is done (1 link(s))")


def test_an_unreadable_job_folder_is_never_requeued(tmp_path: Path, capsys) -> None:
    assert slurm_chain.main([str(tmp_path / "missing"), "143", "5"]) == 2
    assert "cannot decide" in capsys.readouterr().out
    assert slurm_chain.main(["only-one"]) == 2


def test_status_says_the_link_and_why_the_chain_ended(tmp_path: Path, monkeypatch) -> None:
    job_dir, ckpt = _job(tmp_path, ChainPolicy(max_links=2))
    job = SlurmJob("run", job_dir, "7", nodes=2, checkpoint_uri=str(ckpt))
    answers = {"JobState": "RUNNING", "Reason": "None", "ExitCode": "0:0"}
    monkeypatch.setattr(cluster, "job_record", lambda job_id: dict(answers))
    (job_dir / BATCH_LOG).write_text("[sm_dist] job 7 attempt 0 on sm-n[1-2]\n", encoding="utf-8")
    assert job.status().message.endswith("link 1 of at most 2")
    _commit(ckpt, 4)
    _after(job_dir, 143, 0, monkeypatch)
    with (job_dir / BATCH_LOG).open("a", encoding="utf-8") as log:
        log.write("[sm_dist] job 7 attempt 1 on sm-n[1-2]\n")
    assert job.status().message.endswith("link 2 of at most 2 (after link 1: run-1 reached its MaxRuntime; next: "
                                         "run-2)")
    _commit(ckpt, 8)
    _after(job_dir, 143, 1, monkeypatch)
    answers.update(JobState="FAILED", ExitCode="143:0")  # the batch script exits with PID 1's code
    status = job.status()
    assert (status.status, status.secondary, status.failure_reason) == ("Stopped", "MaxRuntimeExceeded", None)
    assert status.message == "chain: run-2 reached its MaxRuntime; the run stops: max_links=2 links ran"
    with (job_dir / BATCH_LOG).open("a", encoding="utf-8") as log:  # an attempt that took no decision (a node failed)
        log.write("[sm_dist] job 7 attempt 2 on sm-n[1-2]\n")
    answers.update(JobState="NODE_FAIL", ExitCode="0:0")
    status = job.status()
    assert (status.status, status.secondary) == ("Failed", "NodeFailure") and "chain" not in status.message
    summary = job.summary()  # `sm-dist fit --slurm --wait [--json]` prints it
    assert summary.chain == "run-2 reached its MaxRuntime; the run stops: max_links=2 links ran"
    assert str(summary).endswith("\n  chain: run-2 reached its MaxRuntime; the run stops: max_links=2 links ran")


def test_a_chained_plan_is_one_slurm_job_named_by_its_run_with_the_chains_policy(tmp_path: Path) -> None:
    """`chain=True`: the Slurm job (its folder, its name) is the run, and the decision after each attempt follows the
    plan's max_links and budget, counted at the plan's price; without a chain, max_requeues + 1 links within the
    plan's max_cost_usd (none given: no budget)."""
    import sm_dist
    from sm_dist.slurm.options import SlurmOptions
    from sm_dist.slurm.submit import job_name, stage

    entrypoints = Path(__file__).resolve().parents[2] / "entrypoints"
    plan = sm_dist.plan("cnn.py", source_dir=str(entrypoints), local=True, chain=True, max_links=6,
                        max_cost_usd=20.0, job_name="longrun", instance_type="ml.g5.xlarge", instance_count=2)
    assert (plan.job_name, job_name(plan)) == ("longrun-1", "longrun")
    opts = SlurmOptions(root=tmp_path)
    stage(plan, opts, opts.job_root("longrun"), 0, job_name(plan))
    record = json.loads((tmp_path / "longrun" / CONFIG_FOLDER / CHAIN_POLICY_FILE).read_text(encoding="utf-8"))
    policy = ChainPolicy.from_tag(record["policy"])
    assert record["run"] == "longrun" and record["start_step"] is None
    assert (policy.max_links, policy.budget_usd, policy.link_runtime_s) == (6, 20.0, plan.limits.max_runtime_s)
    assert policy.usd_per_hour == plan.limits.usd_per_hour and policy.usd_per_hour
    plain = sm_dist.plan("cnn.py", source_dir=str(entrypoints), local=True, job_name="plain")
    stage(plain, SlurmOptions(root=tmp_path, max_requeues=2), tmp_path / "plain", 0, job_name(plain))
    record = json.loads((tmp_path / "plain" / CONFIG_FOLDER / CHAIN_POLICY_FILE).read_text(encoding="utf-8"))
    assert (record["run"], ChainPolicy.from_tag(record["policy"]).max_links) == ("plain", 3)
    assert ChainPolicy.from_tag(record["policy"]).budget_usd is None


def test_a_budget_without_a_chain_holds_over_every_requeue(tmp_path: Path, monkeypatch) -> None:
    """max_cost_usd on a Slurm job without chain=True: each attempt's --time is what the budget buys, and the requeues
    count against it too. (Before: the policy had no budget, so a job whose plan said "at most $30" could run
    max_requeues + 1 = 4 attempts of that --time each: 4 × the budget.)"""
    import sm_dist
    from sm_dist.slurm.options import SlurmOptions
    from sm_dist.slurm.submit import job_name, stage

    entrypoints = Path(__file__).resolve().parents[2] / "entrypoints"
    plan = sm_dist.plan("cnn.py", source_dir=str(entrypoints), local=True, max_cost_usd=30.0, job_name="capped",
                        instance_type="ml.g5.xlarge")
    stage(plan, SlurmOptions(root=tmp_path), tmp_path / "capped", 0, job_name(plan))
    record = json.loads((tmp_path / "capped" / CONFIG_FOLDER / CHAIN_POLICY_FILE).read_text(encoding="utf-8"))
    policy = ChainPolicy.from_tag(record["policy"])
    assert (policy.max_links, policy.budget_usd, policy.usd_per_hour) == (4, 30.0, plan.limits.usd_per_hour)
    job_dir, ckpt = _job(tmp_path, policy)
    _commit(ckpt, 10)  # the attempt saved at the signal with progress: without the budget it would be requeued
    rc, reason = _after(job_dir, 143, 0, monkeypatch, seconds=plan.limits.max_runtime_s)
    assert rc == 1 and "the run stops: the $30 budget is spent" in reason


def test_a_requeued_link_is_given_only_what_the_budget_has_left(tmp_path: Path, monkeypatch, capsys) -> None:
    """The batch script's `--limit` step at a requeued attempt's start: the minutes the budget has left when fewer
    than the job's --time (the script then shortens its own TimeLimit: tests/slurm/test_slurm_jobs.py on a real
    cluster); nothing at the first attempt, without a budget, or when the budget still buys the whole --time."""
    # $36/h, --time 1,000 s (17 min); link 1 billed 600 s = $6 of $12: $6 buys 600 s, less 180 s of stop and upload
    job_dir, ckpt = _job(tmp_path, ChainPolicy(max_links=9, budget_usd=12.0, usd_per_hour=36.0, link_runtime_s=1000))
    assert slurm_chain.main(["--limit", str(job_dir)]) == 1  # the first attempt: its --time stands
    _commit(ckpt, 2)
    assert _after(job_dir, 143, 0, monkeypatch, seconds=600) == (0, "run-1 reached its MaxRuntime; next: run-2")
    capsys.readouterr()
    assert slurm_chain.main(["--limit", str(job_dir)]) == 0 and capsys.readouterr().out == "7\n"
    roomy, ckpt2 = _job(tmp_path / "roomy", ChainPolicy(max_links=9, budget_usd=100.0, usd_per_hour=36.0,
                                                        link_runtime_s=1000))
    _commit(ckpt2, 2)
    _after(roomy, 143, 0, monkeypatch, seconds=600)
    assert slurm_chain.main(["--limit", str(roomy)]) == 1  # $94 buys more than 17 min
    free, ckpt3 = _job(tmp_path / "free", ChainPolicy(max_links=9, link_runtime_s=1000))
    _commit(ckpt3, 2)
    _after(free, 143, 0, monkeypatch, seconds=600)
    assert slurm_chain.main(["--limit", str(free)]) == 1
    assert slurm_chain.main(["--limit", str(tmp_path / "nowhere")]) == 1
