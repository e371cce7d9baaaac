"""The Slurm backend on a real two-node Slurm cluster (tests/_slurm.py, one per session).

Each job is the README's CNN (entrypoints/cnn.py), one process per node,
checkpointing every 2 steps to the job's shared folder: small, so that the file stays short.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from _slurm import NODES, SlurmCluster

import sm_dist
from sm_dist import cli
from sm_dist.contract.slurm_layout import read_links
from sm_dist.errors import ConfigError
from sm_dist.slurm import cluster
from sm_dist.slurm.job import SlurmJob, attach
from sm_dist.slurm.options import SlurmOptions

pytestmark = pytest.mark.slow

ENTRYPOINTS = Path(__file__).resolve().parents[2] / "entrypoints"
#: 16 steps, the kill at step 3: the kill (an `srun --overlap` step) takes a second or two to land, and a short run
#: can finish first (seen with a timed kill on a short DCP script: no worker left, no restart); 8 steps with the kill
#: at 4 failed once in five runs on a lightly loaded machine.
SMALL = ["--source-dir", str(ENTRYPOINTS), "--instance-count", "2", "--hp", "steps=16",
         "--checkpoint-interval-steps", "2"]
#: Guards against a job that never gets where a test waits for it; a healthy one takes seconds.
WAIT_GUARD_S = 300


def _processes_of(job_id: str) -> list[str]:
    """Every process on this machine (both nodes) whose environment says it belongs to Slurm job `job_id`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"SLURM_JOB_ID={job_id}".encode() in env:
            found.append(f"{entry.name}: {cmd}")
    return found


def _wait_for_line(job: SlurmJob, text: str) -> None:
    deadline = time.monotonic() + WAIT_GUARD_S
    while not any(text in line for _node, line in job.lines()):
        assert time.monotonic() < deadline, f"no {text!r} in {job.name}'s logs: {job.lines()[-20:]}"
        time.sleep(0.3)


def test_readme_job_with_a_killed_rank_is_verified(slurm_conf: Path, tmp_path: Path, capsys) -> None:
    # The kill is an `srun --overlap` on the node, which starts in about a second: 0.2 s a step leaves the 13 steps
    # after step 3 (~2.6 s) for it to find a worker still training, however fast this machine runs the CNN.
    code = cli.main(["fit", "cnn.py", *SMALL, "--hp", "step-sleep-s=0.2", "--slurm", "--slurm-root", str(tmp_path),
                     "--chaos", "kill:3", "--verify", "--json"])
    out = capsys.readouterr().out
    result = json.loads(out[out.index("\n{") + 1:])
    assert code == 0, out[-3000:]
    assert result["status"] == "Completed" and result["verified"] is True, result
    assert result["restarts"] >= 1 and result["chaos"] == ["kill:3"], result  # the kill happened and was survived
    assert "chaos kill:3 on sm-n" in out and "SIGKILL worker pid" in out
    checked = attach(f"{result['job_name']}-verify", SlurmOptions(root=tmp_path))
    assert checked is not None and checked.summary().restarts == 0


def _wait_for_resume(job: SlurmJob, attempt: int) -> None:
    """Until the `attempt`-th '[sm_dist] resumed step=' line has a step line after it (the attempt trains on)."""
    deadline = time.monotonic() + WAIT_GUARD_S
    while True:
        lines = [line for _node, line in job.lines()]
        resumed = [i for i, line in enumerate(lines) if "[sm_dist] resumed step=" in line]
        if len(resumed) >= attempt and any("[sm_dist] step=" in line for line in lines[resumed[attempt - 1]:]):
            return
        assert time.monotonic() < deadline, f"{job.name}: no resumed attempt {attempt}: {lines[-30:]}"
        time.sleep(0.3)


def test_a_saved_stop_and_a_failed_node_requeue_the_job_it_resumes_and_stop_leaves_nothing(
        slurm_conf: Path, slurm_cluster: SlurmCluster, tmp_path: Path, capfd, monkeypatch) -> None:
    """One job, three attempts. SIGTERM to the job's steps only (`scancel --signal=TERM`: what `--signal` sends
    ahead of the time limit) -> the ranks commit, PID 1 exits 143, the batch script requeues the job. Then a
    node set DOWN -> NODE_FAIL -> Slurm requeues it (`--requeue`). Each attempt resumes from the shared folder.
    On the third attempt `sm-dist stacks NAME` and `sm-dist debug NAME --host algo-2 --command ...` (srun --overlap),
    then `sm-dist stop NAME` mid-run -> nothing of it on either node, squeue empty.
    The budget buys 601 s (--time 11 min); the requeued attempts shorten their own TimeLimit to the 10 min it has
    left after the first attempt's seconds (`slurm_chain --limit`, then `scontrol update`)."""
    monkeypatch.setenv("SM_DIST_SLURM_ROOT", str(tmp_path))  # where `sm-dist stop NAME` looks
    settings = dict(source_dir=str(ENTRYPOINTS), instance_count=2, hyperparameters={"steps": "400"},
                    checkpoint_interval_steps=2)
    usd_per_hour = sm_dist.plan("cnn.py", local=True, **settings).limits.usd_per_hour  # type: ignore[arg-type]
    assert usd_per_hour
    budget = (601.5 + 180) * usd_per_hour / 3600  # 601 s after the stop grace and upload (planning.budget)
    job = sm_dist.fit("cnn.py", max_cost_usd=budget, slurm=SlurmOptions(root=tmp_path, wait=False),
                      **settings)  # type: ignore[arg-type]
    assert "TimeLimit=00:11:00" in slurm_cluster.scontrol("show", "job", job.job_id)
    _wait_for_line(job, "[sm_dist] step=2 ")
    cluster.cancel(job.job_id, signal="TERM")
    _wait_for_resume(job, 1)
    assert "TimeLimit=00:10:00" in slurm_cluster.scontrol("show", "job", job.job_id)
    slurm_cluster.scontrol("update", f"NodeName={NODES[1]}", "State=DOWN", "Reason=sm_dist-test")
    deadline = time.monotonic() + WAIT_GUARD_S
    seen = set()
    while sum("[sm_dist] resumed step=" in line for _node, line in job.lines()) < 2:
        status = job.status()
        assert status.status == "InProgress", (status, job.lines()[-30:])
        seen.add(status.secondary)
        if status.secondary == "Pending":
            slurm_cluster.resume_nodes()
        assert time.monotonic() < deadline, f"{job.name} was not requeued: {status}"
        time.sleep(0.5)
    assert "Pending" in seen
    _wait_for_resume(job, 2)
    assert job.status().status == "InProgress"
    assert _processes_of(job.job_id)
    # a step beside the running job (srun --overlap): every rank's stack per node, and a command in algo-2's view
    assert cli.main(["stacks", job.name]) == 0
    stacks = capfd.readouterr().out
    assert all(f"{node}: 1 rank(s)" in stacks for node in NODES) and "  rank 1 (local 0" in stacks, stacks
    assert cli.main(["debug", job.name, "--host", "algo-2", "--command",
                     "echo host=$SM_CURRENT_HOST; test -f cnn.py && echo code-here"]) == 0
    assert f"host={sorted(NODES)[1]}\ncode-here\n" in capfd.readouterr().out
    assert cli.main(["status", job.name]) == 0
    status_line = capfd.readouterr().out  # the third attempt (the node failure's requeue counts) is link 3
    assert "InProgress / Training" in status_line and f"link 3 of at most 4 (after link 1: {job.name}-1 reached its " \
        "MaxRuntime; next:" in status_line, status_line
    assert cli.main(["stop", job.name]) == 0
    assert "Stopped / Stopped" in capfd.readouterr().out
    assert job.job_id not in slurm_cluster.queue()
    assert _processes_of(job.job_id) == []
    assert job.status().status == "Stopped"
    summary = job.summary()
    assert summary.attempts == 3 and summary.last_step is not None and 2 < summary.last_step < 400, summary
    lines = [line for _node, line in job.lines()]
    # the saved stop's requeue was the cloud chain's decision (contract.chain.decide), said in the batch log
    name = job.name
    assert f"[sm_dist] chain: {name}-1 reached its MaxRuntime; next: {name}-2" in lines, lines[-30:]
    links = read_links(job.job_dir)
    assert [(k["link"], k["action"], k["exit_code"]) for k in links] == [(1, "next", 143)], links
    assert links[0]["step"] > (links[0]["step_before"] or 0), links  # progress: what let the run go on
    assert sum("[sm_dist] resumed step=" in line for line in lines) == 2, lines[-40:]
    last_resume = max(i for i, line in enumerate(lines) if "[sm_dist] resumed step=" in line)
    assert any("stopping at the next step boundary" in line for line in lines[last_resume:])  # PID 1 forwarded it
    assert (job.job_dir / "exits").read_text().splitlines()[0] == "0 143"
    assert "[sm_dist] chain: this link's time limit: 10 min, what the budget has left" in lines, lines[-40:]


def test_a_raising_script_fails_with_its_line_and_is_not_requeued(slurm_conf: Path, tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("import os\n\n\ndef main():\n    raise ValueError('bad batch shape')\n\n\n"
                                     "main()\n", encoding="utf-8")
    job = sm_dist.fit("train.py", source_dir=str(source), instance_count=2,
                      slurm=SlurmOptions(root=tmp_path / "jobs"))
    status = job.status()
    assert status.status == "Failed", status
    assert "ValueError: bad batch shape" in (status.failure_reason or "") and "train.py:5" in status.failure_reason
    assert job.summary().attempts == 1
    assert "the run ends (a failure in the job's code or setup is not retried)" in status.message, status  # the chain's


@pytest.mark.parametrize(("flags", "field"), [
    (["--partition", "gpus"], "partition='gpus': no such partition here"),
    (["--partition", "debug", "--instance-count", "3"], "instance_count=3: partition debug gives a job at most 2 nodes"),
])
def test_bad_input_is_one_line_before_anything_is_submitted(slurm_conf: Path, slurm_cluster: SlurmCluster,
                                                            tmp_path: Path, capsys, flags: list[str],
                                                            field: str) -> None:
    before = slurm_cluster.queue()
    code = cli.main(["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--slurm", "--slurm-root", str(tmp_path),
                     *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and field in err and len(err.splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == [] and slurm_cluster.queue() == before
    with pytest.raises(ConfigError, match="no such partition"):
        sm_dist.fit("cnn.py", source_dir=str(ENTRYPOINTS), slurm={"partition": "gpus", "root": tmp_path})
    assert os.listdir(tmp_path) == []
    assert cluster.partitions()[0].name == "debug"
