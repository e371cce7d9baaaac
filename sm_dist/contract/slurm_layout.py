"""A Slurm job's folder on the cluster's shared file system: what the submitting side writes and each
node's start (`sm_dist.container.slurm_host`) reads, named once (standard library only).

    <root>/<job>/
      code/                 the plan's bundle (sm_dist itself, the script, sm_dist_job.json)
      config/               hyperparameters.json, inputdataconfig.json, job.json (JOB_FILE)
      job.sbatch            the batch script (`sm_dist.slurm.script`)
      slurm_job.json        the submitted job's record (RECORD_FILE: its Slurm id, for `sm-dist status NAME`)
      hosts/<node>/         each node's /opt/ml folder, made afresh by every attempt
      logs/<node>.log       each node's output (appended across attempts); logs/batch.log
      checkpoints/          the default checkpoint folder
      exits                 one line per attempt: `<restart count> <exit code>`
"""

from __future__ import annotations

import re

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
BATCH_LOG = f"{LOGS_FOLDER}/batch.log"
#: Slurm's filename pattern for one file per node (%N: the node's name; `sbatch --output`, docs/PLATFORM.md §12).
NODE_LOG = f"{LOGS_FOLDER}/%N.log"

#: The batch script's first line at each attempt (logs/batch.log), and how the handle reads it back.
ATTEMPT_LINE = "[sm_dist] job {job_id} attempt {attempt} on {nodes}"
ATTEMPT_RE = re.compile(r"^\[sm_dist\] job (\S+) attempt (\d+) on ")

__all__ = ["ATTEMPT_LINE", "ATTEMPT_RE", "BATCH_LOG", "CHECKPOINTS_FOLDER", "CODE_FOLDER", "CONFIG_FOLDER", "EXITS_FILE", "HOSTS_FOLDER",
           "JOB_FILE", "LOGS_FOLDER", "NODE_LOG", "RECORD_FILE", "SCRIPT_FILE"]
