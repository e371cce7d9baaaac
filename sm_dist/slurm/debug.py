"""`sm-dist debug NAME --host NODE` and `sm-dist stacks NAME` for a Slurm job: a step beside the running one.

A Slurm cluster has no SSM session (SageMaker's remote debug) and no mount namespace per node; what it has is
`srun --jobid=ID --overlap`: a new step inside the running job's allocation, on the node asked for, sharing
its resources (docs/PLATFORM.md §12). So

- `shell` runs `python3 -m sm_dist.container.shell` there, the shell local mode opens in an emulated host,
  with `SM_DIST_OPT_ML` naming the node's folder (`JOB_DIR/hosts/<node>`, its /opt/ml): the script's
  variables (`SM_CURRENT_HOST`, `SM_HOSTS`, `SM_CHANNEL_*`, ...), the code folder, an interactive bash
  (`--pty`) or `command` run with `bash -c`;
- `stacks` runs `python3 -m sm_dist.container.stacks_now --slurm-job ID` on every node: each node's ranks of
  this job dump their stacks (SIGUSR1, faulthandler), the same report a hang writes by itself.

A host is named as the job names it (its node's name) or as SageMaker would (`algo-N`: the N-th of the job's
nodes in SageMaker's order, which is how PID 1 numbered them). The nodes use the Python that submitted the job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Protocol

from sm_dist.contract.container import OPT_ML_ENV, RESOURCE_CONFIG
from sm_dist.contract.job import JobStatus
from sm_dist.contract.slurm_layout import CODE_FOLDER, HOSTS_FOLDER
from sm_dist.errors import ConfigError


class RunningJob(Protocol):
    """What a step beside a job needs of its handle (`sm_dist.slurm.job.SlurmJob`, which calls this module)."""

    job_dir: Path
    job_id: str

    @property
    def name(self) -> str: ...

    def status(self) -> JobStatus: ...


def nodes(job: RunningJob) -> list[str]:
    """The job's nodes in SageMaker's host order (algo-1 first), as its nodes' /opt/ml folders say."""
    for config in sorted((job.job_dir / HOSTS_FOLDER).glob(f"*/input/config/{RESOURCE_CONFIG}")):
        try:
            return [str(h) for h in json.loads(config.read_text(encoding="utf-8"))["hosts"]]
        except (OSError, ValueError, KeyError):
            continue
    return []


def node_of(job: RunningJob, host: str) -> str:
    """The node `host` names: a node of the job, or `algo-N`."""
    known = nodes(job)
    if host in known:
        return host
    number = host.removeprefix("algo-")
    if host.startswith("algo-") and number.isdigit() and 1 <= int(number) <= len(known):
        return known[int(number) - 1]
    raise ConfigError("--host", host, f"job {job.name} runs on {', '.join(known) or 'no node yet'} "
                      f"(or algo-1 ... algo-{len(known)})")


def _running(job: RunningJob) -> None:
    status = job.status()
    if status.status != "InProgress" or status.secondary != "Training":  # Slurm's RUNNING (cluster.STATES)
        raise ConfigError("job", job.name, f"is not running ({status.status} / {status.secondary}): a step beside it "
                          "needs its allocation (its checkpoints and each node's folder stay in "
                          f"{job.job_dir / HOSTS_FOLDER})")


def beside(job: RunningJob, node: str, argv: list[str], *, pty: bool = False) -> list[str]:
    """`argv` as a step of the running job on `node` (`srun --overlap`: its allocation, shared); with `step_env`."""
    return [shutil.which("srun") or "srun", f"--jobid={job.job_id}", "--overlap", "--nodes=1", "--ntasks=1",
            f"--nodelist={node}", *(["--pty"] if pty else []), *argv]


def step_env(job: RunningJob, **extra: str) -> dict[str, str]:
    """The environment of a step beside the job: the staged bundle (sm_dist itself) on PYTHONPATH, and `extra`."""
    return {**os.environ, "PYTHONPATH": str(job.job_dir / CODE_FOLDER), **extra}


def shell(job: RunningJob, host: str, command: str | None) -> int:
    """A shell (or `command`) on `host`'s node, beside the running job; its exit code."""
    _running(job)
    node = node_of(job, host)
    root = job.job_dir / HOSTS_FOLDER / node
    argv = beside(job, node, [sys.executable, "-m", "sm_dist.container.shell", *(["--", command] if command else [])],
                 pty=command is None)
    if command is None:
        print(f"[sm_dist] a shell on {node} of Slurm job {job.job_id} ({job.name}): /opt/ml is its folder {root}; "
              "exit to leave", file=sys.stderr)
    return subprocess.call(argv, env=step_env(job, **{OPT_ML_ENV: str(root)}))


def stacks(job: RunningJob) -> int:
    """Print every running rank's stack, per node; 0 when some rank answered."""
    _running(job)
    codes = []
    for node in nodes(job):
        sys.stdout.flush()
        codes.append(subprocess.call(
            beside(job, node, [sys.executable, "-m", "sm_dist.container.stacks_now", "--slurm-job", job.job_id]),
            env=step_env(job)))
    return 0 if 0 in codes else 1


__all__ = ["beside", "node_of", "nodes", "shell", "stacks", "step_env"]
