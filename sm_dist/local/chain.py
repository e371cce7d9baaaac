"""A run as a chain of local jobs: each link a local job on the run's checkpoint URI, the next
decided by `sm_dist.contract.chain.decide`, the same decision the cloud supervisor takes.

`run_chain` starts link 1 (`<run>-1`), reads how it ended as DescribeTrainingJob would say it
(Completed; Stopped / MaxRuntimeExceeded; Failed with its error), and follows the decision: the
next link at once, after a wait when it got no capacity (chaos `capacity:TRIES` refuses the
link after the first that many times, as a CapacityError job would; local waits are short), or
the end of the run. It knows nothing of how a link runs: `sm_dist.local.api` hands it a function
that runs one (the hosts, the sync on the run's URI, the remaining chaos).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sm_dist.contract.chain import Action, ChainPolicy, Decision, Ending, LinkOutcome, RunState, decide, link_name
from sm_dist.contract.faults import Fault

if TYPE_CHECKING:
    from sm_dist.local.run_records import RunRecord

_log = logging.getLogger(__name__)
#: Local mode waits seconds for capacity where the cloud waits minutes (contract.chain's backoff).
LOCAL_BACKOFF_S = 1.0
LOCAL_BACKOFF_MAX_S = 8.0
#: What a job that got no instances reports (docs/PLATFORM.md §1.12), as chaos `capacity` plays it.
CAPACITY_REASON = ("CapacityError: Unable to provision requested ML compute capacity. Please retry using a "
                   "different ML instance type.")

#: Runs one link: (its name, its number, its MaxRuntime in seconds, the chaos left) -> its record.
StartLink = Callable[[str, int, float, tuple[Fault, ...]], "RunRecord"]


@dataclass(frozen=True)
class LinkRecord:
    """One link of a local run: how it ended, what the run did next, and its run (None: refused)."""

    name: str
    outcome: LinkOutcome
    decision: Decision
    record: RunRecord | None = None
    on_demand: bool = False

    def line(self) -> str:
        """The link in one line: its end, its steps and what came next."""
        if self.record is None:
            return f"{self.name}: no capacity (CapacityError) -> {self._next()}"
        progress, out = self.record.progress, self.record.outcome
        steps = "" if progress.steps is None else f", steps to {progress.steps}"
        resumed = f", resumed from step {progress.resumed_from[0]}" if progress.resumed_from else ""
        how = {"Completed": "completed", "Failed": "failed"}.get(out.status, out.status)
        # what the stop did: the checkpoint only when one reached the URI (None: the URI could not be listed)
        did = {True: "SIGTERM, checkpoint, exit", False: "SIGTERM, exit: no checkpoint written",
               None: "SIGTERM, exit"}[self.record.checkpoint_written]
        if self.outcome.ending is Ending.MAX_WAIT:
            how = f"stopped by its MaxWait (spot; {did})"
        elif out.status != "Completed" and out.stopped_reason == "MaxRuntimeExceeded":
            how = f"stopped by its MaxRuntime ({did})"
        spot = " (on demand)" if self.on_demand else ""
        restarts, chaos = "", [f for f in self.record.fired if not f.startswith("max-wait")]
        if self.record.in_job_restarts:  # inside this link (a kill, a hang): torchrun resumed it within the link
            restarts = f", {self.record.in_job_restarts} in-job restart(s)"
        if out.job_restarts:
            restarts += f", {out.job_restarts} spot interruption(s)"
        if restarts and chaos:
            restarts += f" (chaos {', '.join(chaos)})"
        return (f"{self.name}{spot}: {how} after {self.record.seconds:.0f} s{restarts}{resumed}{steps} -> "
                f"{self._next()}")

    def _next(self) -> str:
        decision = self.decision
        if decision.action is Action.RETRY:
            return f"wait {decision.wait_s:g} s, then {decision.next_name}"
        if decision.action is Action.NEXT:
            return f"{decision.next_name}"
        if decision.action is Action.DONE:
            return "done"
        return f"run ends: {decision.reason}"


def outcome_of(name: str, record: RunRecord) -> LinkOutcome:
    """A local link's end in DescribeTrainingJob's words (billed time: its wall-clock time)."""
    out = record.outcome
    secondary = out.status if out.status == "Completed" else out.stopped_reason or out.status
    reason = ""
    if out.status == "Failed":
        reason = "AlgorithmError: " + (out.error or "; ".join(t.strip() for t in out.failures.values()) or "failed")
    return LinkOutcome(name, out.status, secondary, reason, interruptions=out.job_restarts, billable_s=record.seconds,
                       wrote_checkpoint=record.checkpoint_written)


def _by_max_wait(outcome: LinkOutcome, record: RunRecord, spec: str) -> LinkOutcome:
    """chaos max-wait: a spot link stopped at its time limit reads as SageMaker's MaxWait stop
    (Stopped / MaxWaitTimeExceeded, docs/PLATFORM.md §1.12): its spot waits and run time reached MaxWait."""
    record.fired.append(spec)
    record.events.append(f"{spec}: {outcome.name} ends by its MaxWait (Stopped / MaxWaitTimeExceeded)")
    return replace(outcome, secondary="MaxWaitTimeExceeded")


def local_policy(policy: ChainPolicy) -> ChainPolicy:
    """The run's policy with local mode's short capacity waits."""
    return replace(policy, backoff_s=LOCAL_BACKOFF_S, backoff_max_s=LOCAL_BACKOFF_MAX_S)


def run_chain(run: str, policy: ChainPolicy, start: StartLink, faults: Sequence[Fault],
              sleep: Callable[[float], None] = time.sleep) -> list[LinkRecord]:
    """Run the links of `run` until the decision ends it; the links in order."""
    capacity = next((f for f in faults if f.kind == "capacity"), None)
    refusals = capacity.step if capacity is not None else 0
    max_wait = next((f for f in faults if f.kind == "max-wait"), None)
    left = tuple(f for f in faults if f.kind not in ("capacity", "max-wait"))
    links: list[LinkRecord] = []
    state, number, runtime = RunState(), 1, policy.link_runtime(0)
    while True:
        name = link_name(run, number)
        record = None
        if number > 1 and refusals > 0:  # chaos capacity: the link after the first gets no instances
            refusals -= 1
            outcome = LinkOutcome(name, "Failed", "Failed", CAPACITY_REASON)
        else:
            record = start(name, number, runtime, left)
            outcome = outcome_of(name, record)
            left = tuple(f for f in left if str(f) not in record.fired)  # each fault fires once per run
            if max_wait is not None and state.links + 1 == max_wait.step and outcome.ending is Ending.MAX_RUNTIME:
                outcome, max_wait = _by_max_wait(outcome, record, str(max_wait)), None
        decision = decide(run, outcome, state, policy)
        links.append(LinkRecord(name, outcome, decision, record, on_demand=state.on_demand))
        _log.warning("chain %s: %s", run, decision.reason)
        if decision.action not in (Action.NEXT, Action.RETRY) or decision.next_name is None:
            return links
        sleep(decision.wait_s)
        state, runtime = decision.state, decision.max_runtime_s or policy.link_runtime(decision.state.spent_usd)
        number = state.jobs + 1


__all__ = ["CAPACITY_REASON", "LinkRecord", "StartLink", "local_policy", "outcome_of", "run_chain"]
