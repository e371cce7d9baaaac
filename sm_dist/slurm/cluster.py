"""Slurm's own clients, as every Slurm user reaches a cluster: `sbatch` on PATH and SLURM_CONF.

The checks made before anything is submitted (`check_fits`: the partition exists, has the nodes,
allows the time), `submit`, `job_state` (scontrol's record of the job, else sacct's, else None) and
`cancel`. Each state Slurm reports is mapped once (`STATES`) to the job handle's vocabulary
(`sm_dist.contract.job.JobStatus`), with a plain line for the ones a user must act on: PENDING
and its reason, TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY (docs/PLATFORM.md §12).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sm_dist.errors import ConfigError, LaunchError
from sm_dist.vocab import did_you_mean

#: The clients sm_dist calls; all ship with Slurm (docs/PLATFORM.md §12).
SBATCH = "sbatch"
#: The variable every Slurm client reads its configuration file's path from (docs/PLATFORM.md §12).
CONF_ENV = "SLURM_CONF"
#: A guard against a controller that does not answer (sbatch/scontrol retry for a while by themselves).
CLIENT_TIMEOUT_S = 120
#: Slurm job state -> (TrainingJobStatus, SecondaryStatus, what it means, said plainly).
STATES: Mapping[str, tuple[str, str, str]] = {
    "PENDING": ("InProgress", "Pending", "waiting for nodes"),
    "CONFIGURING": ("InProgress", "Starting", "its nodes are being readied"),
    "RUNNING": ("InProgress", "Training", ""),
    "COMPLETING": ("InProgress", "Completing", "its processes are ending"),
    "REQUEUED": ("InProgress", "Requeued", "requeued: it runs again from its checkpoint"),
    "REQUEUE_HOLD": ("InProgress", "Requeued", "requeued and held: `scontrol release` it"),
    "REQUEUE_FED": ("InProgress", "Requeued", "requeued"),
    "RESIZING": ("InProgress", "Training", "its allocation is changing"),
    "SUSPENDED": ("InProgress", "Suspended", "suspended by the administrator or a preemption"),
    "STOPPED": ("InProgress", "Suspended", "stopped (SIGSTOP); it keeps its nodes"),
    "SIGNALING": ("InProgress", "Training", "being signalled"),
    "STAGE_OUT": ("InProgress", "Completing", "staging out"),
    "COMPLETED": ("Completed", "Completed", ""),
    "CANCELLED": ("Stopped", "Stopped", "cancelled (scancel or sm-dist stop)"),
    "FAILED": ("Failed", "Failed", "a node's task exited non-zero"),
    "TIMEOUT": ("Failed", "MaxRuntimeExceeded", "TIMEOUT: it ran past its time limit (--time) and was killed"),
    "NODE_FAIL": ("Failed", "NodeFailure", "NODE_FAIL: one of its nodes failed (Slurm requeues it when it can)"),
    "PREEMPTED": ("Stopped", "Preempted", "PREEMPTED: a higher-priority job took its nodes"),
    "OUT_OF_MEMORY": ("Failed", "OutOfMemory", "OUT_OF_MEMORY: a node ran out of host memory (not GPU memory)"),
    "BOOT_FAIL": ("Failed", "NodeFailure", "BOOT_FAIL: a node failed to boot"),
    "DEADLINE": ("Failed", "Deadline", "DEADLINE: it could not end before its --deadline"),
    "SPECIAL_EXIT": ("Failed", "Failed", "held after a special exit code"),
}


def sbatch_path() -> str:
    """sbatch's path; the one-line refusal when this machine has none, or when SLURM_CONF names no file (each
    client would retry reading it for 60 s, then fail in three lines: docs/PLATFORM.md §12). Nothing submitted."""
    found = shutil.which(SBATCH)
    if found is None:
        raise ConfigError("slurm", SBATCH, "no sbatch on PATH: run this on the cluster's login or head node (or "
                          "put Slurm's client on PATH; SLURM_CONF names the cluster)")
    conf = os.environ.get(CONF_ENV)
    if conf and not Path(conf).is_file():
        raise ConfigError(CONF_ENV, conf, "no such file: point it at the cluster's slurm.conf, or unset it (the "
                          "clients then read the one they were built with)")
    return found


def _run(argv: list[str], what: str, *, cwd: Path | None = None) -> str:
    client = shutil.which(argv[0])
    if client is None:
        raise ConfigError("slurm", argv[0], f"no {argv[0]} on PATH beside sbatch: install Slurm's client here")
    try:
        done = subprocess.run([client, *argv[1:]], capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{what}: {argv[0]} did not answer in {CLIENT_TIMEOUT_S} s (is slurmctld up?)") from None
    if done.returncode != 0:
        said = "; ".join(line.strip() for line in (done.stderr.strip() or done.stdout.strip()).splitlines())
        raise LaunchError(f"{what}: {' '.join(argv[:3])} said: {said}")  # one line, however many the client wrote
    return done.stdout


def fields(line: str) -> dict[str, str]:
    """`Key=Value Key2=Value2 ...` (scontrol's -o lines) as a dict; a value never holds a space there."""
    out = {}
    for item in line.split():
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


@dataclass(frozen=True)
class Partition:
    name: str
    total_nodes: int
    default: bool
    max_nodes: int | None
    max_time_min: int | None
    state: str


def _minutes(text: str) -> int | None:
    """Slurm's [D-]HH:MM:SS (or MM, MM:SS) as whole minutes; None for UNLIMITED/INFINITE."""
    if not text or text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if len(parts) == 1:
        hours, minutes, seconds = 0, parts[0], 0
    elif len(parts) == 2:
        hours, minutes, seconds = 0, parts[0], parts[1]
    else:
        hours, minutes, seconds = parts[-3], parts[-2], parts[-1]
    return (int(days or 0) * 24 + hours) * 60 + minutes + (1 if seconds else 0)


def read_partitions(text: str) -> list[Partition]:
    """`scontrol show partition -o`'s lines as records."""
    out = []
    for line in text.splitlines():
        f = fields(line)
        if "PartitionName" not in f:
            continue
        max_nodes = f.get("MaxNodes", "UNLIMITED")
        out.append(Partition(name=f["PartitionName"], total_nodes=int(f.get("TotalNodes", "0")),
                             default=f.get("Default") == "YES",
                             max_nodes=None if max_nodes.upper() == "UNLIMITED" else int(max_nodes),
                             max_time_min=_minutes(f.get("MaxTime", "UNLIMITED")), state=f.get("State", "UP")))
    return out


def partitions() -> list[Partition]:
    return read_partitions(_run(["scontrol", "show", "partition", "-o"], "reading the cluster's partitions"))


def check_fits(found: list[Partition], partition: str | None, nodes: int, time_min: int | None) -> Partition:
    """The partition the job goes to; ConfigError when it is unknown, smaller than the job or too short."""
    names = [p.name for p in found]
    if partition is None:
        chosen = next((p for p in found if p.default), None)
        if chosen is None:
            raise ConfigError("partition", None, f"this cluster has no default partition: pass one of "
                              f"{', '.join(names) or '(none)'} (--partition)")
    else:
        chosen = next((p for p in found if p.name == partition), None)
        if chosen is None:
            raise ConfigError("partition", partition, f"no such partition here{did_you_mean(partition, names)}; "
                              f"partitions: {', '.join(names) or '(none)'}")
    most = min(chosen.total_nodes, chosen.max_nodes or chosen.total_nodes)
    if nodes > most:
        raise ConfigError("instance_count", nodes, f"partition {chosen.name} gives a job at most {most} nodes: ask "
                          f"for {most} or fewer, or pick a larger partition")
    if time_min is not None and chosen.max_time_min is not None and time_min > chosen.max_time_min:
        raise ConfigError("max_runtime_s", time_min * 60, f"partition {chosen.name} allows {chosen.max_time_min} "
                          "minutes: lower it (a longer run continues as a chain of requeues) or pick another")
    if chosen.state != "UP":
        raise ConfigError("partition", chosen.name, f"is {chosen.state}, not UP: pick another partition")
    return chosen


def submit(script: Path) -> str:
    """sbatch the file; its job id."""
    out = _run([SBATCH, "--parsable", str(script)], f"submitting {script}", cwd=script.parent).strip()
    return out.split(";")[0]


def cancel(job_id: str, signal: str | None = None) -> None:
    """scancel the job; with `signal`, only send it to the job's steps (each node's PID 1), not the batch shell,
    as `--signal` does ahead of the time limit (docs/PLATFORM.md §12)."""
    _run(["scancel", *([f"--signal={signal}"] if signal else []), job_id], f"cancelling Slurm job {job_id}")


def job_record(job_id: str) -> dict[str, str] | None:
    """scontrol's record of the job (its fields), else sacct's state and exit code; None when Slurm no longer knows it."""
    scontrol = shutil.which("scontrol")
    if scontrol is not None:
        done = subprocess.run([scontrol, "show", "job", job_id, "-o"], capture_output=True, text=True,
                              timeout=CLIENT_TIMEOUT_S)
        if done.returncode == 0 and "JobState=" in done.stdout:
            return fields(done.stdout.splitlines()[0])
    sacct = shutil.which("sacct")
    if sacct is not None:
        done = subprocess.run([sacct, "-j", job_id, "-X", "-n", "-P", "-o", "State,ExitCode,Reason"],
                              capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
        line = done.stdout.strip().splitlines()[:1]
        if done.returncode == 0 and line:
            state, _, rest = line[0].partition("|")
            code, _, reason = rest.partition("|")
            return {"JobState": state.split()[0], "ExitCode": code, "Reason": reason or "None"}
    return None


__all__ = ["STATES", "Partition", "cancel", "check_fits", "fields", "job_record", "partitions", "read_partitions",
           "sbatch_path", "submit"]
