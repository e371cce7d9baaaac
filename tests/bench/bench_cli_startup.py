"""Start-up cost of `sm-dist estimate-cost` over the whole catalog, side by side with a bare
interpreter and with `import torch`. Run by hand: /tmp/venv/bin/python tests/bench/bench_cli_startup.py

Goals: estimate-cost / `python -c pass` <= 3.0 (issue #40; it was 5.0 in issue #2); estimate-cost /
`import torch` <= 0.05. The machine is shared: the rounds alternate the commands, and the load average
(`os.getloadavg`) before and after is printed with the figures; CPU-time ratios are less sensitive to it.
Prints the figures, then one JSON object on the last line.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROUNDS = 15  #: interleaved rounds; torch is timed every third round (it is slow)
#: A user's install has compiled bytecode (pip compiles wheels; editable installs write it on
#: first import). Measure that state: bytecode allowed, in a private cache outside the repo.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
_ENV["PYTHONPYCACHEPREFIX"] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "sm_dist_bench_pycache")


def _estimate_cmd() -> list[str]:
    script = Path(sys.executable).with_name("sm-dist")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "sm_dist.cli"]
    return head + ["estimate-cost", "--model", "llama2-7b", "--tokens", "2e12", "--instance-type", "all"]


COMMANDS = {
    "python_pass": [sys.executable, "-c", "pass"],
    "estimate_cost_all": _estimate_cmd(),
    "import_torch": [sys.executable, "-c", "import torch"],
    # the standard library estimate-cost cannot start without (context for the ratio): re (pip's console
    # script imports it, and enum with it), argparse and one parser (its first regexes compiled, gettext's
    # lookups), json (the catalog); no longer typing (sm_dist/_records.py)
    "stdlib_floor": [sys.executable, "-c", "import re, argparse, json; argparse.ArgumentParser().parse_args([])"],
}


def _time(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child): CPU time is less sensitive to a busy machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


#: estimate-cost / `python -c pass`, wall-clock medians (issue #40).
GOAL_RATIO_VS_PYTHON_PASS = 3.0
#: estimate-cost / `import torch`.
GOAL_RATIO_VS_IMPORT_TORCH = 0.05


def main() -> None:
    load_before = os.getloadavg()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for cmd in COMMANDS.values():  # warm the page cache once
        _time(cmd)
    for i in range(ROUNDS):
        times["python_pass"].append(_time(COMMANDS["python_pass"]))
        times["estimate_cost_all"].append(_time(COMMANDS["estimate_cost_all"]))
        times["stdlib_floor"].append(_time(COMMANDS["stdlib_floor"]))
        if i % 3 == 0:
            times["import_torch"].append(_time(COMMANDS["import_torch"]))
    med = {name: statistics.median(w for w, _ in values) for name, values in times.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in times.items()}
    rows = sum(1 for _ in json.loads(subprocess.run(
        COMMANDS["estimate_cost_all"] + ["--json"], check=True, capture_output=True, text=True, env=_ENV).stdout)["rows"])
    for name, value in med.items():
        print(f"{name:<20} median wall {value * 1000:8.1f} ms, CPU {cpu[name] * 1000:8.1f} ms over {len(times[name])} runs")
    ratio_pass = med["estimate_cost_all"] / med["python_pass"]
    ratio_torch = med["estimate_cost_all"] / med["import_torch"]
    load_after = os.getloadavg()
    print(f"estimate-cost ({rows} rows) / python -c pass = {ratio_pass:.2f} (goal <= {GOAL_RATIO_VS_PYTHON_PASS})")
    print(f"estimate-cost / import torch = {ratio_torch:.3f} (goal <= {GOAL_RATIO_VS_IMPORT_TORCH})")
    cpu_pass = cpu["estimate_cost_all"] / cpu["python_pass"]
    cpu_torch = cpu["estimate_cost_all"] / cpu["import_torch"]
    print(f"stdlib floor (re, argparse and a parser, json) / python -c pass = "
          f"{med['stdlib_floor'] / med['python_pass']:.2f}, CPU {cpu['stdlib_floor'] / cpu['python_pass']:.2f}")
    print(f"CPU-time ratios: {cpu_pass:.2f} vs python -c pass, {cpu_torch:.3f} vs import torch")
    print(f"load average (1, 5, 15 min) before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} on {os.cpu_count()} CPUs")
    print(json.dumps({
        "bench": "cli_startup", "rows": rows,
        "median_ms": {k: round(v * 1000, 1) for k, v in med.items()},
        "median_cpu_ms": {k: round(v * 1000, 1) for k, v in cpu.items()},
        "cpu_ratio_vs_python_pass": round(cpu_pass, 3), "cpu_ratio_vs_import_torch": round(cpu_torch, 4),
        "ratio_vs_python_pass": round(ratio_pass, 3), "ratio_vs_import_torch": round(ratio_torch, 4),
        "goal_ratio_vs_python_pass": GOAL_RATIO_VS_PYTHON_PASS, "goal_ratio_vs_import_torch": GOAL_RATIO_VS_IMPORT_TORCH,
        "met": ratio_pass <= GOAL_RATIO_VS_PYTHON_PASS and ratio_torch <= GOAL_RATIO_VS_IMPORT_TORCH,
        "load_average_before": [round(x, 2) for x in load_before], "load_average_after": [round(x, 2) for x in load_after],
    }))


if __name__ == "__main__":
    main()
