"""A Slurm job's attempts as the links of a chain: after each attempt, the cloud chain's decision (stdlib only).

A run longer than its partition's time limit goes on the way a SageMaker run past 28 days does: as a
chain of links, each resuming from the newest committed checkpoint, the next one decided by
`sm_dist.contract.chain.decide`, the function the chain stack's Lambda and local mode's chain call.
On Slurm a link is one attempt of the same job (one job id; `SLURM_RESTART_COUNT` counts them): the
batch script (`sm_dist.slurm.script`) runs, once srun has ended,

    python3 -m sm_dist.container.slurm_chain JOB_DIR EXIT_CODE SECONDS

and requeues the job (`scontrol requeue`) only when this exits 0. The attempt's facts, as
DescribeTrainingJob would give them: exit 0 is Completed; `sm_dist.jobspec.EXIT_INTERRUPTED` (the
ranks committed a checkpoint at `--signal`'s SIGTERM, ahead of the time limit) is Stopped /
MaxRuntimeExceeded; anything else Failed, with the first node's failure file as its reason. Progress is
the newest committed step in the shared checkpoint folder now against the one before the attempt (an
s3:// checkpoint URI: not known here, as the cloud supervisor says when it cannot list). The run's
policy (max links, each link's run time, the budget and the price it is counted at) was written at
submission (`contract.slurm_layout.CHAIN_POLICY_FILE`); the run's state is the last decision's
(`CHAIN_FILE`, one JSON line per link, which `SlurmJob.status` reads back). Attempts Slurm requeued by
itself (a node failure, a preemption: the batch script did not get to its end) count as links too.

A requeued attempt starts with the job's `--time`, which may be more than the budget has left (a link's
MaxRuntime in the cloud is what the budget buys, `ChainPolicy.link_runtime`). So the batch script first runs

    python3 -m sm_dist.container.slurm_chain --limit JOB_DIR

which prints the minutes the budget has left for this attempt when they are fewer than the job's `--time`,
and the script shortens the job's own TimeLimit to them (`scontrol update JobId=... TimeLimit=M`: a job's
owner may decrease it, only an administrator increase it; `--signal` is counted from the new end;
docs/PLATFORM.md §12). At an attempt's start little of the limit has passed, so the new limit never ends
the attempt on the spot, as it would after srun, near the old limit.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from sm_dist.contract.chain import Action, ChainPolicy, Decision, LinkOutcome, RunState, decide, link_name
from sm_dist.contract.slurm_layout import (
    CHAIN_FILE,
    first_failure,
    newest_committed_step,
    read_links,
    read_policy_record,
)
from sm_dist.jobspec import EXIT_INTERRUPTED


def _failure(job_dir: Path, code: int) -> str:
    found = first_failure(job_dir)
    return f"{found[0]}: {found[1].splitlines()[0]}" if found else f"a node's task exited with code {code}"


def outcome_of(job_dir: Path, name: str, code: int, seconds: float, wrote: bool | None) -> LinkOutcome:
    """The attempt as a chain link's outcome (DescribeTrainingJob's words)."""
    if code == 0:
        return LinkOutcome(name=name, status="Completed", secondary="Completed", billable_s=seconds)
    if code == EXIT_INTERRUPTED:
        return LinkOutcome(name=name, status="Stopped", secondary="MaxRuntimeExceeded", billable_s=seconds,
                           wrote_checkpoint=wrote)
    return LinkOutcome(name=name, status="Failed", secondary="Failed", failure_reason=_failure(job_dir, code),
                       billable_s=seconds)


def after_attempt(job_dir: Path, code: int, seconds: float, env: Mapping[str, str]) -> Decision:
    """Decide what follows the attempt that ended with `code` after `seconds`, and append it to CHAIN_FILE."""
    config = read_policy_record(job_dir)
    run, policy = str(config["run"]), ChainPolicy.from_tag(str(config["policy"]))
    links = read_links(job_dir)
    restarts = int(env.get("SLURM_RESTART_COUNT") or 0)
    before = RunState.from_tag(links[-1]["state"]) if links else RunState()
    # attempts Slurm requeued by itself left no decision: they ran, so they count
    before = replace(before, links=max(before.links, restarts), jobs=max(before.jobs, restarts))
    step_before = links[-1]["step"] if links else config.get("start_step")
    step = newest_committed_step(config.get("checkpoint_uri"))
    wrote = None if step is None and str(config.get("checkpoint_uri") or "").startswith("s3://") else (
        step is not None and (step_before is None or step > step_before))
    outcome = outcome_of(job_dir, link_name(run, before.jobs + 1), code, seconds, wrote)
    decision = decide(run, outcome, before, policy)
    record = {"link": decision.state.links, "attempt": restarts, "exit_code": code, "seconds": round(seconds, 1),
              "step_before": step_before, "step": step, "action": decision.action.value, "reason": decision.reason,
              "state": decision.state.to_tag(), "max_links": policy.max_links}
    with (job_dir / CHAIN_FILE).open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
    return decision


def limit_minutes(job_dir: Path) -> int | None:
    """The minutes the budget has left for the attempt starting now, when fewer than the job's `--time` (Slurm's
    unit, rounded up as `--time` was); None at the first attempt, without a budget, or when the limit stands."""
    links = read_links(job_dir)
    if not links:
        return None
    config = read_policy_record(job_dir)
    policy = ChainPolicy.from_tag(str(config["policy"]))
    runtime = policy.link_runtime(RunState.from_tag(links[-1]["state"]).spent_usd)
    minutes = math.ceil(runtime / 60)
    return minutes if 0 < minutes < math.ceil(policy.link_runtime_s / 60) else None


def main(argv: list[str] | None = None) -> int:
    """0: requeue the job (the next link); 1: the run ends here; 2: bad arguments or an unreadable job folder
    (the run ends: never requeue on a doubt). With `--limit JOB_DIR`: 0 and the minutes on stdout when the
    attempt's time limit should be shortened to them, else 1."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--limit"] and len(args) == 2:
        try:
            minutes = limit_minutes(Path(args[1]))
        except (OSError, ValueError, KeyError) as exc:
            print(f"[sm_dist] chain: cannot read the budget ({exc}); the job's time limit stands", file=sys.stderr)
            return 1
        if minutes is None:
            return 1
        print(minutes)
        return 0
    try:
        job_dir, code, seconds = Path(args[0]), int(args[1]), float(args[2])
    except (IndexError, ValueError):
        print("usage: python3 -m sm_dist.container.slurm_chain JOB_DIR EXIT_CODE SECONDS", file=sys.stderr)
        return 2
    try:
        decision = after_attempt(job_dir, code, seconds, os.environ)
    except (OSError, ValueError, KeyError) as exc:
        print(f"[sm_dist] chain: cannot decide ({exc}); the job is not requeued", flush=True)
        return 2
    print(f"[sm_dist] chain: {decision.reason}", flush=True)
    return 0 if decision.action is Action.NEXT else 1


if __name__ == "__main__":
    sys.exit(main())
