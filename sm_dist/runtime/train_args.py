"""Command-line flags shared by every entrypoint, tolerant of how SageMaker passes them.

SageMaker's torchrun driver turns hyperparameters into `--key value` (docs/PLATFORM.md §1.2): keys as
the user spelled them (`batch_size` or `batch-size`), every value a string, non-strings
JSON-encoded (`true`, `null`, `3`). `normalize_argv` maps `--batch_size` to `--batch-size`;
the converters below accept `true`/`false` and `null`. Strategy, precision and seed default to
None, so `runtime.init` takes them from the job spec (SM_DIST_JOB_SPEC) and then its defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from typing import TypeVar

from sm_dist.contract.checkpoint import MIN_KEEP, CheckpointMode, CheckpointSettings
from sm_dist.errors import ConfigError
from sm_dist.vocab import did_you_mean

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_NULL = ("", "null", "none")
#: Flags a legacy `torch.distributed.launch` appends; torchrun sets LOCAL_RANK instead (docs/PLATFORM.md §2.1).
_IGNORED = ("--local-rank",)
#: Flag names that are gone: old name -> the one it is now (refused in one line naming it).
REMOVED_FLAGS = {"--save-every": "--checkpoint-interval-steps", "--async-save": "--async-checkpoint"}


def flag_bool(text: str) -> bool:
    """`true`/`false` (any case, also 1/0, yes/no) as SageMaker's JSON-encoded bools arrive."""
    low = str(text).strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def optional_int(text: str) -> int | None:
    """An integer, or None for `null` (how SageMaker passes a None hyperparameter)."""
    if str(text).strip().lower() in _NULL:
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or null, got {text!r}") from None


def optional_float(text: str) -> float | None:
    """A float, or None for `null`."""
    if str(text).strip().lower() in _NULL:
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or null, got {text!r}") from None


def optional_str(text: str) -> str | None:
    """A string, or None for `null`."""
    return None if str(text).strip().lower() in _NULL else text


def add_common_flags(parser: argparse.ArgumentParser, *, batch_size: int, lr: float | None) -> None:
    """--strategy --precision --seed --epochs --steps --batch-size --lr and the loop's knobs.

    lr=None leaves --lr and --weight-decay out (run_function passes them to the user's function).
    """
    run = parser.add_argument_group("run (None = job spec, then the runtime's default)")
    run.add_argument("--strategy", type=optional_str, help="dp, ddp, zero1, zero2, fsdp or hsdp")
    run.add_argument("--precision", type=optional_str, help="fp32, amp, mixed or bf16")
    run.add_argument("--seed", type=optional_int, help="seed of model init and data order")
    loop = parser.add_argument_group("training loop")
    loop.add_argument("--epochs", type=optional_int, default=1, help="passes over the data (default 1)")
    loop.add_argument("--steps", type=optional_int, help="stop after this many optimizer steps (wins over --epochs)")
    loop.add_argument("--batch-size", type=int, default=batch_size, help=f"per-rank micro-batch (default {batch_size})")
    loop.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step (default 1)")
    if lr is not None:
        loop.add_argument("--lr", type=float, default=lr, help=f"AdamW learning rate (default {lr})")
        loop.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay (default 0)")
        loop.add_argument("--lr-schedule", default="constant", help="constant or cosine (default constant)")
        loop.add_argument("--warmup-steps", type=int, default=0, help="linear warmup steps (default 0)")
    loop.add_argument("--clip", type=optional_float, default=1.0, help="max gradient norm, null = off (default 1.0)")
    loop.add_argument("--log-every", type=int, default=1, help="print a metric line every N steps (default 1)")
    loop.add_argument("--model-dir", type=optional_str, help="where rank 0 writes the final model (default SM_MODEL_DIR)")
    loop.add_argument("--step-sleep-s", type=float, default=0.0,
                      help="sleep after each step (default 0): paces a rehearsal, e.g. a chain's links")


def add_checkpoint_flags(parser: argparse.ArgumentParser) -> None:
    """--checkpoint-dir/--checkpoint-uri --checkpoint-interval-steps --keep --async-checkpoint (None = job spec)."""
    ckpt = parser.add_argument_group("checkpoints (None = job spec, then the checkpointer's default)")
    where = ckpt.add_mutually_exclusive_group()
    where.add_argument("--checkpoint-dir", type=optional_str, help="local folder for checkpoints")
    where.add_argument("--checkpoint-uri", type=optional_str, help="s3://bucket/prefix for checkpoints")
    # one name from sm-dist fit to the runtime: LaunchConfig.checkpoint_interval_steps, the job spec's
    # checkpoint.interval_steps (the checkpoint section's interval_steps, flattened); async_checkpoint everywhere
    ckpt.add_argument("--checkpoint-interval-steps", dest="checkpoint_interval_steps", type=optional_int,
                      help="save every N optimizer steps")
    ckpt.add_argument("--keep", type=optional_int, help=f"committed checkpoints to keep (>= {MIN_KEEP})")
    ckpt.add_argument("--async-checkpoint", type=flag_bool, nargs="?", const=True, help="write checkpoints in the background")
    ckpt.add_argument("--no-checkpoint", action="store_true", help="train without checkpoints")


def checkpoint_settings(args: argparse.Namespace, base: CheckpointSettings) -> CheckpointSettings:
    """The checkpoint flags over `base` (the job spec's settings): a flag given replaces its field."""
    settings = base
    if args.checkpoint_dir:
        settings = dataclasses.replace(settings, mode=CheckpointMode.LOCAL, local_path=args.checkpoint_dir, uri=None)
    if args.checkpoint_uri:
        settings = dataclasses.replace(settings, uri=args.checkpoint_uri)
    return dataclasses.replace(
        settings,
        interval_steps=_given(args.checkpoint_interval_steps, settings.interval_steps),
        keep=_given(args.keep, settings.keep),
        async_checkpoint=_given(args.async_checkpoint, settings.async_checkpoint),
    )


def _given(flag: _T | None, field: _T) -> _T:
    return field if flag is None else flag


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """`--batch_size 3` -> `--batch-size 3`; drop `--local-rank N` (legacy launcher). Values untouched."""
    out: list[str] = []
    skip_value = False
    for arg in argv:
        if skip_value:
            skip_value = False
            continue
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg.partition("=")
            name = name.replace("_", "-")
            if name in _IGNORED:
                skip_value = not eq
                continue
            arg = name + eq + value
        out.append(arg)
    return out


def parse_flags(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None, *,
                allow_unknown: bool = False) -> argparse.Namespace:
    """Parse SageMaker-style argv; an unknown flag is a ConfigError with a suggestion (unless allowed)."""
    argv = normalize_argv(sys.argv[1:] if argv is None else argv)
    for old, new in REMOVED_FLAGS.items():
        given = next((arg for arg in argv if arg == old or arg.startswith(old + "=")), None)
        if given is not None:
            raise ConfigError(old, given.partition("=")[2] or None, f"renamed: use {new} (the name it has from "
                              "sm-dist fit to the job spec)")
    args, unknown = parser.parse_known_args(argv)
    if unknown and not allow_unknown:
        known = [opt for action in parser._actions for opt in action.option_strings]
        flag = unknown[0].partition("=")[0]
        raise ConfigError("argument", unknown[0], f"unknown flag{did_you_mean(flag, known)}; see --help")
    return args


def parse_hyperparameters(argv: Sequence[str]) -> dict[str, object]:
    """Every `--key value` / `--key=value` / bare `--flag` of argv as a dict, as SageMaker's SM_HPS does:
    keys with `-` turned into `_`, values JSON-decoded when they parse ("3" -> 3, "true" -> True)."""
    out: dict[str, object] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--") or len(arg) == 2:
            raise ConfigError("argument", arg, "expected --key value pairs")
        name, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                value, i = argv[i + 1], i + 1
            else:
                value = "true"
        out[name.replace("-", "_")] = _decode(value)
        i += 1
    return out


def _decode(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text
