"""The glue every entrypoint shares: flags -> runtime.init -> Checkpointer -> fit -> exit code.

An entrypoint script only says which flags it adds and how to build its Workload:

    def workload(args, ctx) -> Workload: ...
    if __name__ == "__main__":
        sys.exit(run_entrypoint("cnn", add_flags, workload, batch_size=32, lr=1e-3))

Errors a user can cause (SmDistError) become one line on stderr and the error's exit code; a
stop on SIGTERM leaves through the Checkpointer's SystemExit(EXIT_INTERRUPTED).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sm_dist.errors import SmDistError

if TYPE_CHECKING:
    from sm_dist.runtime.checkpoint.checkpointer import Checkpointer
    from sm_dist.runtime.context import RunContext
    from sm_dist.runtime.train import TrainResult, Workload

_log = logging.getLogger(__name__)

#: Adds a workload's own flags to its argument group (an ArgumentParser works as well).
AddFlags = Callable[[argparse._ArgumentGroup], None]
#: Builds the Workload from the parsed flags, after runtime.init() (so every rank seeds it alike).
MakeWorkload = Callable[[argparse.Namespace, "RunContext"], "Workload"]


def build_parser(prog: str, add_flags: AddFlags, *, batch_size: int, lr: float | None,
                 description: str | None = None) -> argparse.ArgumentParser:
    """The common flags, the checkpoint flags and the workload's own."""
    from sm_dist.runtime.train_args import add_checkpoint_flags, add_common_flags

    parser = argparse.ArgumentParser(prog=prog, description=description, allow_abbrev=False)
    add_common_flags(parser, batch_size=batch_size, lr=lr)
    add_checkpoint_flags(parser)
    add_flags(parser.add_argument_group(f"{prog} workload"))
    return parser


def run_entrypoint(prog: str, add_flags: AddFlags, make_workload: MakeWorkload, *, batch_size: int, lr: float,
                   description: str | None = None, argv: Sequence[str] | None = None) -> int:
    """Parse flags (SageMaker `--key value` style too), train, return the process exit code."""
    configure_logging()
    try:
        from sm_dist.runtime.train_args import parse_flags

        args = parse_flags(build_parser(prog, add_flags, batch_size=batch_size, lr=lr, description=description), argv)
        train_with_flags(args, make_workload)
    except SmDistError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    return 0


def train_with_flags(args: argparse.Namespace, make_workload: MakeWorkload) -> TrainResult:
    """runtime.init with the flags, build the workload (plus --lr-schedule unless it brings its own
    scheduler) and the Checkpointer, fit."""
    from sm_dist import runtime
    from sm_dist.runtime.schedules import lr_schedule
    from sm_dist.runtime.train import fit, train_config

    config = train_config(args)
    with runtime.init(args.strategy, args.precision, args.seed) as ctx:
        workload = make_workload(args, ctx)
        if workload.scheduler is None:
            workload = dataclasses.replace(workload, scheduler=lr_schedule(args.lr_schedule,
                                                                           warmup_steps=args.warmup_steps))
        return fit(ctx, workload, config, make_checkpointer(ctx, args))


def make_checkpointer(ctx: RunContext, args: argparse.Namespace) -> Checkpointer | None:
    """A Checkpointer with the flags over the job spec's settings, or None when no location is configured."""
    from sm_dist.contract.checkpoint import CheckpointSettings
    from sm_dist.jobspec import load_job_spec
    from sm_dist.runtime.train_args import checkpoint_settings

    if args.no_checkpoint:
        return None
    spec = load_job_spec()
    in_spec = spec is not None and (spec.checkpoint.mode != "auto" or spec.checkpoint.uri or spec.checkpoint.local_path)
    if not (args.checkpoint_dir or args.checkpoint_uri or in_spec or ctx.env.checkpoint_dir):
        _log.info("no checkpoint location (--checkpoint-dir, --checkpoint-uri or the job spec): "
                  "training without checkpoints")
        return None
    from sm_dist.runtime.checkpoint.checkpointer import Checkpointer

    base = spec.checkpoint if spec is not None else CheckpointSettings()
    return Checkpointer(ctx, checkpoint_settings(args, base))


def configure_logging() -> None:
    """INFO on rank 0, WARNING elsewhere, each line tagged with the rank (entrypoints only)."""
    rank = os.environ.get("RANK", "0")
    logging.basicConfig(level=logging.INFO if rank == "0" else logging.WARNING,
                        format=f"[rank {rank}] %(levelname)s %(name)s: %(message)s")
    # boto3 says "Found credentials in environment variables" on every client it builds
    for chatty in ("botocore", "boto3", "s3transfer", "urllib3"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
