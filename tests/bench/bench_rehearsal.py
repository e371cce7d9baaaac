"""The rehearsal's fixed cost: `sm-dist fit --local` (1 host x 2 processes) against a bare `torchrun
--nproc-per-node 2` of the same 24-step CNN, run in turn (A B A B ...) so that both see the same load.

Prints each command's median wall and CPU time, their ratio and the difference (the seconds local mode
adds: CLI start-up, plan, S3 endpoint, host folders and namespace, PID 1, the end of the job,
the summary), then one JSON object on the last line. Goal (issue 27): at most 2 s fixed. On a busy
machine the wall times scatter by seconds: read the pairwise figures and the CPU difference there.

Run by hand: .venv/bin/python tests/bench/bench_rehearsal.py [--runs 5] [--steps 24] [--nproc 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENTRYPOINTS = Path(__file__).resolve().parents[2] / "entrypoints"
GOAL_FIXED_S = 2.0


def _env(scratch: Path) -> dict[str, str]:
    """A user's install has compiled bytecode (pip compiles wheels): allowed, in a private cache."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    return env


def commands(scratch: Path, run: int, steps: int, nproc: int) -> dict[str, list[str]]:
    """The rehearsal and the bare torchrun of the same job, each in its own fresh folder."""
    cli = Path(sys.executable).with_name("sm-dist")
    head = [str(cli)] if cli.exists() else [sys.executable, "-m", "sm_dist.cli"]
    return {
        "rehearsal": head + ["fit", "cnn.py", "--source-dir", str(ENTRYPOINTS), "--local", "--instance-type",
                             "ml.g5.xlarge", "--instance-count", "1", "--nproc-per-node", str(nproc),
                             "--hp", f"steps={steps}", "--local-root", str(scratch / f"local-{run}")],
        "torchrun": [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
                     str(ENTRYPOINTS / "cnn.py"), "--steps", str(steps), "--checkpoint-dir", str(scratch / f"ck-{run}")],
    }


def _time(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and everything it started): CPU time is what a busy
    machine inflates least; on an idle one with a core per process the wall time follows it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{cmd[0]} ... exited {done.returncode}:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="counted runs of each command (default 5)")
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="sm-dist-bench-rehearsal-"))
    env = _env(scratch)
    times: dict[str, list[float]] = {"rehearsal": [], "torchrun": []}
    cpu: dict[str, list[float]] = {"rehearsal": [], "torchrun": []}
    try:
        for run in range(args.runs + 1):  # run 0 warms the page and bytecode caches (and the plan's memo)
            for name, cmd in commands(scratch, run, args.steps, args.nproc).items():
                wall, seconds = _time(cmd, env, scratch)  # the bare script writes model/ in its working directory
                if run:
                    times[name].append(wall)
                    cpu[name].append(seconds)
            for leftover in scratch.glob(f"*-{run}"):
                shutil.rmtree(leftover, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    med = {name: statistics.median(values) for name, values in times.items()}
    med_cpu = {name: statistics.median(values) for name, values in cpu.items()}
    pairs = [a / b for a, b in zip(times["rehearsal"], times["torchrun"])]
    fixed = med["rehearsal"] - med["torchrun"]
    fixed_pairs = statistics.median(a - b for a, b in zip(times["rehearsal"], times["torchrun"]))
    fixed_cpu = med_cpu["rehearsal"] - med_cpu["torchrun"]
    for name, values in times.items():
        print(f"{name:<10} median wall {med[name]:6.2f} s (min {min(values):.2f}, max {max(values):.2f}), "
              f"CPU {med_cpu[name]:6.2f} s, {len(values)} runs")
    print(f"rehearsal / torchrun = {med['rehearsal'] / med['torchrun']:.2f} (pairwise median "
          f"{statistics.median(pairs):.2f}); fixed = {fixed:+.2f} s wall (pairwise median {fixed_pairs:+.2f} s), "
          f"{fixed_cpu:+.2f} s CPU (goal <= {GOAL_FIXED_S:.0f} s; load average {os.getloadavg()[0]:.1f})")
    print(json.dumps({
        "bench": "rehearsal", "steps": args.steps, "nproc_per_node": args.nproc, "runs": args.runs,
        "median_s": {k: round(v, 2) for k, v in med.items()}, "median_cpu_s": {k: round(v, 2) for k, v in med_cpu.items()},
        "ratio": round(med["rehearsal"] / med["torchrun"], 3), "pairwise_ratio": round(statistics.median(pairs), 3),
        "fixed_s": round(fixed, 2), "fixed_pairwise_s": round(fixed_pairs, 2), "fixed_cpu_s": round(fixed_cpu, 2),
        "goal_fixed_s": GOAL_FIXED_S, "met": fixed <= GOAL_FIXED_S, "load_avg": os.getloadavg()[0],
    }))


if __name__ == "__main__":
    main()
