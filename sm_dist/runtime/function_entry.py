"""Run a user's "pkg.module:function" under the runtime, so the user's code has no launcher code.

The contract of the function (documented in docs/guides/runtime.md, "Your own function, no launcher code"):

    def main(ctx, hparams):       # ctx: the RunContext of runtime.init(); hparams: dict
        ...
        return workload | model | None

- `ctx` is initialised: process group joined, every rank seeded identically, strategy and
  precision chosen (flags, then the job spec, then ddp/fp32/0).
- `hparams` holds every `--key value` of the command line (the job's hyperparameters), keys
  with `-` as `_`, values JSON-decoded ("3" -> 3, "true" -> True) as in SageMaker's SM_HPS.
  sm_dist also reads its own keys from the same command line (strategy, precision, seed,
  epochs, steps, batch_size, grad_accum, clip, log_every, model_dir and the checkpoint flags).
- Return a `sm_dist.runtime.train.Workload` and sm_dist trains it with its loop (checkpoints,
  resume, SIGTERM, final model); return the trained `nn.Module` (or `(model, steps)`) and
  sm_dist writes its final weights on rank 0 and prints the final line (step=0 when not given);
  return None when the function saved everything itself.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence

from sm_dist.errors import ConfigError, SmDistError
from sm_dist.jobspec import entry_is_function, load_job_spec

ENTRY_FORMAT = '"pkg.module:function" (e.g. "train:main" for main() in train.py)'


def resolve_function(entry: str) -> Callable[..., object]:
    """Import `entry` ("pkg.module:function") from the working directory or sys.path."""
    if not entry_is_function(entry):
        raise ConfigError("entry", entry, f"expected {ENTRY_FORMAT}")
    module_name, _, func_name = entry.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # torchrun puts the script's folder first, not the code dir
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError("entry", entry, f"module {exc.name!r} not found in {os.getcwd()} or on sys.path; "
                              "run from the folder that holds it") from None
        raise
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ConfigError("entry", entry, f"{module_name} has no function {func_name!r}")
    try:
        inspect.signature(func).bind(None, {})
    except TypeError:
        raise ConfigError("entry", entry, f"define it as `def {func_name}(ctx, hparams)`") from None
    return func


def split_entry(argv: Sequence[str]) -> tuple[str, list[str]]:
    """(entry, rest): the entry is the first argument, else the job spec's `entry`."""
    if argv and not argv[0].startswith("--"):
        return argv[0], list(argv[1:])
    spec = load_job_spec()
    if spec is not None and entry_is_function(spec.entry):
        return spec.entry, list(argv)
    raise ConfigError("entry", None, f"give {ENTRY_FORMAT} as the first argument")


def run(argv: Sequence[str] | None = None) -> int:
    """Entry point of entrypoints/run_function.py; returns the exit code."""
    from sm_dist.runtime.entry import configure_logging

    configure_logging()
    try:
        entry, rest = split_entry(sys.argv[1:] if argv is None else argv)
        _run(resolve_function(entry), rest)
    except SmDistError as exc:
        print(f"run_function: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    return 0


def _run(func: Callable[..., object], argv: list[str]) -> object:
    from torch import nn

    from sm_dist import runtime
    from sm_dist.runtime import train
    from sm_dist.runtime.entry import build_parser, make_checkpointer
    from sm_dist.runtime.train_args import (
        normalize_argv,
        parse_flags,
        parse_hyperparameters,
    )

    parser = build_parser("run_function", lambda group: None, batch_size=32, lr=None)
    args = parse_flags(parser, argv, allow_unknown=True)
    hparams = parse_hyperparameters(normalize_argv(argv))
    config = train.train_config(args)
    with runtime.init(args.strategy, args.precision, args.seed) as ctx:
        result = func(ctx, hparams)
        if isinstance(result, train.Workload):
            return train.fit(ctx, result, config, make_checkpointer(ctx, args))
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], nn.Module):
            return train.write_final_model(ctx, result[0], None, config.model_dir, step=int(result[1]))
        if isinstance(result, nn.Module):
            return train.write_final_model(ctx, result, None, config.model_dir)
        return result
