"""The sbatch file of a plan: sm_dist's per-host start on every node, not a second PID 1 (pure).

`batch_script(...)` returns the text `sm-dist fit --slurm` submits (and `--dry-run` prints). It asks
for one task per node (`--nodes` = the plan's instance count, `--ntasks-per-node=1`), the nodes
to itself (`--exclusive`), GPUs per node when there are any, a time limit from the plan's
MaxRuntime (Slurm counts whole minutes: rounded up), SIGTERM to every node's task `signal_s`
before that limit (`--signal=TERM@S`: PID 1 forwards it, the ranks commit a checkpoint), and
`--requeue`, so a node failure or a preemption runs the script again on the same job id
(docs/PLATFORM.md §12). Each node's task is `python3 -m sm_dist.container.slurm_host`, which lays
its /opt/ml folder out and execs the plan's container command, the same PID 1 a SageMaker
instance runs. On HyperPod (`/opt/sagemaker_cluster` exists) srun gets `--auto-resume=1`, as
AWS's own sample sbatch files do. When srun ends, `sm_dist.container.slurm_chain` takes the cloud
chain's decision (`sm_dist.contract.chain.decide`) on the attempt: a job that saved at the signal
(PID 1's EXIT_INTERRUPTED) and made progress requeues itself as the run's next link, within its
max links and budget; any other end ends the run, and the decision says why. A requeued attempt first
shortens its own time limit to what the budget has left, when that is less than `--time`.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from pathlib import Path

from sm_dist.contract.slurm_layout import ATTEMPT_LINE, BATCH_LOG, EXITS_FILE, LIMIT_LINE, NODE_LOG

#: The node's task: lays out /opt/ml there, then execs the command after `--` (sm_dist.container.slurm_host).
NODE_MODULE = "sm_dist.container.slurm_host"
#: What the batch script runs after each attempt: the chain's decision (exit 0: requeue, the next link).
CHAIN_MODULE = "sm_dist.container.slurm_chain"
#: HyperPod's marker folder on every node; AWS's sample sbatch files test it (docs/PLATFORM.md §12).
HYPERPOD_MARKER = "/opt/sagemaker_cluster"


def time_limit(seconds: int | None) -> str | None:
    """sbatch --time as D-HH:MM:SS, rounded up to whole minutes (Slurm's unit); None: the partition's."""
    if not seconds:
        return None
    minutes = math.ceil(seconds / 60)
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


def directives(*, job_name: str, nodes: int, job_dir: Path, partition: str | None = None, account: str | None = None,
               qos: str | None = None, constraint: str | None = None, gpus_per_node: int = 0,
               max_runtime_s: int | None = None, signal_s: int = 120, extra: Sequence[str] = ()) -> list[str]:
    """The #SBATCH options, in the order they are printed."""
    out = [f"--job-name={job_name}", f"--nodes={nodes}", "--ntasks-per-node=1", "--exclusive"]
    out += [f"--{flag}={value}" for flag, value in (("partition", partition), ("account", account), ("qos", qos),
                                                   ("constraint", constraint)) if value]
    if gpus_per_node:
        out.append(f"--gpus-per-node={gpus_per_node}")
    limit = time_limit(max_runtime_s)
    if limit:
        out.append(f"--time={limit}")
    out += [f"--signal=TERM@{signal_s}", "--requeue", f"--output={job_dir / BATCH_LOG}", "--open-mode=append"]
    return out + list(extra)


def batch_script(*, job_name: str, nodes: int, job_dir: Path, python: str, container_command: Sequence[str],
                 **options: object) -> str:
    """The whole sbatch file (`options`: `directives`' keywords)."""
    lines = ["#!/bin/bash",
             f"# sm_dist job {job_name}: every node runs sm_dist's PID 1, as a SageMaker instance does",
             *(f"#SBATCH {d}" for d in directives(job_name=job_name, nodes=nodes, job_dir=job_dir,
                                                   **options))]  # type: ignore[arg-type]
    q = shlex.quote
    command = [python if part in ("python3", "python") else part for part in container_command]
    srun = [python, "-u", "-m", NODE_MODULE, str(job_dir), "--", *command]
    lines += [
        "set -u",
        "",
        f"JOB_DIR={q(str(job_dir))}",
        'export PYTHONPATH="$JOB_DIR/code"  # the staged bundle: the job spec and sm_dist itself',
        "AUTO_RESUME=()",
        f"if [ -d {HYPERPOD_MARKER} ]; then AUTO_RESUME=(--auto-resume=1); fi  # HyperPod: replace a faulty node",
        'echo "' + ATTEMPT_LINE.format(job_id="$SLURM_JOB_ID", attempt="${SLURM_RESTART_COUNT:-0}",
                                       nodes="$SLURM_JOB_NODELIST") + '"',
        "# a requeued link runs what the budget has left, when that is less than --time (a job's owner may shorten it)",
        f'if minutes=$({q(python)} -m {CHAIN_MODULE} --limit "$JOB_DIR"); then',
        '    scontrol update JobId="$SLURM_JOB_ID" TimeLimit="$minutes" && echo "' + LIMIT_LINE.format(minutes="$minutes")
        + '"',
        "fi",
        f'srun "${{AUTO_RESUME[@]}}" --ntasks-per-node=1 --kill-on-bad-exit=1 --output="$JOB_DIR/{NODE_LOG}" '
        '--open-mode=append \\',
        "    " + " ".join(q(part) for part in srun),
        "rc=$?",
        f'echo "${{SLURM_RESTART_COUNT:-0}} $rc" >> "$JOB_DIR/{EXITS_FILE}"',
        "# the next link or the end of the run: the cloud chain's decision (progress, max links, budget)",
        f'if {q(python)} -m {CHAIN_MODULE} "$JOB_DIR" "$rc" "$SECONDS"; then',
        '    scontrol requeue "$SLURM_JOB_ID"',
        "fi",
        "exit $rc",
    ]
    return "\n".join(lines) + "\n"


__all__ = ["HYPERPOD_MARKER", "batch_script", "directives", "time_limit"]
