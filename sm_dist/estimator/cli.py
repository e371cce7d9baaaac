"""`sm-dist estimate-cost`: the estimator on the command line.

Numbers are parsed here (not by argparse types) so that bad input becomes one ConfigError line
naming the flag, the value and the fix, with exit code 2.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys

from sm_dist._records import TYPE_CHECKING
from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from sm_dist.estimator.result import Estimate

_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_number(flag: str, text: str | None, *, integer: bool = True) -> float | None:
    """'2e12', '7B', '1.5T', '300M' -> a positive number (an int with `integer`); None stays None."""
    if text is None:
        return None
    raw = str(text).strip().replace("_", "").replace(",", "")
    scale = _SUFFIX.get(raw[-1:].lower(), 1.0) if raw else 1.0
    body = raw[:-1] if scale != 1.0 else raw
    try:
        value = float(body) * scale
    except ValueError:
        raise ConfigError(flag, text, "expected a positive number like 7e9 or 7B") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(flag, text, "expected a positive number")
    if integer:
        if value != int(value) and value < 1e6:
            raise ConfigError(flag, text, "expected a whole number")
        return int(value)
    return value


def parse_whole(flag: str, text: str | None) -> int | None:
    """parse_number for a whole number, typed as one (no typing.overload: typing stays off this path)."""
    value = parse_number(flag, text)
    return None if value is None else int(value)


def parse_counts(values: list[str] | None) -> list[int] | None:
    """['1-4', '8,16'] -> [1, 2, 3, 4, 8, 16]."""
    if not values:
        return None
    counts: set[int] = set()
    for value in values:
        for part in str(value).split(","):
            part = part.strip()
            low, sep, high = part.partition("-")
            try:
                a, b = (int(low), int(high)) if sep else (int(part), int(part))
            except ValueError:
                raise ConfigError("--instance-count", value, "expected counts like 4, 1,2,4 or a range 1-16") from None
            if a < 1 or b < a:
                raise ConfigError("--instance-count", value, "counts are whole numbers >= 1; a range is low-high, e.g. 1-16")
            counts.update(range(a, b + 1))
    return sorted(counts)


def register(command: str, parser: argparse.ArgumentParser) -> None:
    """Add the estimate-cost flags."""
    model = parser.add_argument_group("model (one of)")
    model.add_argument("--params", help="parameter count, e.g. 7e9 or 7B (a GPT-like shape is assumed)")
    model.add_argument("--model", help="preset: gpt2, gpt2-xl, llama2-7b, llama2-13b, llama2-70b, llama3-8b, ...")
    model.add_argument("--hf-config", help="path of a Hugging Face config.json")
    data = parser.add_argument_group("data and batch")
    data.add_argument("--tokens", help="training tokens, e.g. 2e12 (or --samples with --epochs)")
    data.add_argument("--samples", help="training sequences per epoch")
    data.add_argument("--epochs", default="1", help="epochs over --samples (default 1)")
    data.add_argument("--seq-len", help="sequence length (default: the model's context)")
    data.add_argument("--global-batch", help="sequences per optimizer step (default ~4M tokens)")
    data.add_argument("--micro-batch", help="sequences per GPU per forward (default: searched per row, 8, 4, 2, 1)")
    data.add_argument("--precision", default="mixed", help="fp32 | amp | mixed | bf16 (default mixed)")
    data.add_argument("--optimizer", default="adamw", help="adamw | adam | sgd (default adamw)")
    data.add_argument("--activation-checkpointing",
                      help="none | selective | selective-op | full (default: searched per row, selective first — "
                           "attention recomputed, as SDPA does — then selective-op — torchtitan's per-operator policy, "
                           "every other matmul recomputed, +12%% compute — then full, +33%% compute)")
    where = parser.add_argument_group("where")
    where.add_argument("--instance-type", action="append", help="repeatable; 'all' = the whole catalog "
                       "(default p4d, p4de, p5, g5.48xlarge, g6e.48xlarge)")
    where.add_argument("--instance-count", action="append", help="repeatable: 4, 1,2,4 or 1-16 (default 1,2,4,8,16)")
    where.add_argument("--strategy", action="append", help="repeatable: dp ddp zero1 zero2 fsdp hsdp (default all)")
    where.add_argument("--region", default="us-east-1")
    money = parser.add_argument_group("time and money")
    money.add_argument("--spot", action="store_true", help="rank plans by their managed-spot cost")
    money.add_argument("--spot-discount", help="fraction off on-demand for spot (default 0.6)")
    money.add_argument("--mfu", help="model FLOPs utilisation, 0-1 (default: a prior per GPU family)")
    money.add_argument("--calibration", action="append", metavar="FILE",
                       help="repeatable: a file `sm-dist calibrate --out FILE` wrote; its measured MFU replaces the "
                            "prior for that GPU family (other families keep theirs)")
    money.add_argument("--prices", default="catalog", choices=("catalog", "live"),
                       help="catalog (shipped, dated) or live (AWS Price List API, cached)")
    money.add_argument("--async-checkpoint", action="store_true",
                       help="checkpoints stall training only for the copy to host memory (goodput: failures, checkpoint "
                            "stalls and restarts are in every row's hours)")
    money.add_argument("--checkpoint-storage", default="s3", choices=("s3", "local"),
                       help="s3 (the runtime uploads; default) or local (sagemaker-sync: the instance's disk)")
    money.add_argument("--slurm", action="store_true",
                       help="a run on a Slurm cluster (HyperPod's or another): say which rates priced it (SageMaker "
                            "training's, a stand-in)")
    money.add_argument("--max-hours", help="recommend the cheapest plan finishing within this many hours")
    money.add_argument("--budget", help="recommend the fastest plan within this many dollars")
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object (every row)")
    out.add_argument("--all", action="store_true", help="table: every combination, not only the plans that fit")
    out.add_argument("--plot", metavar="FILE", help="also save hours vs dollars of the plans that fit (PNG/SVG/PDF; "
                     "needs matplotlib: pip install 'sm_dist[plot]')")
    parser.set_defaults(_run=run, _logs=False)  # only debug lines (-v): without -v the CLI skips importing logging


def _instance_types(values: list[str] | None) -> list[str] | None:
    if values and any(v.strip().lower() == "all" for v in values):
        from sm_dist.catalog import list_instances

        return [i.name for i in list_instances()]
    return values


def run(args: argparse.Namespace) -> int:
    """Estimate and print; exit 0 (even when nothing fits: that is an answer, said in the output)."""
    from sm_dist.estimator.api import estimate

    # What the imports made (classes, functions) outlives the command, so the collector's passes, which the grid's
    # ~3,000 records set off, and its last one at exit need not walk it (frozen: 12.6 M of 238 M instructions over
    # the whole catalog, tests/bench/bench_cli_startup.py); the records (tuples of numbers and strings) make no
    # reference cycles, so the collector has nothing to find while they are built (2 M more). A caller that goes
    # on (a test or a notebook calling sm_dist.cli.main with its argv) gets its collector back as it was.
    collecting = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        result = estimate(
            params=parse_number("--params", args.params), model=args.model, hf_config=args.hf_config,
            tokens=parse_number("--tokens", args.tokens), samples=parse_number("--samples", args.samples),
            epochs=parse_number("--epochs", args.epochs, integer=False) or 1.0,
            seq_len=parse_whole("--seq-len", args.seq_len), global_batch=parse_whole("--global-batch", args.global_batch),
            micro_batch=parse_whole("--micro-batch", args.micro_batch), precision=args.precision,
            optimizer=args.optimizer, activation_checkpointing=args.activation_checkpointing,
            instance_types=_instance_types(args.instance_type), instance_counts=parse_counts(args.instance_count),
            strategies=args.strategy, spot=args.spot, region=args.region,
            mfu=parse_number("--mfu", args.mfu, integer=False), prices=args.prices,
            max_hours=parse_number("--max-hours", args.max_hours, integer=False),
            budget=parse_number("--budget", args.budget, integer=False),
            spot_discount=parse_number("--spot-discount", args.spot_discount, integer=False),
            calibration=args.calibration, async_checkpoint=args.async_checkpoint,
            checkpoint_storage=args.checkpoint_storage,
        )
        text = _text(result, args)
    finally:
        if not getattr(args, "_exits", False):  # sm_dist.cli.main run as the program exits after the command
            gc.unfreeze()
        if collecting:
            gc.enable()
    sys.stdout.write(text + "\n")
    if args.plot:
        result.plot(args.plot)
        sys.stderr.write(f"plot saved to {args.plot}\n")
    return 0


def _text(result: Estimate, args: argparse.Namespace) -> str:
    """What the command prints: the --json object or the table (with --slurm, the rates that priced it)."""
    if args.json:
        text = result.to_json()
        if args.slurm:
            import json

            from sm_dist.estimator.cost import SLURM_PRICE_BASIS

            text = json.dumps({**json.loads(text), "price_basis": SLURM_PRICE_BASIS}, indent=2)
        return text
    text = result.table(all_rows=args.all)
    if args.slurm:
        from sm_dist.estimator.cost import SLURM_PRICE_BASIS

        text += f"\nprices: {SLURM_PRICE_BASIS}"
    return text


__all__ = ["register", "run", "parse_number", "parse_whole", "parse_counts"]
