"""`sm-dist fit --local`: the flags local mode adds to `sm-dist fit`, and its printed result.

The wiring goes one way: the facade's command (`sm_dist.launch.cli`) adds these flags, turns them
into `LocalOptions` with `run_options`, hands the plan to the local backend through
`sm_dist.fit(..., local=True)`, and prints the result with `report`. Nothing here imports the
facade. The local defaults (no region, role or bucket needed) are applied where plans are made
(`sm_dist.planning.plan.LOCAL_DEFAULTS`), not here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sm_dist.contract.sagemaker import STOP_GRACE_SECONDS
from sm_dist.errors import ConfigError
from sm_dist.local.options import LocalOptions

if TYPE_CHECKING:
    from sm_dist.local.job import LocalJob


def add_local_flags(parser: argparse.ArgumentParser) -> None:
    """--chaos, --verify, --logs, --local-root, --local-checkpoints, --grace-seconds (with --local)."""
    group = parser.add_argument_group("local mode (with --local)")
    group.add_argument("--chaos", action="append", default=[], metavar="FAULT",
                       help="kill:STEP, kill:SECONDSs, sigterm:STEP, sigterm:SECONDSs, hang:STEP, crash-in-save:STEP, "
                            "kill-in-save:N, s3-faults[:SECONDS] or, with --chain, capacity:TRIES; repeatable")
    group.add_argument("--verify", action="store_true",
                       help="run the job again without chaos and compare the final models (sm_dist's model hash, "
                            "else the weight files in each host's model folder, tensor by tensor)")
    group.add_argument("--logs", action="store_true",
                       help="stream every host's output, prefixed [algo-N], instead of the compact progress view")
    group.add_argument("--local-root", metavar="DIR", help="folder for the hosts' /opt/ml and logs (default: temp)")
    group.add_argument("--local-checkpoints", metavar="DIR",
                       help="a folder standing in for the checkpoint S3 URI; a later run given the same folder "
                            "resumes from it, as a new SageMaker job with the same URI does")
    group.add_argument("--local-data", action="append", default=[], metavar="NAME=DIR",
                       help="a folder standing in for data channel NAME when its source is s3:// or a file system; "
                            "repeatable")
    group.add_argument("--local-s3-data", action="store_true",
                       help="download s3:// channels without a stand-in, read-only, with your own AWS configuration")
    group.add_argument("--grace-seconds", type=float, default=None, metavar="S",
                       help="SIGTERM-to-SIGKILL grace of a stop (default 120, SageMaker's)")


def check_local_flags(args: argparse.Namespace) -> None:
    """Refuse local-mode flags without --local."""
    if not getattr(args, "local", False):
        given = (("--chaos", args.chaos), ("--verify", args.verify), ("--logs", args.logs),
                 ("--local-root", args.local_root),
                 ("--local-checkpoints", args.local_checkpoints), ("--grace-seconds", args.grace_seconds),
                 ("--local-data", args.local_data), ("--local-s3-data", args.local_s3_data))
        for flag, value in given:
            if value:
                raise ConfigError(flag, value, "only with --local (chaos runs on this machine)")


def run_options(args: argparse.Namespace) -> LocalOptions:
    """The `LocalOptions` the flags ask for."""
    return LocalOptions(
        chaos=tuple(args.chaos), verify=args.verify, root=args.local_root, view=not args.logs,
        checkpoint_uri=str(Path(args.local_checkpoints).expanduser().resolve()) if args.local_checkpoints else None,
        grace_seconds=args.grace_seconds if args.grace_seconds is not None else STOP_GRACE_SECONDS,
        # keep stdout for the one JSON object; the view or the hosts' logs go to stderr
        echo_stream=sys.stderr if args.json else None,
        data=dict(_name_dir(text) for text in args.local_data), s3_data=args.local_s3_data,
    )


def _name_dir(text: str) -> tuple[str, str]:
    name, sep, folder = text.partition("=")
    if not sep or not name or not folder:
        raise ConfigError("--local-data", text, "expected NAME=DIR, e.g. --local-data train=./sample")
    return name, folder


def report(job: LocalJob, as_json: bool) -> int:
    """Print the summary (or one JSON object); the job's exit code."""
    if as_json:
        print(json.dumps(job.summary().to_dict(), indent=2, default=str))
    else:
        print(job)
    return int(job.exit_code)


__all__ = ["add_local_flags", "check_local_flags", "report", "run_options"]
