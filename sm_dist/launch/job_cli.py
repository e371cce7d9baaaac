"""`sm-dist status | logs | stop | cost | checkpoints | debug | stacks | release | tensorboard JOB`: the job commands.

One dispatch for all nine: `sm_dist.launch.attach.attach` finds the job by name (a local job on this machine, its
chained run, a SageMaker job or chained run, or another backend's) and each command prints what its handle
returns; `--json` prints the record's `to_dict()`. A local job found by name needs no region and no AWS call.
Each command runs inside `provision.aws.aws_errors`, so an AWS failure is one line naming the job.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from sm_dist.contract.job import JobHandle, Releasable, Steppable
from sm_dist.errors import ConfigError


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, default=str))


def _job(args: argparse.Namespace) -> JobHandle:
    from sm_dist.launch.attach import attach

    return attach(args.job, region=args.region)


def run_status(args: argparse.Namespace) -> int:
    from sm_dist.cloud.run import Run

    job = _job(args)
    record = job.summary() if isinstance(job, Run) else job.status()  # a cloud run: its jobs, one line each, the sums
    _print_json(record.to_dict()) if args.json else print(record)
    return 0


def run_logs(args: argparse.Namespace) -> int:
    for line in _job(args).logs(follow=args.follow):
        print(line, flush=True)
    return 0


def run_stop(args: argparse.Namespace) -> int:
    status = _job(args).stop()
    _print_json(status.to_dict()) if args.json else print(status)
    return 0


def run_cost(args: argparse.Namespace) -> int:
    from sm_dist.cloud.job import Job
    from sm_dist.cloud.run import Run

    job = _job(args)
    if args.calibration_out and not isinstance(job, Job | Run):
        raise ConfigError("--calibration-out", args.calibration_out, f"needs a SageMaker job: {args.job} ran on this "
                          "machine, whose throughput is not a GPU's (sm-dist calibrate measures this machine's GPU)")
    cost = job.cost()
    _print_json(cost.to_dict()) if args.json else print(cost)
    if args.calibration_out and isinstance(job, Job | Run):  # a run refuses, naming one of its jobs
        calibration = job.calibration()
        Path(args.calibration_out).write_text(calibration.to_json() + "\n", encoding="utf-8")
        print(f"calibration  {calibration.describe()} -> {args.calibration_out} "
              f"(sm-dist estimate-cost --calibration {args.calibration_out})", file=sys.stderr if args.json else sys.stdout)
    return 0


def run_checkpoints(args: argparse.Namespace) -> int:
    found = _job(args).checkpoints()
    if args.json:
        _print_json([c.to_dict() for c in found])
        return 0
    if not found:
        print("no checkpoints yet")
    for c in found:
        size = f"{c.total_bytes / 2**20:,.1f} MiB" if c.total_bytes is not None else "-"
        print(f"step {c.step:>9}  {'committed' if c.committed else 'NOT committed':<13}  {size:>12}  {c.uri}")
    return 0


def run_release(args: argparse.Namespace) -> int:
    """End the warm pool the job keeps (a run's: its current job's); say what it was billed for so far."""
    job = _job(args)
    if not isinstance(job, Releasable):
        raise ConfigError("job", args.job, "keeps no warm pool: its backend has none")
    released = job.release_pool()
    _print_json(released.to_dict()) if args.json else print(released)
    return 0


def _steppable(args: argparse.Namespace) -> Steppable:
    job = _job(args)
    if not isinstance(job, Steppable):
        raise ConfigError("job", args.job, "cannot be stepped into: its backend offers no shell")
    return job


def run_debug(args: argparse.Namespace) -> int:
    return _steppable(args).debug(args.host, args.command, args.run)


def run_stacks(args: argparse.Namespace) -> int:
    return _steppable(args).stacks()


def run_tensorboard(args: argparse.Namespace) -> int:
    print(_job(args).tensorboard(start=args.start, port=args.port))
    return 0


RUNNERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "status": run_status, "logs": run_logs, "stop": run_stop, "cost": run_cost, "checkpoints": run_checkpoints,
    "release": run_release, "debug": run_debug, "stacks": run_stacks, "tensorboard": run_tensorboard,
}


def register(command: str, parser: argparse.ArgumentParser) -> None:
    """Add `command`'s arguments to `parser` (called by sm_dist.cli)."""
    parser.add_argument("job", help="a local job's name (or its run folder), a SageMaker training job's name, or a "
                        "chained run's")
    parser.add_argument("--region", help="AWS region of a cloud job (default: your AWS configuration's; a local job "
                        "needs none)")
    if command == "logs":
        parser.add_argument("--follow", "-f", action="store_true", help="keep printing until the job ends")
    if command in ("status", "stop", "cost", "checkpoints", "release"):
        parser.add_argument("--json", action="store_true", help="machine-readable output")
    if command == "cost":
        parser.add_argument("--calibration-out", metavar="FILE",
                            help="write the finished job's measured throughput as a calibration file for "
                                 "`sm-dist estimate-cost --calibration FILE` (needs a job planned with tokens= "
                                 "and the model size)")
    if command == "debug":
        parser.add_argument("--host", default="algo-1", help="which host: algo-1 (default) ... algo-N (a Slurm job: or "
                            "a node's name)")
        parser.add_argument("--command", help="local or Slurm job: run this in the host's shell instead of an "
                            "interactive one")
        parser.add_argument("--run", action="store_true", help="cloud job: start the SSM session, not just print it")
    if command == "tensorboard":
        parser.add_argument("--start", action="store_true", help="start TensorBoard here (the tensorboard package)")
        parser.add_argument("--port", type=int, default=6006, help="TensorBoard's port (default 6006)")
    parser.set_defaults(_run=_with_aws_errors(RUNNERS[command]))


def _with_aws_errors(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`run` with botocore's transport and configuration errors (no region, no credentials, no route) turned into
    one line naming the job (provision.aws.aws_errors); a local job never gets that far."""
    def wrapped(args: argparse.Namespace) -> int:
        from sm_dist.provision.aws import aws_errors

        with aws_errors(f"job {args.job}"):
            return run(args)

    return wrapped


__all__ = ["RUNNERS", "register"]
