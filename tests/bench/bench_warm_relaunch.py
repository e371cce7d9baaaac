"""A warm relaunch against a cold start: two `sm-dist fit --local --keep-alive-s 600` of the same job in a row,
the second on the first's kept warm pool, so that its hosts find the persistent cache the first left.

The job is what a relaunch redoes at start: a script that torch.compile()s a small model (its kernels go
to TORCHINDUCTOR_CACHE_DIR, which PID 1 points into the cache) and loads "weights" from HF_HOME that the
first run downloads (a sleep of --download-s stands in for the network). The script prints its own
start-up (from its first line to the first compiled step: wall seconds, and CPU seconds, which a busy
machine inflates least); the bench prints each run's start-up and whole `fit` wall time, cold and warm
side by side for each round (every round in a fresh folder, so its first run is cold), the medians and
their ratios, then one JSON object on the last line.

Run by hand: .venv/bin/python tests/bench/bench_warm_relaunch.py [--rounds 3] [--download-s 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = '''
import os, pathlib, resource, sys, time
start = time.perf_counter()


def cpu():
    return sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


import torch
hf = pathlib.Path(os.environ["HF_HOME"])
weights = hf / "hub" / "bench-model.pt"
if not weights.exists():  # the download a warm relaunch skips
    time.sleep(float(sys.argv[1]))
    weights.parent.mkdir(parents=True, exist_ok=True)
    torch.save(torch.nn.Linear(64, 64).state_dict(), weights)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.GELU(),
                            torch.nn.Linear(64, 8))
model[0].load_state_dict(torch.load(weights))
step = torch.compile(model)
loss = step(torch.randn(16, 64)).square().mean()
print(f"startup_s={time.perf_counter() - start:.2f} startup_cpu_s={cpu():.2f}", flush=True)
print(f"[sm_dist] step=1 loss={loss.item():.4f}", flush=True)
'''


def fit(src: Path, root: Path, download_s: float) -> tuple[float, float, float, str]:
    """One local fit: (its start-up as the script measured it: wall and CPU seconds; the fit's wall seconds;
    the summary's warm-pool word)."""
    cli = Path(sys.executable).with_name("sm-dist")
    head = [str(cli)] if cli.exists() else [sys.executable, "-m", "sm_dist.cli"]
    cmd = head + ["fit", "probe.py", "--source-dir", str(src), "--local", "--keep-alive-s", "600", "--instance-count",
                  "1", "--nproc-per-node", "1", "--local-root", str(root), "--logs", "--", str(download_s)]
    begin = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=dict(os.environ))
    wall = time.perf_counter() - begin
    if done.returncode != 0:
        raise SystemExit(f"fit exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    startup = re.search(r"startup_s=([\d.]+) startup_cpu_s=([\d.]+)", done.stdout + done.stderr)
    pool = re.search(r"warm pool +(\S+)", done.stdout)
    if startup is None:
        raise SystemExit(f"no startup_s line:\n{done.stdout[-3000:]}")
    return float(startup.group(1)), float(startup.group(2)), wall, pool.group(1) if pool else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--download-s", type=float, default=2.0)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        for n in range(args.rounds):
            folder = Path(tmp) / f"round-{n}"  # its own warm-pools/: the first run is cold
            (folder / "src").mkdir(parents=True)
            (folder / "src" / "probe.py").write_text(SCRIPT)
            cold, warm = fit(folder / "src", folder / "cold", args.download_s), fit(folder / "src", folder / "warm",
                                                                                    args.download_s)
            rows.append((cold, warm))
            print(f"round {n + 1}: start-up cold {cold[0]:6.2f} s ({cold[1]:.2f} s CPU, {cold[3]})  warm {warm[0]:6.2f} s "
                  f"({warm[1]:.2f} s CPU, {warm[3]})   fit wall cold {cold[2]:6.2f} s  warm {warm[2]:6.2f} s", flush=True)
    med = {f"{side}_{name}": statistics.median(r[i][j] for r in rows) for i, side in enumerate(("cold", "warm"))
           for j, name in enumerate(("startup_s", "startup_cpu_s", "wall_s"))}
    ratio = med["warm_startup_s"] / med["cold_startup_s"]
    print(f"median start-up: cold {med['cold_startup_s']:.2f} s, warm {med['warm_startup_s']:.2f} s, warm/cold "
          f"{ratio:.2f} (CPU: {med['cold_startup_cpu_s']:.2f} s, {med['warm_startup_cpu_s']:.2f} s, "
          f"{med['warm_startup_cpu_s'] / med['cold_startup_cpu_s']:.2f}); fit wall: cold {med['cold_wall_s']:.2f} s, "
          f"warm {med['warm_wall_s']:.2f} s, warm/cold {med['warm_wall_s'] / med['cold_wall_s']:.2f}")
    print(json.dumps({**{k: round(v, 2) for k, v in med.items()}, "startup_ratio": round(ratio, 3),
                      "rounds": args.rounds, "download_s": args.download_s, "cpus": os.cpu_count(),
                      "load1": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
