"""`sm-dist tensorboard JOB [--start] [--port N]`: the `tensorboard --logdir` command on a job's TensorBoard files.

JOB is a local job when this machine holds its run folder (`sm_dist.local.debug.find_run`: its name as
local mode printed it, or the folder); its files are the `<run>/tensorboard` folder local mode downloaded
from its S3 prefix. Else JOB is a SageMaker training job (or a chained run), whose files are at its
TensorBoardOutputConfig.S3OutputPath, read by TensorBoard from S3 while the job runs (docs/PLATFORM.md §1.14).
The facade dispatches: the two backends do not import each other.
"""

from __future__ import annotations

import argparse

from sm_dist.contract.job import tensorboard_command
from sm_dist.errors import ConfigError


def run_tensorboard(args: argparse.Namespace) -> int:
    from sm_dist.local import tb_sync
    from sm_dist.local.debug import find_run

    run = find_run(args.job)
    if run is not None:
        folder = run / tb_sync.FOLDER
        if not folder.is_dir():
            raise ConfigError("job", args.job, "ran locally without tensorboard=True (--tensorboard): no TensorBoard "
                              "folder")
        print(tensorboard_command(str(folder), start=args.start, port=args.port))
        return 0
    from sm_dist.cloud.job import Job
    from sm_dist.provision.aws import aws_errors

    with aws_errors(f"DescribeTrainingJob {args.job} (no local job of that name here either)"):
        try:
            job = Job.attach(args.job, region=args.region)
        except ConfigError:  # not a job: a chained run's name (its jobs <name>-1, ...)
            from sm_dist.cloud.run import Run

            job = Run(args.job, region=args.region)
            try:
                job.jobs()
            except ConfigError:
                raise ConfigError("job", args.job, f"no local job of that name here, nor a training job or a chained "
                                  f"run ({args.job}-1) in this region: check the name and --region") from None
        print(job.tensorboard(start=args.start, port=args.port))
    return 0


def register(command: str, parser: argparse.ArgumentParser) -> None:
    """Add the arguments of `sm-dist tensorboard` to `parser` (called by sm_dist.cli)."""
    parser.add_argument("job", help="a local job's name (or its run folder), a SageMaker training job's or a run's name")
    parser.add_argument("--region", help="AWS region of a cloud job (default: your AWS configuration's)")
    parser.add_argument("--start", action="store_true", help="start TensorBoard here (the tensorboard package)")
    parser.add_argument("--port", type=int, default=6006, help="TensorBoard's port (default 6006)")
    parser.set_defaults(_run=run_tensorboard)


__all__ = ["register", "run_tensorboard"]
