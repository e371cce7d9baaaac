"""`sm-dist debug JOB [--host algo-N] [--command CMD] [--run]` and `sm-dist stacks JOB`: step inside a job;
`sm-dist release JOB`: end the warm pool it keeps.

JOB is a local job when this machine holds its run folder (its name as local mode printed it, or the
folder: `sm_dist.local.debug.find_run`), else a SageMaker training job (`sm_dist.cloud.debug`). The facade
dispatches, as `sm-dist fit` does: the two backends do not import each other.
"""

from __future__ import annotations

import argparse

from sm_dist.errors import ConfigError


def _describe(args: argparse.Namespace) -> object:
    from sm_dist.cloud.job import Job
    from sm_dist.provision.aws import aws_errors

    with aws_errors(f"DescribeTrainingJob {args.job} (no local job of that name here either)"):
        return Job(args.job, region=args.region).describe()


def run_debug(args: argparse.Namespace) -> int:
    from sm_dist.local import debug as local_debug

    run = local_debug.find_run(args.job)
    if run is not None:
        if args.run:
            raise ConfigError("--run", True, "is for a cloud job's SSM session; a local job's shell opens without it")
        return local_debug.shell(run, args.host, args.command)
    if args.command is not None:
        raise ConfigError("--command", args.command, f"runs in a local job's host, and no local job {args.job!r} is "
                          f"under {local_debug.default_base()} (a run with --local-root: give its folder); in the "
                          "cloud, type it in the SSM session (--run opens it)")
    from sm_dist.cloud import debug as cloud_debug

    return cloud_debug.debug(_describe(args), args.host, args.run)


def run_stacks(args: argparse.Namespace) -> int:
    from sm_dist.local import debug as local_debug

    run = local_debug.find_run(args.job)
    if run is not None:
        return local_debug.stacks(run)
    from sm_dist.cloud import debug as cloud_debug

    return cloud_debug.stacks(_describe(args))


def run_release(args: argparse.Namespace) -> int:
    """End a job's warm pool: a local job's kept hosts (their folder goes), else the cloud job's (sm_dist.cloud.cli)."""
    from sm_dist.local import debug as local_debug

    run = local_debug.find_run(args.job)
    if run is None:
        from sm_dist.cloud.cli import run_release as cloud_release
        from sm_dist.provision.aws import aws_errors

        with aws_errors(f"DescribeTrainingJob {args.job} (no local job of that name here either)"):
            return cloud_release(args)
    import json
    import time

    from sm_dist.local.warm_pool import end

    pool = end(run, args.job)
    idle = round(time.time() - pool.available_at)
    if args.json:
        print(json.dumps({"job": pool.job, "released": True, "retained_s": idle, "retained_usd": None}, indent=2))
        return 0
    print(f"released the warm pool of {pool.job} (local: its hosts' caches, {pool.folder}, removed after {idle} s "
          f"of its {pool.keep_alive_s} s keep-alive)")
    return 0


def register(command: str, parser: argparse.ArgumentParser) -> None:
    """Add `command`'s arguments to `parser` (called by sm_dist.cli)."""
    parser.add_argument("job", help="a local job's name (or its run folder), or a SageMaker training job's name"
                        + (" (or a chained run's: its current job)" if command == "release" else ""))
    parser.add_argument("--region", help="AWS region of a cloud job (default: your AWS configuration's)")
    if command == "debug":
        parser.add_argument("--host", default="algo-1", help="which host: algo-1 (default) ... algo-N")
        parser.add_argument("--command", help="local job: run this in the host's shell instead of an interactive one")
        parser.add_argument("--run", action="store_true", help="cloud job: start the SSM session, not just print it")
    if command == "release":
        parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(_run={"debug": run_debug, "stacks": run_stacks, "release": run_release}[command])


__all__ = ["register"]
