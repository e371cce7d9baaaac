"""THE SLURM BACKEND: a plan submitted to a Slurm cluster (HyperPod's or any other), a peer of the
cloud (`sm_dist.cloud`) and local mode (`sm_dist.local`) behind the same plan and `JobHandle`.

    job = sm_dist.fit("cnn.py", instance_count=2, slurm=sm_dist.slurm.SlurmOptions(partition="gpu"))
    sm-dist fit cnn.py --instance-count 2 --slurm --partition gpu [--dry-run: the sbatch file]

The cluster is found as every Slurm client finds it: `sbatch` on PATH and SLURM_CONF. Each node runs
the same per-host start as a SageMaker instance (`python3 -m sm_dist.container.pid1`, after
`sm_dist.container.slurm_host` laid its /opt/ml folder out on the shared file system), so a script
written for SageMaker or for torchrun runs unmodified. Modules: `options` (SlurmOptions), `script`
(the sbatch file, pure), `cluster` (sbatch, scontrol, scancel; Slurm's states mapped), `submit`
(`run`: check, stage, submit, follow, chaos, verify), `job` (SlurmJob, `attach`), `cli`.
"""

from __future__ import annotations

from sm_dist.slurm.job import SlurmJob, attach
from sm_dist.slurm.options import SlurmOptions
from sm_dist.slurm.submit import run

__all__ = ["SlurmJob", "SlurmOptions", "attach", "run"]
