"""`sm-dist` command line: a lazy dispatcher.

Each command lives in its own module and is imported only when it runs, so
`sm-dist estimate-cost` never pays for boto3, sagemaker or torch. A command module defines
`register(command, parser)`, which adds arguments and sets `parser.set_defaults(_run=func)`;
`func(args)` returns the exit code. Errors derived from SmDistError become one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from sm_dist._records import TYPE_CHECKING
from sm_dist._version import __version__
from sm_dist.errors import SmDistError

if TYPE_CHECKING:
    from typing import Any, NoReturn

#: command name -> (module that implements it, one-line help). Order is the order of --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "estimate-cost": ("sm_dist.estimator.cli", "memory, time and dollars per strategy and instance; recommend the cheapest plan"),
    "measure-memory": ("sm_dist.tools.measure_cli", "measure real per-rank memory on CPU and compare with the estimate"),
    "calibrate": ("sm_dist.selfcheck", "time N training steps on this machine's GPU: a calibration for estimate-cost"),
    "fit": ("sm_dist.launch.cli", "plan and launch a training job on SageMaker (or --local on this machine)"),
    "status": ("sm_dist.launch.job_cli", "status of a job: a local run here, or a SageMaker training job or chained run"),
    "logs": ("sm_dist.launch.job_cli", "logs of a job (local or SageMaker), all hosts"),
    "stop": ("sm_dist.launch.job_cli", "stop a job (local or SageMaker)"),
    "cost": ("sm_dist.launch.job_cli", "what a finished job cost, next to its estimate"),
    "checkpoints": ("sm_dist.launch.job_cli", "committed checkpoints of a job, newest first"),
    "release": ("sm_dist.launch.job_cli", "end the warm pool a finished job keeps (keep_alive_s), now"),
    "debug": ("sm_dist.launch.job_cli", "a shell in a job's host: SSM in the cloud (remote_debug), the host's view locally"),
    "stacks": ("sm_dist.launch.job_cli", "every rank's Python stack of a running job, per host"),
    "tensorboard": ("sm_dist.launch.job_cli", "the tensorboard command on a job's synced TensorBoard folder (--start: run it)"),
    "infra": ("sm_dist.provision.cli", "CloudFormation for the execution role and checkpoint bucket"),
    "local": ("sm_dist.local.clean", "local runs kept on this machine: clean [--older-than 7d] removes old ones"),
}


def _columns() -> int:
    """The help text's width as argparse computes it (the terminal's columns - 2), without importing shutil:
    argparse builds a formatter for every add_argument, and shutil (with bz2, lzma, zlib) was a visible share
    of `estimate-cost` start-up (tests/bench/bench_cli_startup.py)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0")) or os.get_terminal_size(1).columns  # stdout, as shutil asks
    except (ValueError, OSError):
        columns = 80
    return (columns or 80) - 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, whose error is one line with the way to the usage instead of the whole usage first
    (`sm-dist fit`'s is 33 lines, and the error came last). Subcommands' parsers are of the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _get_formatter(self) -> argparse.HelpFormatter:
        formatter: Any = self.formatter_class  # every argparse formatter takes width (typeshed's protocol names prog only)
        return formatter(prog=self.prog, width=_columns())


def _top_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="sm-dist",
        description="Plan, launch and run multi-instance PyTorch training on Amazon SageMaker.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n" + "\n".join(f"  {name:<16}{text}" for name, (_, text) in COMMANDS.items()),
    )
    parser.add_argument("--version", action="version", version=f"sm-dist {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("command", nargs="?", choices=list(COMMANDS), metavar="COMMAND")
    return parser


def build_parser(command: str) -> argparse.ArgumentParser:
    """The parser of one command, importing only that command's module."""
    module_name, text = COMMANDS[command]
    parser = OneLineParser(prog=f"sm-dist {command}", description=text)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    importlib.import_module(module_name).register(command, parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    exits = argv is None  # the program itself (the console script): the process ends with this command
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-"):
        top = _top_parser()
        top.parse_args(argv)  # handles --help / --version and exits
        top.print_help()
        return 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        _top_parser().parse_args([command])  # argparse prints "invalid choice" (with the list) and exits 2
        return 2
    parser = build_parser(command)
    script_args = None
    if command == "fit" and "--" in rest:  # `sm-dist fit train.py [options] -- <the script's own argv>`
        cut = rest.index("--")
        rest, script_args = rest[:cut], rest[cut + 1:]
    args = parser.parse_args(rest)
    if script_args is not None:
        args.args = script_args
    args._exits = exits
    if args.verbose or getattr(args, "_logs", True):  # a command that logs nothing but debug lines skips logging
        _configure_logging(args.verbose)
    try:
        return int(args._run(args) or 0)
    except SmDistError as exc:
        print(f"sm-dist {command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `sm-dist logs JOB | head`: the reader left; nothing to say (Python's documented way)
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail again
        except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (a test's capture)
            pass
        return 141  # 128 + SIGPIPE, as a shell reports a pipeline's writer that the reader left
    except Exception as exc:
        aws = _aws_failure(exc)
        if aws is None or args.verbose or os.environ.get("SM_DIST_DEBUG"):
            return _internal_error(command, exc, args.verbose)
        print(f"sm-dist {command}: error: {aws}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # sm_dist.local.interrupt.Interrupted says what it stopped
        print(f"sm-dist {command}: {exc or 'interrupted'}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 130))


def _configure_logging(verbose: bool) -> None:
    import logging

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s" if verbose else "%(message)s",
    )
    if not verbose:  # botocore logs "Found credentials in ..." at INFO: only -v shows that
        for name in ("botocore", "boto3", "urllib3"):
            logging.getLogger(name).setLevel(logging.WARNING)


def _aws_failure(exc: Exception) -> str | None:
    """One line for what AWS (or the way to it) answered, which no command turned into its own error: an
    endpoint that cannot be reached, missing credentials, a refusal with its code. None: not from AWS.

    A net only: a command that talks to AWS runs inside `sm_dist.provision.aws.aws_errors`, which names what it
    was doing (this core module cannot import it)."""
    botocore = sys.modules.get("botocore.exceptions")  # loaded only if a command talked to AWS
    if botocore is None:
        return None
    if isinstance(exc, botocore.ClientError):
        return f"AWS refused: {exc}"
    if isinstance(exc, botocore.NoRegionError):
        return "region=None: set AWS_REGION (or a region in your AWS profile; --region where the command has it)"
    if isinstance(exc, (botocore.EndpointConnectionError, botocore.ConnectTimeoutError)):
        return f"{exc}: check the network, AWS_REGION and AWS_ENDPOINT_URL"
    if isinstance(exc, botocore.BotoCoreError):
        return f"{exc} (AWS credentials and region: aws configure, AWS_PROFILE, AWS_REGION)"
    return None


def _internal_error(command: str, exc: Exception, verbose: bool) -> int:
    """A bug: say so in one line; the traceback only when asked for."""
    if verbose or os.environ.get("SM_DIST_DEBUG"):
        raise exc
    print(f"sm-dist {command}: internal error: {type(exc).__name__}: {exc} "
          "(this is a bug; rerun with -v for the traceback)", file=sys.stderr)
    return 70


if __name__ == "__main__":
    sys.exit(main())
