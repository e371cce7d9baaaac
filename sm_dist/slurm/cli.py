"""`sm-dist fit --slurm`: the flags the Slurm backend adds to `sm-dist fit`, and its printed result.
`sm-dist status|logs|stop|checkpoints|cost NAME` find a Slurm job through `sm_dist.launch.attach`
(`sm_dist.slurm.job.find`).

The wiring goes one way, as local mode's does: the facade's command (`sm_dist.launch.cli`) adds these
flags, turns them into `SlurmOptions` with `run_options`, hands the plan to the Slurm backend through
`sm_dist.fit(..., slurm=...)` and prints the result with `report`. Nothing here imports the facade.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from sm_dist.errors import ConfigError
from sm_dist.slurm.options import ROOT_ENV, SlurmOptions

if TYPE_CHECKING:
    from sm_dist.slurm.job import SlurmJob

#: Local mode's flags that mean nothing on a cluster (--chaos and --verify are shared).
_LOCAL_ONLY = ("logs", "local_root", "local_checkpoints", "grace_seconds", "local_data", "local_s3_data")


def add_slurm_flags(parser: argparse.ArgumentParser) -> None:
    """--slurm and what a Slurm user passes: --partition, --account, --qos, ... (with --slurm)."""
    group = parser.add_argument_group("Slurm / HyperPod (with --slurm; --chaos kill:STEP or kill:SECONDSs and --verify work too)")
    group.add_argument("--slurm", action="store_true",
                       help="submit the job with sbatch to the Slurm cluster this machine reaches (SLURM_CONF); "
                            "--dry-run prints the sbatch file")
    group.add_argument("--partition", help="sbatch --partition (default: the cluster's default partition)")
    group.add_argument("--account", help="sbatch --account")
    group.add_argument("--qos", help="sbatch --qos")
    group.add_argument("--constraint", help="sbatch --constraint (node features)")
    group.add_argument("--gpus-per-node", type=int, metavar="N",
                       help="sbatch --gpus-per-node (default: the GPUs of --instance-type when given, else none)")
    group.add_argument("--slurm-root", metavar="DIR",
                       help=f"shared folder the job is staged in (default: ${ROOT_ENV}, else ./sm-dist-slurm)")
    group.add_argument("--slurm-checkpoints", metavar="DIR",
                       help="shared folder for checkpoints (default: <slurm root>/<job>/checkpoints)")
    group.add_argument("--signal-s", type=int, metavar="S",
                       help="SIGTERM this many seconds before the time limit; the job saves and is requeued (120)")
    group.add_argument("--hyperpod-cluster", metavar="NAME",
                       help="a SageMaker HyperPod cluster: read its instance groups (read-only) and refuse a job its "
                            "running nodes cannot take, before submitting")
    group.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                       help="another sbatch option, verbatim (e.g. --sbatch-arg=--reservation=R); repeatable")


def check_slurm_flags(args: argparse.Namespace) -> None:
    """Refuse Slurm flags without --slurm, and local mode's own with it."""
    slurm_only = (("--partition", args.partition), ("--account", args.account), ("--qos", args.qos),
                  ("--constraint", args.constraint), ("--gpus-per-node", args.gpus_per_node),
                  ("--slurm-root", args.slurm_root), ("--slurm-checkpoints", args.slurm_checkpoints),
                  ("--signal-s", args.signal_s), ("--sbatch-arg", args.sbatch_arg),
                  ("--hyperpod-cluster", args.hyperpod_cluster))
    if not args.slurm:
        for flag, value in slurm_only:
            if value:
                raise ConfigError(flag, value, "only with --slurm")
        return
    if args.local:
        raise ConfigError("--slurm", True, "runs on a Slurm cluster: leave out --local")
    for name in _LOCAL_ONLY:
        if getattr(args, name, None):
            raise ConfigError("--" + name.replace("_", "-"), getattr(args, name), "only with --local")


def run_options(args: argparse.Namespace) -> SlurmOptions:
    """The `SlurmOptions` the flags ask for; --chaos or --verify wait for the job, as --wait does."""
    extra = {"signal_s": args.signal_s} if args.signal_s is not None else {}
    return SlurmOptions(partition=args.partition, account=args.account, qos=args.qos, constraint=args.constraint,
                        gpus_per_node=args.gpus_per_node, root=args.slurm_root,
                        checkpoint_dir=args.slurm_checkpoints, chaos=tuple(args.chaos), verify=args.verify,
                        wait=bool(args.wait or args.verify or args.chaos), sbatch_args=tuple(args.sbatch_arg),
                        hyperpod_cluster=args.hyperpod_cluster,
                        **extra)


#: The job's end as the exit code (as `sm-dist fit --wait`: 0 completed, 1 failed, 3 stopped).
_EXIT = {"Completed": 0, "Failed": 1, "Stopped": 3}


def report(job: SlurmJob, waited: bool, as_json: bool) -> int:
    """Print the job's name (submitted) or its summary (waited); the exit code."""
    if not waited:
        if as_json:
            print(json.dumps({"job_name": job.name, "slurm_job_id": job.job_id, "job_dir": str(job.job_dir)}))
        else:
            print(f"submitted {job.name} (Slurm job {job.job_id}); follow it with: sm-dist logs {job.name} --follow")
        return 0
    summary = job.summary()
    print(json.dumps({**summary.to_dict(), "job_name": job.name}, indent=2) if as_json else summary)
    if summary.verified is False:
        return 1
    return _EXIT.get(summary.status, 1)


__all__ = ["add_slurm_flags", "check_slurm_flags", "report", "run_options"]
