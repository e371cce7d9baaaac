"""`python -m sm_dist.selfcheck` (the GPU check kit) and `sm-dist calibrate`: the stdlib entry.

Both measure this machine with torch, so both run the runtime's implementation
(`sm_dist.tools.selfcheck`) as a child process, as local mode runs the runtime: this module
imports nothing of the runtime and no torch (`import sm_dist` and the CLI stay light, the import
worlds one-way). Here the flags are read and checked (bad input: one line naming the flag, exit
2), the child gets the environment the flags ask for (`--device cpu` hides the GPUs), and its
exit status is passed on. What is measured, and the report, are described in
sm_dist/tools/selfcheck/__main__.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import os
import subprocess
import sys

from sm_dist.errors import ConfigError, MissingDependencyError, SmDistError

RUNTIME = "sm_dist.tools.selfcheck"
DEVICES = ("auto", "cuda", "cpu")


def _positive(flag: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(flag, value, "expected a positive whole number")


def _child(argv: list[str], device: str) -> int:
    """Run the runtime's implementation with `argv`; its exit status."""
    if importlib.util.find_spec("torch") is None:
        raise MissingDependencyError("the GPU check kit and calibrate", "torch", "runtime")
    env = dict(os.environ)
    if device == "cpu":  # the CPU path even on a GPU machine (torch reads this before it starts CUDA)
        env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run([sys.executable, "-m", RUNTIME, *argv], env=env).returncode


def default_report_path(now: dt.datetime | None = None) -> str:
    """sm-dist-selfcheck-YYYYMMDD-HHMMSS.json in the current folder (UTC)."""
    when = now or dt.datetime.now(dt.timezone.utc)
    return f"sm-dist-selfcheck-{when:%Y%m%d-%H%M%S}.json"


def _kit_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sm_dist.selfcheck",
        description="The GPU check kit: every strategy with NCCL at world size = GPU count, peak CUDA memory of a "
                    "LLaMA-shaped model against the estimate, step time and bf16 MFU, SyncBatchNorm, the fp16 "
                    "GradScaler; a dated JSON report. Without a GPU: the strategies with gloo at world size 2 on a "
                    "tiny model, persistent memory against the estimate, the GradScaler; one line per skipped part.")
    parser.add_argument("--out", help="the JSON report (default sm-dist-selfcheck-<UTC date-time>.json here)")
    parser.add_argument("--device", default="auto", choices=DEVICES,
                        help="auto: the GPUs when there are any; cpu: the CPU checks even on a GPU machine")
    parser.add_argument("--layers", type=int, help="GPU model: LLaMA-2-7B's shape with this many blocks (default 2)")
    parser.add_argument("--seq-len", type=int, help="GPU model's sequence length (default 2048)")
    parser.add_argument("--micro-batch", type=int, help="sequences per GPU per step (default 1)")
    parser.add_argument("--steps", type=int, help="timed steps per strategy (default 10 on GPUs, 3 on CPU)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """`python -m sm_dist.selfcheck`: check the flags, then run the kit in a child process."""
    args = _kit_parser().parse_args(argv)
    try:
        for flag in ("layers", "seq_len", "micro_batch", "steps"):
            _positive("--" + flag.replace("_", "-"), getattr(args, flag))
        child = ["--out", args.out or default_report_path(), "--device", args.device]
        for flag in ("layers", "seq_len", "micro_batch", "steps"):
            if getattr(args, flag) is not None:
                child += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
        return _child(child, args.device)
    except SmDistError as exc:
        print(f"sm_dist.selfcheck: error: {exc}", file=sys.stderr)
        return exc.exit_code


# -- sm-dist calibrate -------------------------------------------------------------------------
def register(command: str, parser: argparse.ArgumentParser) -> None:
    """The `sm-dist calibrate` flags."""
    parser.add_argument("--model", required=True,
                        help="preset (llama2-7b, gpt2, ...), a Hugging Face config.json, or module:function returning "
                             "an nn.Module or (nn.Module, token batch)")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--out", required=True, help="the calibration file to write (estimate-cost --calibration)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cuda (default): this machine's GPU; cpu: only to try the command (a CPU measurement "
                             "calibrates no GPU family)")
    parser.add_argument("--layers", type=int, help="keep this many blocks of a preset or config (to fit one GPU)")
    parser.add_argument("--seq-len", type=int, help="sequence length (default: the model's, at most 2048)")
    parser.add_argument("--micro-batch", type=int, default=1, help="sequences per step (default 1)")
    parser.add_argument("--precision", default="mixed", help="fp32 | amp | mixed | bf16 (default mixed)")
    parser.set_defaults(_run=run)


def _check_model(spec: str) -> None:
    """Fail before starting torch: an unknown preset, a missing file, an unimportable module."""
    if ":" in spec and not os.path.exists(spec):
        module = spec.partition(":")[0]
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise ConfigError("--model", spec, "expected an importable module:function (is its folder on PYTHONPATH?)")
        return
    if spec.endswith(".json") or os.path.exists(spec):
        from sm_dist.estimator import hf_config

        hf_config.read(spec)
        return
    from sm_dist.estimator.models import preset

    preset(spec)


def run(args: argparse.Namespace) -> int:
    """`sm-dist calibrate`: N steps of the model on this machine's GPU, the calibration file written."""
    from sm_dist.vocab import Precision, parse_enum

    for flag, value in (("--steps", args.steps), ("--layers", args.layers), ("--seq-len", args.seq_len),
                        ("--micro-batch", args.micro_batch)):
        _positive(flag, value)
    if args.warmup < 0:
        raise ConfigError("--warmup", args.warmup, "expected 0 or more steps")
    precision = parse_enum(Precision, args.precision, "precision")
    _check_model(args.model)
    child = ["calibrate", "--model", args.model, "--steps", str(args.steps), "--warmup", str(args.warmup),
             "--out", args.out, "--device", args.device, "--micro-batch", str(args.micro_batch),
             "--precision", precision.value]
    for flag, value in (("--layers", args.layers), ("--seq-len", args.seq_len)):
        if value is not None:
            child += [flag, str(value)]
    return _child(child, args.device)


__all__ = ["default_report_path", "main", "register", "run"]

if __name__ == "__main__":
    sys.exit(main())
