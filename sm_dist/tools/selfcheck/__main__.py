"""`python -m sm_dist.tools.selfcheck [kit flags]`, `... calibrate ...`, `... rank JOB ...`.

Started by the stdlib entry sm_dist/selfcheck.py (the kit, `sm-dist calibrate`) and by the kit
itself (`rank`: one process of a multi-process check, see spawn.py). A SmDistError is one line
on stderr and its exit code; the kit exits 1 when a check failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sm_dist.errors import SmDistError


def _kit(argv: list[str]) -> int:
    import torch

    from sm_dist.tools.selfcheck.kit import run_kit

    parser = argparse.ArgumentParser(prog="python -m sm_dist.tools.selfcheck")
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    for flag in ("--layers", "--seq-len", "--micro-batch", "--steps"):
        parser.add_argument(flag, type=int)
    args = parser.parse_args(argv)
    gpus = 0 if args.device == "cpu" else torch.cuda.device_count()
    if args.device == "cuda" and not gpus:
        raise SmDistError("--device cuda: no CUDA GPU on this machine (leave --device out for the CPU checks)")
    return run_kit(args.out, gpus, layers=args.layers, seq_len=args.seq_len, micro_batch=args.micro_batch,
                   steps=args.steps)


def _calibrate(argv: list[str]) -> int:
    from sm_dist.tools.selfcheck.calibrate import calibrate

    parser = argparse.ArgumentParser(prog="python -m sm_dist.tools.selfcheck calibrate")
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--precision", default="mixed")
    for flag, default in (("--steps", 20), ("--warmup", 3), ("--layers", None), ("--seq-len", None),
                          ("--micro-batch", 1)):
        parser.add_argument(flag, type=int, default=default)
    args = parser.parse_args(argv)
    record = calibrate(args.model, steps=args.steps, warmup=args.warmup, device=args.device, out=args.out,
                       layers=args.layers, seq_len=args.seq_len, micro_batch=args.micro_batch, precision=args.precision)
    mfu = f"MFU {record.mfu:.3f} of {record.gpu_family}'s {record.peak_tflops:g} TFLOP/s" if record.mfu is not None \
        else "no MFU: not a catalog GPU, so it calibrates no estimate"
    memory = f", peak memory {record.peak_memory_bytes / 2**30:.2f} GiB" if record.peak_memory_bytes else ""
    print(f"{record.model} on {record.device_name}: {record.tokens_per_second:,.0f} tokens/s over {record.steps} steps "
          f"(micro-batch {record.micro_batch} x {record.seq_len}), {mfu}{memory}; written to {args.out}")
    return 0


def _rank(argv: list[str]) -> int:
    from sm_dist.tools.selfcheck import checks

    parser = argparse.ArgumentParser(prog="python -m sm_dist.tools.selfcheck rank")
    parser.add_argument("job", choices=("strategies", "syncbn"))
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    result = checks.strategies(config) if args.job == "strategies" else checks.sync_batchnorm(config)
    Path(args.out).write_text(json.dumps(result), encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args and args[0] in ("calibrate", "rank") else "kit"
    run = {"kit": _kit, "calibrate": _calibrate, "rank": _rank}[command]
    try:
        return run(args if command == "kit" else args[1:])
    except SmDistError as exc:
        print(f"sm-dist {'calibrate' if command == 'calibrate' else 'selfcheck'}: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
