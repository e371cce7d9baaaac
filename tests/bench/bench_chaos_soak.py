"""Timed-chaos soak: local jobs killed or stopped (spot) at random moments, and how each ended.

Run by hand (minutes per job on 2 cores; not collected by pytest):

    python tests/bench/bench_chaos_soak.py --runs 24 [--seed 1] [--root /tmp/soak] [--scenarios cnn,hf_each_node,...]
        [--bands "start-up,middle,last 10%"]

Each scenario first runs twice without chaos: the two must end with the same model (else the
script is not reproducible and a fault run proves nothing); the shorter command wall time W is
"the work", the shorter job time J (the summary's wall_seconds, the chaos clock) places the
faults, the first run's model is the reference. Then each run picks a scenario, a fault (kill,
sigterm, or sigterm then kill) and a moment in one of three bands: start-up (0-15 % of J) and
middle (30-70 % of J) as `--chaos KIND:SECONDSs`; the last 10 % on the script's own progress,
`--chaos KIND:N` with N in the last tenth of its steps (sm_dist's step lines, or its tqdm bar):
the job's clock is too coarse there, most such moments come after the end. Each runs
`sm-dist fit --local --json`. A run is:

- **fired** when every fault fired (a fault the job outran proves nothing; it is counted apart);
- **identical** when it completed and its final model equals the reference (sm_dist's model hash,
  else the model folders tensor by tensor through `sm_dist.tools.weights_compare`);
- **clear failure** when it failed with the worker's own error (not a bare rendezvous or
  ChildFailedError line): listed for reading;
- **silent difference** when it completed with another model (or none to compare);
- **stall** when it took more than W × (1 + faults fired) + 30 s: every fault may cost one more
  start-up and the steps since the last checkpoint, never minutes of waiting.

The last lines are the tally and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BYO = REPO / "tests" / "local" / "byo"
COMMON = ["--local", "--instance-type", "ml.g5.xlarge", "--instance-count", "2", "--grace-seconds", "30", "--json"]
#: Errors that only say a peer or torchrun went away: not a clear failure on their own.
UNCLEAR = ("ChildFailedError", "RendezvousClosedError", "RendezvousConnectionError", "RendezvousTimeoutError",
           "DistNetworkError", "DistStoreError", "SignalException", "exit code")
STALL_SLACK_S = 30.0


@dataclass(frozen=True)
class Scenario:
    name: str
    script: str
    source: Path
    flags: tuple[str, ...]
    steps: int
    """What its progress shows at the end (sm_dist's step lines, or its tqdm bar's count)."""


SCENARIOS = {
    # the README job: sm_dist's own entrypoint, 2 hosts x 2 processes
    "cnn": Scenario("cnn", "cnn.py", REPO / "entrypoints",
                    ("--nproc-per-node", "2", "--hp", "steps=24", "--checkpoint-interval-steps", "4"), 24),
    # Hugging Face Trainer, both hosts saving each checkpoint (one key, two writers), old ones deleted
    # (save_total_limit=2 in the script)
    "hf_each_node": Scenario("hf_each_node", "hf_trainer.py", BYO,
                             ("--", "--max_steps", "120", "--save_steps", "10", "--save_on_each_node"), 120),
    # pytorch/examples-style DDP with a rank-0 snapshot in /opt/ml/checkpoints
    "ddp_snapshot": Scenario("ddp_snapshot", "ddp_snapshot.py", BYO,
                             ("--", "--total-epochs", "20", "--epoch-sleep", "0.5"), 20),
}
BANDS = {"start-up": (0.0, 0.15), "middle": (0.3, 0.7), "last 10%": (0.9, 1.0)}
#: The band drawn on the script's progress (`KIND:N`, the Nth step or bar count), the others on the clock.
LATE = "last 10%"
FAULTS = ("kill", "sigterm", "sigterm+kill")


@dataclass
class Result:
    scenario: str
    chaos: list[str]
    band: str
    fired: bool
    status: str
    wall_s: float
    work_s: float
    verdict: str  # identical | clear failure | silent difference | unclear failure | not fired
    error: str | None = None
    detail: str = ""
    restarts: dict[str, int] = field(default_factory=dict)

    @property
    def stall(self) -> bool:
        faults = len(self.chaos) if self.fired else 0
        return self.wall_s > self.work_s * (1 + faults) + STALL_SLACK_S


def fit(scenario: Scenario, root: Path, chaos: list[str]) -> tuple[dict, float]:
    """One `sm-dist fit --local --json` run; (its summary, wall seconds)."""
    flags = list(scenario.flags)
    split = flags.index("--") if "--" in flags else len(flags)
    argv = [sys.executable, "-m", "sm_dist.cli", "fit", scenario.script, "--source-dir", str(scenario.source),
            *COMMON, "--local-root", str(root), *flags[:split]]
    for spec in chaos:
        argv += ["--chaos", spec]
    argv += flags[split:]
    started = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, cwd=root.parent, check=False)
    wall = time.monotonic() - started
    try:
        return json.loads(out.stdout), wall
    except ValueError:
        return {"status": "NoSummary", "error": (out.stderr.strip().splitlines() or ["no output"])[-1]}, wall


def same_model(run: dict, run_root: Path, reference: dict, ref_root: Path) -> tuple[bool | None, str]:
    """Whether the run's final model equals the reference's (None: nothing to compare)."""
    if run.get("model_sha256") and reference.get("model_sha256"):
        return run["model_sha256"] == reference["model_sha256"], "model sha256"
    details = []
    compared = False
    for host in ("algo-1", "algo-2"):
        a, b = run_root / "run" / "hosts" / host / "model", ref_root / "run" / "hosts" / host / "model"
        if not a.is_dir() and not b.is_dir():
            continue
        out = subprocess.run([sys.executable, "-m", "sm_dist.tools.weights_compare", str(a), str(b)],
                             capture_output=True, text=True, check=False)
        try:
            answer = json.loads(out.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return None, f"{host}: the comparison failed"
        same_names = a.is_dir() and b.is_dir() and sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
        if answer["result"] == "differs" or (answer["result"] != "identical" and not same_names):
            return False, f"{host}: {answer['detail']}"
        # "cannot compare" with the same file names: no weights in this host's folder in either run
        # (Trainer's rank 0 alone saves the model; algo-2 keeps training_args.bin), the other hosts decide
        details.append(f"{host}: {answer['detail']}")
        compared = compared or answer["result"] == "identical"
    return (True if compared else None), "; ".join(details) or "no model folder"


def classify(summary: dict, fired: bool, same: bool | None) -> str:
    if not fired:
        return "not fired"
    if summary.get("status") == "Completed":
        return "identical" if same else "silent difference"
    error = summary.get("error") or ""
    return "clear failure" if error and not error.startswith(UNCLEAR) else "unclear failure"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--bands", default=",".join(BANDS), help=f"moments to draw from: {', '.join(BANDS)}")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    root = args.root or Path(tempfile.mkdtemp(prefix="sm-dist-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    chosen = [SCENARIOS[name] for name in args.scenarios.split(",")]
    bands = [band for band in args.bands.split(",") if band]
    unknown = [band for band in bands if band not in BANDS]
    if unknown or not bands:
        parser.error(f"--bands {args.bands!r}: choose from {', '.join(BANDS)}")
    references: dict[str, tuple[dict, float, float, Path]] = {}
    for scenario in chosen:
        ref_root = root / f"{scenario.name}-reference"
        summary, wall = fit(scenario, ref_root, [])
        again, wall_again = fit(scenario, root / f"{scenario.name}-reference-2", [])
        print(f"reference {scenario.name}: {summary.get('status')} in {wall:.0f} s, again {again.get('status')} in "
              f"{wall_again:.0f} s", flush=True)
        if summary.get("status") != "Completed" or again.get("status") != "Completed":
            raise SystemExit(f"a reference run of {scenario.name} did not complete: "
                             f"{summary.get('error') or again.get('error')}")
        same, detail = same_model(again, root / f"{scenario.name}-reference-2", summary, ref_root)
        if not same:  # a difference after a fault would prove nothing
            raise SystemExit(f"two uninterrupted runs of {scenario.name} differ ({detail}): not reproducible")
        # the shorter of the two: a moment in "the last 10%" of a run slowed by a busy machine would
        # come after the end of most runs (the fault never fires)
        # the moments are drawn on the job's own clock (the chaos driver's: from the hosts' start, no CLI
        # start-up), the stall bound on the command's
        job_s = min(float(summary.get("wall_seconds") or wall), float(again.get("wall_seconds") or wall_again))
        references[scenario.name] = (summary, min(wall, wall_again), job_s, ref_root)
    results: list[Result] = []
    for index in range(args.runs):
        scenario = chosen[index % len(chosen)]
        reference, work, job_s, ref_root = references[scenario.name]
        band = rng.choice(bands)
        low, high = BANDS[band]
        fault = rng.choice(FAULTS)
        if band == LATE:  # on the script's own progress: a moment in seconds would mostly come after the end
            step = rng.randint(math.ceil(scenario.steps * low), scenario.steps)
            chaos = ["sigterm:" + str(step), "kill:" + str(step)] if fault == "sigterm+kill" else [f"{fault}:{step}"]
        else:
            at = round(job_s * rng.uniform(low, high), 1)
            chaos = ([f"sigterm:{at}s", f"kill:{round(at + job_s * 0.2, 1)}s"] if fault == "sigterm+kill"
                     else [f"{fault}:{at}s"])
        run_root = root / f"run-{index:03d}-{scenario.name}"
        summary, wall = fit(scenario, run_root, chaos)
        fired = not summary.get("chaos_missed") and summary.get("status") != "NoSummary"
        same, detail = (same_model(summary, run_root, reference, ref_root) if summary.get("status") == "Completed"
                        else (None, ""))
        result = Result(scenario.name, chaos, band, fired, summary.get("status", "?"), round(wall, 1), round(work, 1),
                        classify(summary, fired, same), summary.get("error"), detail,
                        {"in_job": summary.get("in_job_restarts", 0), "job": summary.get("job_restarts", 0)})
        results.append(result)
        print(f"[{index + 1}/{args.runs}] {scenario.name} {' '.join(chaos)} ({band}): {result.verdict}, "
              f"{result.status} in {result.wall_s:.0f} s (work {work:.0f} s){' STALL' if result.stall else ''}"
              f"{f' — {result.error}' if result.error else ''}", flush=True)
    fired = [r for r in results if r.fired]
    tally = {
        "runs": len(results), "fired": len(fired),
        "ended identical": sum(r.verdict == "identical" for r in fired),
        "ended as clear failure": sum(r.verdict == "clear failure" for r in fired),
        "unclear failures": sum(r.verdict == "unclear failure" for r in fired),
        "stalls > 30 s beyond the work": sum(r.stall for r in fired),
        "silent differences": sum(r.verdict == "silent difference" for r in fired),
        "not fired (the job ended first)": len(results) - len(fired),
    }
    print("\ntally: " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    for r in fired:
        if r.verdict != "identical":
            print(f"  {r.scenario} {' '.join(r.chaos)}: {r.verdict}: {r.error or r.detail}")
    print(json.dumps({"tally": tally, "root": str(root), "results": [asdict(r) | {"stall": r.stall} for r in results]}))


if __name__ == "__main__":
    main()
