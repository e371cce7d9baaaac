"""`sm-dist fit --local`: the flags local mode adds to `sm-dist fit`, and what runs for them.

`sm_dist.launch.cli` registers these flags and hands `--local` runs over to `run_fit_local`.
A local run needs no AWS account: when the settings name no region or role, local mode fills
placeholders that only label the plan (no AWS call is made with them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sm_dist.errors import ConfigError

#: Region whose catalog prices the summary uses when none is given.
LOCAL_REGION = "us-east-1"
#: A well-formed role ARN for the plan of a local job; never sent to AWS.
LOCAL_ROLE_ARN = "arn:aws:iam::000000000000:role/sm-dist-local"


def add_local_flags(parser: argparse.ArgumentParser) -> None:
    """--chaos, --verify, --local-root, --local-checkpoints, --grace-seconds (with --local)."""
    group = parser.add_argument_group("local mode (with --local)")
    group.add_argument("--chaos", action="append", default=[], metavar="FAULT",
                       help="kill:STEP, sigterm:STEP, crash-in-save:STEP or s3-faults[:SECONDS]; repeatable")
    group.add_argument("--verify", action="store_true",
                       help="run the job again without chaos and compare the final model's sha256")
    group.add_argument("--local-root", metavar="DIR", help="folder for the hosts' /opt/ml and logs (default: temp)")
    group.add_argument("--local-checkpoints", metavar="DIR",
                       help="a folder standing in for the checkpoint S3 URI; a later run given the same folder "
                            "resumes from it, as a new SageMaker job with the same URI does")
    group.add_argument("--grace-seconds", type=float, default=None, metavar="S",
                       help="SIGTERM-to-SIGKILL grace of a stop (default 120, SageMaker's)")


def local_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with a region and role filled in when absent (labels only, never used on AWS)."""
    return {"region": LOCAL_REGION, "role": LOCAL_ROLE_ARN, **settings}


def check_local_flags(args: argparse.Namespace) -> None:
    """Refuse local-mode flags without --local."""
    if not getattr(args, "local", False):
        given = (("--chaos", args.chaos), ("--verify", args.verify), ("--local-root", args.local_root),
                 ("--local-checkpoints", args.local_checkpoints))
        for flag, value in given:
            if value:
                raise ConfigError(flag, value, "only with --local (chaos runs on this machine)")


def run_fit_local(entry: str, settings: dict[str, Any], args: argparse.Namespace) -> int:
    """Plan, run locally, print the summary (or one JSON object with --json); exit code."""
    from sm_dist.launch import api

    options: dict[str, Any] = {"chaos": tuple(args.chaos), "verify": args.verify, "root": args.local_root}
    if args.local_checkpoints:
        options["checkpoint_uri"] = str(Path(args.local_checkpoints).expanduser().resolve())
    if args.grace_seconds is not None:
        options["grace_seconds"] = args.grace_seconds
    if args.json:  # keep stdout for the one JSON object; the hosts' logs go to stderr
        options["echo_stream"] = sys.stderr
    job = api.fit(entry, local=True, validate_role=False, local_options=options, **local_settings(settings))
    if args.json:
        print(json.dumps(job.summary(), indent=2, default=str))
    else:
        print(job)
    return int(job.exit_code)
