"""A run as a chain of jobs: how one link (a training job) ended, and what the run does next.

A *run* is a chain of ordinary SageMaker training jobs, its *links*, named `<run>-1`, `<run>-2`, ...
and sharing one checkpoint URI, each resuming from the newest committed checkpoint. `decide()` is
the one decision both supervisors take: local mode's rehearsal (`sm_dist.local.chain`) and the cloud's
(the chain stack's Lambda, `sm_dist.cloud.supervisor`, whose code is this file inlined). So this
module imports the standard library only, not even the rest of sm_dist, and raises ValueError
(callers turn it into their own errors). The statuses, secondary statuses and failure reasons it
reads are DescribeTrainingJob's (docs/PLATFORM.md §1.12).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

#: Tags every link carries: the run's name, the link's number, the chain's policy and the run's
#: state before this link (counters the next link's supervisor continues from); the supervisor adds
#: its decision to a link that ended.
TAG_RUN, TAG_LINK, TAG_POLICY, TAG_STATE, TAG_DECISION = (
    "sm-dist:run", "sm-dist:link", "sm-dist:chain", "sm-dist:chain-state", "sm-dist:chain-decision")
#: The job's checkpoint URI (every sm_dist job's, a link's always): where the supervisor looks for progress
#: when the request has no CheckpointConfig (the runtime writes S3 itself).
TAG_CHECKPOINT = "sm-dist:checkpoint-uri"
#: TensorBoardOutputConfig.LocalPath's default, which DescribeTrainingJob may echo and a link's request never
#: sends (docs/PLATFORM.md §1.14, §1.17). It is `sm_dist.contract.container.TENSORBOARD_LOCAL_PATH`, spelled
#: here because the chain stack's Lambda carries this module and the supervisor only; a test keeps them equal.
TENSORBOARD_DEFAULT_PATH = "/opt/ml/output/tensorboard"
#: TrainingJobName's longest form (docs/PLATFORM.md §1.5).
JOB_NAME_MAX = 63
_RUN_NAME_RE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*")
#: Links of a run when max_links is not given: a safety stop, not a plan (10 × 28 days).
DEFAULT_MAX_LINKS = 10
#: The API's longest MaxRuntimeInSeconds, 28 days (docs/PLATFORM.md §1.5; planning.budget's too).
MAX_LINK_RUNTIME_S = 28 * 86_400
#: Billed after a link's MaxRuntime: SageMaker's 120 s stop grace and 60 s for the upload
#: (planning.budget's STOP_GRACE_S + UPLOAD_ALLOWANCE_S), and the shortest link worth starting.
LINK_OVERHEAD_S = 180
MIN_LINK_RUNTIME_S = 60
#: Capacity waits: the n-th failure in a row waits backoff_s × 2**(n-1), at most backoff_max_s.
DEFAULT_CAPACITY_RETRIES = 6
DEFAULT_BACKOFF_S = 60.0
DEFAULT_BACKOFF_MAX_S = 600.0
#: What a FailureReason or a CreateTrainingJob error code says when the platform had no instances
#: for the link (docs/PLATFORM.md §1.12): the run waits and tries again.
CAPACITY_MARKERS = ("CapacityError", "InsufficientCapacityError", "InsufficientInstanceCapacity",
                    "ResourceLimitExceeded", "ThrottlingException")
#: A failure of the platform, not of the script: the next link starts at once.
PLATFORM_MARKERS = ("InternalServerError",)


class Ending(str, enum.Enum):
    """How a link ended, from DescribeTrainingJob's words."""

    RUNNING = "running"          # InProgress or Stopping: nothing to decide yet
    COMPLETED = "completed"
    MAX_RUNTIME = "max-runtime"  # Stopped / MaxRuntimeExceeded
    MAX_WAIT = "max-wait"        # Stopped / MaxWaitTimeExceeded (spot)
    CAPACITY = "capacity"        # Failed for want of instances (or refused by CreateTrainingJob)
    PLATFORM = "platform"        # Failed / InternalServerError
    STOPPED = "stopped"          # Stopped by StopTrainingJob: someone ended the run
    FAILED = "failed"            # Failed in the user's code or setup


class Action(str, enum.Enum):
    """What the run does after a link."""

    NONE = "none"    # the link has not ended
    NEXT = "next"    # start the next link now
    RETRY = "retry"  # wait `wait_s`, then start the next link (capacity)
    DONE = "done"    # the run completed
    STOP = "stop"    # the run ends without completing (`reason` says why)


def classify(status: str, secondary: str = "", failure_reason: str = "") -> Ending:
    """The `Ending` of TrainingJobStatus / SecondaryStatus / FailureReason (docs/PLATFORM.md §1.12)."""
    if status == "Completed":
        return Ending.COMPLETED
    if status == "Stopped":
        return {"MaxRuntimeExceeded": Ending.MAX_RUNTIME, "MaxWaitTimeExceeded": Ending.MAX_WAIT}.get(
            secondary, Ending.STOPPED)
    if status == "Failed":
        if failure_reason.startswith(CAPACITY_MARKERS):
            return Ending.CAPACITY
        if failure_reason.startswith(PLATFORM_MARKERS):
            return Ending.PLATFORM
        return Ending.FAILED
    return Ending.RUNNING


@dataclass(frozen=True)
class LinkOutcome:
    """One link's end: DescribeTrainingJob's status fields, its spot interruptions and billed seconds."""

    name: str
    status: str
    secondary: str = ""
    failure_reason: str = ""
    interruptions: int = 0
    """Spot interruptions during the link (SecondaryStatusTransitions entries `Interrupted`)."""
    billable_s: float = 0.0
    """Seconds billed per instance (BillableTimeInSeconds; local mode: the wall-clock time)."""
    instance_type: str = ""
    """ResourceConfig's SelectedInstanceType (InstancePreferences chose it) or InstanceType."""
    types_tried: int = 1
    """Instance types the link asked for at once (its InstancePreferences): a capacity failure means
    SageMaker found none of them."""
    wrote_checkpoint: bool | None = None
    """Whether anything reached the link's checkpoint URI (CheckpointConfig.S3Uri, else its TAG_CHECKPOINT)
    while it trained (the supervisor lists it after a MaxRuntime stop); None: not known (no URI, or the
    listing was refused)."""

    @property
    def ending(self) -> Ending:
        return classify(self.status, self.secondary, self.failure_reason)

    @classmethod
    def from_description(cls, desc: Mapping[str, Any]) -> LinkOutcome:
        """From a DescribeTrainingJob response or an EventBridge state-change event's `detail`."""
        transitions = desc.get("SecondaryStatusTransitions") or []
        billable = desc.get("BillableTimeInSeconds")
        if billable is None:  # not yet billed, or not reported (moto): the training time, else 0
            billable = desc.get("TrainingTimeInSeconds") or 0
        resources = desc.get("ResourceConfig") or {}
        return cls(name=str(desc.get("TrainingJobName", "")), status=str(desc.get("TrainingJobStatus", "")),
                   secondary=str(desc.get("SecondaryStatus") or ""), failure_reason=str(desc.get("FailureReason") or ""),
                   interruptions=sum(1 for t in transitions if t.get("Status") == "Interrupted"),
                   billable_s=float(billable),
                   instance_type=str(resources.get("SelectedInstanceType") or resources.get("InstanceType") or ""),
                   types_tried=len(resources.get("InstancePreferences") or ()) or 1)

    @classmethod
    def not_created(cls, name: str, code: str, message: str) -> LinkOutcome:
        """CreateTrainingJob refused the link (e.g. ResourceLimitExceeded): a Failed link in all but name."""
        return cls(name=name, status="Failed", secondary="Failed", failure_reason=f"{code}: {message}")


def _to_text(record: Any, brief: bool = False) -> str:
    """`key=value` pairs separated by spaces: what a tag value may hold (docs/PLATFORM.md §1.5);
    `brief`: without the fields at their defaults (what from_text gives anyway; a tag holds 256 characters)."""
    out = []
    for f in fields(record):
        value = getattr(record, f.name)
        if value is not None and not (brief and value == f.default):
            out.append(f"{f.name.replace('_', '-')}={int(value) if isinstance(value, bool) else value}")
    return " ".join(out)


def _from_text(cls: type, text: str) -> Any:
    kinds = {f.name: f.type for f in fields(cls)}
    values: dict[str, Any] = {}
    for pair in text.split():
        key, _, raw = pair.partition("=")
        name = key.replace("-", "_")
        if name not in kinds:
            raise ValueError(f"{cls.__name__}: unknown field {key!r} in {text!r}")
        kind = str(kinds[name])
        values[name] = (bool(int(raw)) if kind == "bool" else int(raw) if kind.startswith("int")
                        else float(raw) if "float" in kind else raw)
    return cls(**values)


@dataclass(frozen=True)
class ChainPolicy:
    """What the user asked of the run (the `sm-dist:chain` tag)."""

    max_links: int = DEFAULT_MAX_LINKS
    """Links that ran (capacity refusals aside) after which the run stops."""
    link_runtime_s: int = MAX_LINK_RUNTIME_S
    """Each link's MaxRuntime when the budget allows it (max_runtime_s, else 28 days)."""
    budget_usd: float | None = None
    """The run's max_cost_usd, over all links."""
    usd_per_hour: float | None = None
    """On-demand price of all the link's instances (what a billed second costs at most)."""
    on_demand_after: int | None = None
    """Spot interruptions (summed over the run) after which links run on demand; a MaxWait too."""
    capacity_retries: int = DEFAULT_CAPACITY_RETRIES
    backoff_s: float = DEFAULT_BACKOFF_S
    backoff_max_s: float = DEFAULT_BACKOFF_MAX_S
    types: str | None = None
    """With fallback instance types: every type the run may use, in order, `/`-separated, each
    fallback with the $/h of the link's instances of it: `ml.p5.48xlarge/ml.p4d.24xlarge@132`."""

    def to_tag(self) -> str:
        return _to_text(self, brief=True) or f"max-links={self.max_links}"  # a tag value the SDK keeps

    def instance_types(self) -> tuple[str, ...]:
        """The types a link may use, the first the plan's own; () without fallbacks."""
        return tuple(item.partition("@")[0] for item in (self.types or "").split("/") if item)

    def price(self, instance_type: str) -> float | None:
        """$/h of a link's instances of `instance_type` (the plan's own type: usd_per_hour)."""
        for item in (self.types or "").split("/")[1:]:
            name, _, usd = item.partition("@")
            if name == instance_type:
                return float(usd) if usd else None
        return self.usd_per_hour

    @classmethod
    def from_tag(cls, text: str) -> ChainPolicy:
        policy: ChainPolicy = _from_text(cls, text)
        return policy

    def link_runtime(self, spent_usd: float) -> int:
        """MaxRuntime of the next link: `link_runtime_s`, or less when that is what is left of the
        budget buys; 0 when the budget buys less than a minute (the run stops)."""
        runtime = min(self.link_runtime_s, MAX_LINK_RUNTIME_S)
        if self.budget_usd is not None and self.usd_per_hour:
            from_budget = int((self.budget_usd - spent_usd) * 3600 / self.usd_per_hour) - LINK_OVERHEAD_S
            if from_budget < MIN_LINK_RUNTIME_S:
                return 0
            runtime = min(runtime, from_budget)
        return runtime


@dataclass(frozen=True)
class RunState:
    """Where the run stands after a number of links (the `sm-dist:chain-state` tag of the next one)."""

    links: int = 0
    """Links that ran (a link refused capacity does not count)."""
    jobs: int = 0
    """Training jobs created, refused ones too: the next link is `<run>-<jobs + 1>`."""
    capacity_failures: int = 0
    """Capacity refusals in a row."""
    interruptions: int = 0
    spent_usd: float = 0.0
    """Billed so far at on-demand prices (an upper bound for spot)."""
    on_demand: bool = False
    """Links run on demand from now on (after `on_demand_after` interruptions or a MaxWait)."""
    type_index: int = 0
    """The next link's instance type in `ChainPolicy.instance_types()` (capacity moves it on)."""

    def to_tag(self) -> str:
        return _to_text(replace(self, spent_usd=round(self.spent_usd, 4)))

    @classmethod
    def from_tag(cls, text: str) -> RunState:
        state: RunState = _from_text(cls, text)
        return state


@dataclass(frozen=True)
class Decision:
    """What to do after a link, and why (one line)."""

    action: Action
    reason: str
    state: RunState
    """The run after this link: what the next link carries."""
    next_name: str | None = None
    wait_s: float = 0.0
    max_runtime_s: int | None = None
    on_demand: bool = False
    """The next link runs on demand (EnableManagedSpotTraining off, no MaxWait)."""
    instance_type: str | None = None
    """The next link's instance type when the run has fallback types (else the ended job's)."""


def link_name(run: str, number: int) -> str:
    """`<run>-<number>`: the link's TrainingJobName."""
    return f"{run}-{number}"


def check_run_name(run: str, max_links: int) -> str:
    """`run` when `<run>-<max_links>` is a TrainingJobName the API accepts, else ValueError."""
    if not _RUN_NAME_RE.fullmatch(run) or len(link_name(run, max_links)) > JOB_NAME_MAX:
        room = JOB_NAME_MAX - len(f"-{max_links}")
        raise ValueError(f"a run's links are named {run}-1 ... {run}-{max_links}: use 1-{room} letters, digits and "
                         "hyphens for the run's name")
    return run


def _continue(run: str, outcome: LinkOutcome, state: RunState, policy: ChainPolicy, why: str) -> Decision:
    if state.links >= policy.max_links:
        return Decision(Action.STOP, f"{why}; the run stops: max_links={policy.max_links} links ran", state)
    runtime = policy.link_runtime(state.spent_usd)
    if not runtime:
        return Decision(Action.STOP, f"{why}; the run stops: the ${policy.budget_usd or 0:g} budget is spent "
                        f"(${state.spent_usd:.2f} billed)", state)
    if policy.on_demand_after is not None and not state.on_demand and (
            state.interruptions >= policy.on_demand_after or outcome.ending is Ending.MAX_WAIT):
        state = replace(state, on_demand=True)
        why += f"; {state.interruptions} spot interruption(s) so far: the run goes on on demand"
    nxt = link_name(run, state.jobs + 1)
    return Decision(Action.NEXT, f"{why}; next: {nxt}", state, nxt, max_runtime_s=runtime, on_demand=state.on_demand,
                    instance_type=_type(policy, state))


def _type(policy: ChainPolicy, state: RunState) -> str | None:
    types = policy.instance_types()
    return types[state.type_index % len(types)] if types else None


def _no_capacity(run: str, outcome: LinkOutcome, state: RunState, policy: ChainPolicy) -> Decision:
    """A capacity refusal: the next fallback type at once, or, after every type was refused in turn,
    the first type again after a doubling wait; `capacity_retries` such rounds in a row end the run.
    A link that asked for every type at once (InstancePreferences) was a whole round by itself."""
    types = max(1, len(policy.instance_types()))
    tried = max(1, min(outcome.types_tried, types))
    state = replace(state, capacity_failures=state.capacity_failures + tried,
                    type_index=(state.type_index + tried) % types)
    rounds, within = divmod(state.capacity_failures, types)
    if rounds > policy.capacity_retries:
        return Decision(Action.STOP, f"{_why(outcome)}; the run stops: no capacity after "
                        f"{state.capacity_failures} tries", state)
    wait = 0.0 if within else capacity_wait(policy, rounds)
    nxt, kind = link_name(run, state.jobs + 1), _type(policy, state)
    on = f" on {kind}" if kind else ""
    reason = f"{_why(outcome)}; next: {nxt}{on} at once" if within else f"{_why(outcome)}; waiting {wait:g} s, then {nxt}{on}"
    return Decision(Action.RETRY, reason, state, nxt, wait_s=wait, max_runtime_s=policy.link_runtime(state.spent_usd)
                    or None, on_demand=state.on_demand, instance_type=kind)


def _why(outcome: LinkOutcome) -> str:
    reason = (outcome.failure_reason.splitlines() or [""])[0][:200]
    return {Ending.MAX_RUNTIME: f"{outcome.name} reached its MaxRuntime",
            Ending.MAX_WAIT: f"{outcome.name} reached its MaxWait (spot)",
            Ending.PLATFORM: f"{outcome.name} failed on the platform side ({reason})",
            Ending.CAPACITY: f"{outcome.name} got no capacity ({reason})"}.get(outcome.ending, outcome.name)


def decide(run: str, outcome: LinkOutcome, before: RunState, policy: ChainPolicy) -> Decision:
    """What the run does after `outcome`, given the run's state `before` the link and its policy.

    Completed ends the run; MaxRuntime, MaxWait and an InternalServerError start the next link
    (within max_links and the budget), but a MaxRuntime stop that wrote no checkpoint ends it (each
    link would repeat it until max_links or the budget); a capacity failure waits (doubling) and tries again, up to
    `capacity_retries` in a row; a failure in the user's code, or a stop someone asked for, ends the
    run with it, once (the table: docs/PLATFORM.md §1.12).
    """
    ending = outcome.ending
    if ending is Ending.RUNNING:
        return Decision(Action.NONE, f"{outcome.name} is {outcome.status}", before)
    state = replace(before, jobs=before.jobs + 1, spent_usd=before.spent_usd + _cost(outcome, policy),
                    interruptions=before.interruptions + outcome.interruptions)
    if ending is Ending.CAPACITY:
        return _no_capacity(run, outcome, state, policy)
    state = replace(state, links=state.links + 1, capacity_failures=0)
    if ending is Ending.COMPLETED:
        return Decision(Action.DONE, f"{outcome.name} completed: the run is done ({state.links} link(s))", state)
    if ending is Ending.FAILED:
        reason = outcome.failure_reason.strip() or "no reason given"
        return Decision(Action.STOP, f"{outcome.name} failed: {reason}; the run ends (a failure in the job's "
                        "code or setup is not retried)", state)
    if ending is Ending.STOPPED:
        return Decision(Action.STOP, f"{outcome.name} was stopped (StopTrainingJob): the run ends", state)
    if ending is Ending.MAX_RUNTIME and outcome.wrote_checkpoint is False:
        return Decision(Action.STOP, f"{_why(outcome)} and wrote no checkpoint: the next link would start where "
                        "this one did; the run stops (give each link a longer max_runtime_s, or checkpoint more "
                        "often)", state)
    return _continue(run, outcome, state, policy, _why(outcome))


def capacity_wait(policy: ChainPolicy, failures: int) -> float:
    """Seconds to wait after the `failures`-th capacity refusal in a row: doubling, at most backoff_max_s."""
    return float(min(policy.backoff_s * 2 ** (failures - 1), policy.backoff_max_s))


def _cost(outcome: LinkOutcome, policy: ChainPolicy) -> float:
    return outcome.billable_s * (policy.price(outcome.instance_type) or 0.0) / 3600


def replay(run: str, outcomes: Sequence[LinkOutcome], policy: ChainPolicy) -> list[Decision]:
    """The decisions for a run's links in order (what `sm-dist status RUN` and tests read)."""
    decisions, state = [], RunState()
    for outcome in outcomes:
        decision = decide(run, outcome, state, policy)
        decisions.append(decision)
        state = decision.state
    return decisions
