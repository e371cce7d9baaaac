"""A Slurm job's folder on the cluster's shared file system: what the submitting side writes and each
node's start (`sm_dist.container.slurm_host`) reads, named once (standard library only).

    <root>/<job>/
      code/                 the plan's bundle (sm_dist itself, the script, sm_dist_job.json)
      config/               hyperparameters.json, inputdataconfig.json, job.json (JOB_FILE),
                            chain.json (CHAIN_POLICY_FILE: the run's chain policy, where its checkpoints go)
      job.sbatch            the batch script (`sm_dist.slurm.script`)
      slurm_job.json        the submitted job's record (RECORD_FILE: its Slurm id, for `sm-dist status NAME`)
      hosts/<node>/         each node's /opt/ml folder, made afresh by every attempt
      logs/<node>.log       each node's output (appended across attempts); logs/batch.log
      checkpoints/          the default checkpoint folder
      exits                 one line per attempt: `<restart count> <exit code>`
      chain.jsonl           one JSON line per link the batch script ended: the chain's decision and why
                            (CHAIN_FILE: `sm_dist.container.slurm_chain` writes it, `SlurmJob.status` reads it)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sm_dist.contract.checkpoint import MANIFEST_NAME, committed_manifest, parse_step

CODE_FOLDER = "code"
CONFIG_FOLDER = "config"
#: config/job.json: {"job_name", "instance_type", "environment"} (the request's Environment, /opt/ml paths).
JOB_FILE = "job.json"
SCRIPT_FILE = "job.sbatch"
RECORD_FILE = "slurm_job.json"
HOSTS_FOLDER = "hosts"
LOGS_FOLDER = "logs"
CHECKPOINTS_FOLDER = "checkpoints"
EXITS_FILE = "exits"
CHAIN_POLICY_FILE = "chain.json"
CHAIN_FILE = "chain.jsonl"
BATCH_LOG = f"{LOGS_FOLDER}/batch.log"
#: Slurm's filename pattern for one file per node (%N: the node's name; `sbatch --output`, docs/PLATFORM.md §12).
NODE_LOG = f"{LOGS_FOLDER}/%N.log"

#: The batch script's first line at each attempt (logs/batch.log), and how the handle reads it back.
ATTEMPT_LINE = "[sm_dist] job {job_id} attempt {attempt} on {nodes}"
ATTEMPT_RE = re.compile(r"^\[sm_dist\] job (\S+) attempt (\d+) on ")
#: The batch script's line when a requeued attempt shortened its time limit to what the budget has left.
LIMIT_LINE = "[sm_dist] chain: this link's time limit: {minutes} min, what the budget has left"


def newest_committed_step(folder: str | None) -> int | None:
    """The newest step folder of `folder` whose manifest parses (the contract's committed); None: none, or a
    checkpoint URI this machine cannot list (s3://, or none)."""
    if not folder or folder.startswith("s3://") or not Path(folder).is_dir():
        return None
    best = None
    for entry in Path(folder).iterdir():
        step = parse_step(entry.name)
        manifest = entry / MANIFEST_NAME
        if step is None or (best is not None and step <= best) or not manifest.is_file():
            continue
        if committed_manifest(manifest.read_bytes(), where=str(manifest)) is not None:
            best = step
    return best


def policy_record(run: str, policy_tag: str, checkpoint_uri: str | None) -> dict[str, Any]:
    """What the submitting side writes in CHAIN_POLICY_FILE: the run, its policy, where its checkpoints go and
    the newest committed step there before the first link (a reused folder's steps are not this run's progress)."""
    return {"run": run, "policy": policy_tag, "checkpoint_uri": checkpoint_uri,
            "start_step": newest_committed_step(checkpoint_uri)}


def read_policy_record(job_dir: Path) -> dict[str, Any]:
    """CHAIN_POLICY_FILE as `policy_record` wrote it; OSError or ValueError when it is missing or unreadable."""
    record: dict[str, Any] = json.loads((job_dir / CONFIG_FOLDER / CHAIN_POLICY_FILE).read_text(encoding="utf-8"))
    return record


def first_failure(job_dir: Path) -> tuple[str, str] | None:
    """(node, text) of the first node whose output/failure (PID 1's FailureReason) says something, or None."""
    for path in sorted((job_dir / HOSTS_FOLDER).glob("*/output/failure")):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if text:
            return path.parent.parent.name, text
    return None


def read_links(job_dir: Path) -> list[dict[str, Any]]:
    """The decisions taken so far, in order (CHAIN_FILE's JSON lines; a torn last line is skipped)."""
    try:
        text = (job_dir / CHAIN_FILE).read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


__all__ = ["ATTEMPT_LINE", "ATTEMPT_RE", "BATCH_LOG", "CHAIN_FILE", "CHAIN_POLICY_FILE", "CHECKPOINTS_FOLDER",
           "CODE_FOLDER", "CONFIG_FOLDER", "EXITS_FILE", "HOSTS_FOLDER", "first_failure", "JOB_FILE", "LIMIT_LINE",
           "LOGS_FOLDER", "NODE_LOG", "RECORD_FILE", "SCRIPT_FILE", "newest_committed_step", "policy_record",
           "read_policy_record", "read_links"]
