"""`sm-dist status | logs | stop | cost | checkpoints | release JOB`: the cloud job handle from the command line.

Each command attaches to an existing SageMaker training job by name (`Job.attach`) and prints what
the handle returns; `--json` prints the record's `to_dict()`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from sm_dist.cloud.job import Job
from sm_dist.errors import ConfigError


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2, default=str))


def _job(args: argparse.Namespace) -> Job:
    """The job of that name, else the chained run of that name (its jobs `<name>-1`, ...)."""
    try:
        return Job.attach(args.job, region=args.region)
    except ConfigError:
        from sm_dist.cloud.run import Run

        run = Run(args.job, region=args.region)
        try:
            run.jobs()
        except ConfigError:
            raise ConfigError("job", args.job, "no such training job, nor a run of that name "
                              f"({args.job}-1), in this region") from None
        return run


def run_status(args: argparse.Namespace) -> int:
    job = _job(args)
    from sm_dist.cloud.run import Run

    if isinstance(job, Run):  # a run: its jobs, one line each, and the sums
        summary = job.summary()
        _print_json(summary.to_dict()) if args.json else print(summary)
        return 0
    status = job.status()
    _print_json(status.to_dict()) if args.json else print(status)
    return 0


def run_logs(args: argparse.Namespace) -> int:
    for line in _job(args).logs(follow=args.follow):
        print(line, flush=True)
    return 0


def run_stop(args: argparse.Namespace) -> int:
    print(_job(args).stop())
    return 0


def run_cost(args: argparse.Namespace) -> int:
    job = _job(args)
    cost = job.cost()
    _print_json(cost.to_dict()) if args.json else print(cost)
    if args.calibration_out:
        calibration = job.calibration()
        Path(args.calibration_out).write_text(calibration.to_json() + "\n", encoding="utf-8")
        print(f"calibration  {calibration.describe()} -> {args.calibration_out} "
              f"(sm-dist estimate-cost --calibration {args.calibration_out})", file=sys.stderr if args.json else sys.stdout)
    return 0


def run_release(args: argparse.Namespace) -> int:
    """End the job's warm pool now (`Job.release`); say what it was billed for so far."""
    from sm_dist.cloud.run import Run

    job = _job(args)
    target = job.current() if isinstance(job, Run) else job  # a run: its current job's pool
    cost = target.cost()
    retained = target.release()
    usd = cost.retained_usd if retained == cost.retained_s else None
    if args.json:
        _print_json({"job": cost.name, "released": True, "retained_s": retained, "retained_usd": usd})
        return 0
    billed = "" if retained is None else f"; kept {retained} s × {cost.instance_count} instances" + (
        f" ≈ ${usd:,.2f}" if usd is not None else "")
    print(f"released the warm pool of {cost.name} (KeepAlivePeriodInSeconds 0: SageMaker ends it now){billed}")
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


def register(command: str, parser: argparse.ArgumentParser) -> None:
    """Add `command`'s arguments to `parser` (called by sm_dist.cli)."""
    parser.add_argument("job", help="training job name, or a chained run's name")
    parser.add_argument("--region", help="AWS region (default: your AWS configuration's)")
    if command == "logs":
        parser.add_argument("--follow", "-f", action="store_true", help="keep printing until the job ends")
    else:
        parser.add_argument("--json", action="store_true", help="machine-readable output")
    if command == "cost":
        parser.add_argument("--calibration-out", metavar="FILE",
                            help="write the finished job's measured throughput as a calibration file for "
                                 "`sm-dist estimate-cost --calibration FILE` (needs a job planned with tokens= "
                                 "and the model size)")
    runners = {"status": run_status, "logs": run_logs, "stop": run_stop, "cost": run_cost, "checkpoints": run_checkpoints,
               "release": run_release}
    parser.set_defaults(_run=_with_aws_errors(runners[command]))


def _with_aws_errors(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`run` with botocore's transport and configuration errors (no region, no credentials, no route) turned into
    one line naming the job, as `sm-dist debug`, `stacks` and `tensorboard` say them (provision.aws.aws_errors)."""
    def wrapped(args: argparse.Namespace) -> int:
        from sm_dist.provision.aws import aws_errors

        with aws_errors(f"job {args.job}"):
            return run(args)

    return wrapped


__all__ = ["register"]
