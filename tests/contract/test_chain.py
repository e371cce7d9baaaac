"""The chain's decision as a table of job outcomes, in DescribeTrainingJob's shapes (docs/PLATFORM.md §1.12)."""

from __future__ import annotations

import datetime as dt
import importlib.util
import sys
from typing import Any

import pytest

from sm_dist.contract import chain
from sm_dist.contract.chain import Action, ChainPolicy, Ending, LinkOutcome, RunState, decide

T0 = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.timezone.utc)
CAPACITY = ("CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML "
            "instance type.")
QUOTA = ("ResourceLimitExceeded: The account-level service limit 'ml.p4d.24xlarge for training job usage' is 2 "
         "Instances, with current utilization of 2 Instances and a request delta of 2 Instances.")


def describe(status: str, secondary: str, reason: str | None = None, *, transitions: tuple[str, ...] = (),
             billable: int | None = 3600, name: str = "run-1") -> dict[str, Any]:
    """A DescribeTrainingJob response's fields the decision reads (botocore's sagemaker service model)."""
    out: dict[str, Any] = {
        "TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "TrainingJobStatus": status, "SecondaryStatus": secondary,
        "SecondaryStatusTransitions": [{"Status": s, "StartTime": T0, "StatusMessage": ""}
                                       for s in ("Starting", *transitions, secondary)],
        "CreationTime": T0, "LastModifiedTime": T0,
    }
    if reason is not None:
        out["FailureReason"] = reason
    if billable is not None:
        out["BillableTimeInSeconds"] = billable
        out["TrainingTimeInSeconds"] = billable
    return out


POLICY = ChainPolicy(max_links=5, link_runtime_s=86_400, budget_usd=None, usd_per_hour=10.0)

# (case, DescribeTrainingJob fields, ending, action)
TABLE = [
    ("completed", describe("Completed", "Completed"), Ending.COMPLETED, Action.DONE),
    ("max runtime", describe("Stopped", "MaxRuntimeExceeded"), Ending.MAX_RUNTIME, Action.NEXT),
    ("max wait (spot)", describe("Stopped", "MaxWaitTimeExceeded", transitions=("Training", "Interrupted")),
     Ending.MAX_WAIT, Action.NEXT),
    ("stopped by a user", describe("Stopped", "Stopped"), Ending.STOPPED, Action.STOP),
    ("capacity error", describe("Failed", "Failed", CAPACITY, billable=0), Ending.CAPACITY, Action.RETRY),
    ("insufficient capacity", describe("Failed", "Failed", "InsufficientCapacityError: no p5 in us-east-1a", billable=0),
     Ending.CAPACITY, Action.RETRY),
    ("quota held by other jobs", describe("Failed", "Failed", QUOTA, billable=None), Ending.CAPACITY, Action.RETRY),
    ("internal server error", describe("Failed", "Failed", "InternalServerError: We encountered an internal error. "
                                       "Please try again."), Ending.PLATFORM, Action.NEXT),
    ("the user's code", describe("Failed", "Failed", "AlgorithmError: ExecuteUserScriptError: ValueError: bad lr"),
     Ending.FAILED, Action.STOP),
    ("still training", describe("InProgress", "Training"), Ending.RUNNING, Action.NONE),
    ("interrupted, restarting", describe("InProgress", "Interrupted"), Ending.RUNNING, Action.NONE),
    ("stopping", describe("Stopping", "Stopping"), Ending.RUNNING, Action.NONE),
]


@pytest.mark.parametrize(("desc", "ending", "action"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_each_documented_outcome_decides_as_the_table_says(desc: dict[str, Any], ending: Ending, action: Action) -> None:
    outcome = LinkOutcome.from_description(desc)
    assert outcome.ending is ending
    decision = decide("run", outcome, RunState(), POLICY)
    assert decision.action is action, decision.reason
    if action in (Action.NEXT, Action.RETRY):
        assert decision.next_name == "run-2" and decision.max_runtime_s == 86_400
    else:
        assert decision.next_name is None


def test_a_failure_in_the_users_code_ends_the_run_with_that_failure_once() -> None:
    decision = decide("run", LinkOutcome.from_description(describe(
        "Failed", "Failed", "AlgorithmError: ExecuteUserScriptError: ValueError: bad lr")), RunState(), POLICY)
    assert decision.action is Action.STOP and "ValueError: bad lr" in decision.reason and "not retried" in decision.reason


def test_capacity_waits_double_then_the_run_stops() -> None:
    policy = ChainPolicy(capacity_retries=3, backoff_s=60, backoff_max_s=200)
    state, waits = RunState(links=1, jobs=1), []
    for number in range(2, 5):
        decision = decide("run", LinkOutcome(f"run-{number}", "Failed", "Failed", CAPACITY), state, policy)
        assert decision.action is Action.RETRY and decision.next_name == f"run-{number + 1}"
        waits.append(decision.wait_s)
        state = decision.state
    assert waits == [60, 120, 200] and state.links == 1 and state.jobs == 4
    last = decide("run", LinkOutcome("run-5", "Failed", "Failed", CAPACITY), state, policy)
    assert last.action is Action.STOP and "no capacity after 4 tries" in last.reason


def test_a_link_that_ran_resets_the_capacity_count() -> None:
    state = decide("run", LinkOutcome("run-2", "Failed", "Failed", CAPACITY), RunState(links=1, jobs=1), POLICY).state
    after = decide("run", LinkOutcome("run-3", "Stopped", "MaxRuntimeExceeded"), state, POLICY)
    assert after.action is Action.NEXT and after.state.capacity_failures == 0 and after.state.links == 2
    assert after.next_name == "run-4"


def test_max_links_ends_the_run() -> None:
    state = RunState(links=4, jobs=4)
    decision = decide("run", LinkOutcome("run-5", "Stopped", "MaxRuntimeExceeded"), state, POLICY)
    assert decision.action is Action.STOP and "max_links=5" in decision.reason


def test_the_budget_is_the_runs_and_each_link_gets_what_is_left() -> None:
    # $100 at $10/h: 10 h in all. Link 1 billed 6 h, so link 2 may run 4 h less the stop's 180 s.
    policy = ChainPolicy(budget_usd=100, usd_per_hour=10, link_runtime_s=chain.MAX_LINK_RUNTIME_S)
    first = decide("run", LinkOutcome("run-1", "Stopped", "MaxRuntimeExceeded", billable_s=6 * 3600), RunState(), policy)
    assert first.action is Action.NEXT and first.max_runtime_s == 4 * 3600 - chain.LINK_OVERHEAD_S
    assert first.state.spent_usd == pytest.approx(60)
    second = decide("run", LinkOutcome("run-2", "Stopped", "MaxRuntimeExceeded", billable_s=4 * 3600 - 100),
                    first.state, policy)
    assert second.action is Action.STOP and "budget is spent" in second.reason


def test_after_n_spot_interruptions_the_next_link_runs_on_demand() -> None:
    policy = ChainPolicy(on_demand_after=2)
    one = decide("run", LinkOutcome("run-1", "Stopped", "MaxRuntimeExceeded", interruptions=1), RunState(), policy)
    assert one.action is Action.NEXT and not one.on_demand
    two = decide("run", LinkOutcome("run-2", "Stopped", "MaxRuntimeExceeded", interruptions=1), one.state, policy)
    assert two.on_demand and two.state.on_demand and "on demand" in two.reason
    three = decide("run", LinkOutcome("run-3", "Stopped", "MaxRuntimeExceeded"), two.state, policy)
    assert three.on_demand  # once on demand, the run stays on demand


def test_max_wait_moves_the_run_on_demand_when_asked() -> None:
    desc = describe("Stopped", "MaxWaitTimeExceeded", transitions=("Training", "Interrupted", "Starting"))
    assert LinkOutcome.from_description(desc).interruptions == 1
    asked = decide("run", LinkOutcome.from_description(desc), RunState(), ChainPolicy(on_demand_after=5))
    assert asked.on_demand
    assert not decide("run", LinkOutcome.from_description(desc), RunState(), ChainPolicy()).on_demand


TYPES = ChainPolicy(usd_per_hour=250.0, capacity_retries=1, backoff_s=60,
                    types="ml.p5.48xlarge/ml.p4de.24xlarge@126/ml.p4d.24xlarge")
# (the link ran on, how it ended, the run's action, the wait, the next link's type): one run, in order
FALLBACK_RUN = [
    ("ml.p5.48xlarge", describe("Failed", "Failed", CAPACITY, billable=0), Action.RETRY, 0, "ml.p4de.24xlarge"),
    ("ml.p4de.24xlarge", describe("Failed", "Failed", CAPACITY, billable=0), Action.RETRY, 0, "ml.p4d.24xlarge"),
    ("ml.p4d.24xlarge", describe("Failed", "Failed", QUOTA, billable=0), Action.RETRY, 60, "ml.p5.48xlarge"),
    ("ml.p5.48xlarge", describe("Failed", "Failed", CAPACITY, billable=0), Action.RETRY, 0, "ml.p4de.24xlarge"),
    ("ml.p4de.24xlarge", describe("Stopped", "MaxRuntimeExceeded"), Action.NEXT, 0, "ml.p4de.24xlarge"),
    ("ml.p4de.24xlarge", describe("Failed", "Failed", CAPACITY, billable=0), Action.RETRY, 0, "ml.p4d.24xlarge"),
    ("ml.p4d.24xlarge", describe("Failed", "Failed", CAPACITY, billable=0), Action.RETRY, 0, "ml.p5.48xlarge"),
    ("ml.p5.48xlarge", describe("Failed", "Failed", CAPACITY, billable=0), Action.RETRY, 60, "ml.p4de.24xlarge"),
    ("ml.p4de.24xlarge", describe("Failed", "Failed", CAPACITY, billable=0), Action.RETRY, 0, "ml.p4d.24xlarge"),
    ("ml.p4d.24xlarge", describe("Failed", "Failed", CAPACITY, billable=0), Action.RETRY, 0, "ml.p5.48xlarge"),
    ("ml.p5.48xlarge", describe("Failed", "Failed", CAPACITY, billable=0), Action.STOP, 0, None),
]


def test_capacity_moves_the_next_link_to_the_next_fallback_type() -> None:
    """After a capacity error the next link uses the next type at once; once every type was refused in
    turn, the round's first type again after the doubling wait; a link that ran keeps its type (it had
    capacity), and the run's 2 rounds (capacity_retries=1) without capacity end it."""
    state = RunState()
    for number, (ran_on, desc, action, wait, next_type) in enumerate(FALLBACK_RUN, start=1):
        desc = {**desc, "TrainingJobName": f"run-{number}", "ResourceConfig": {"InstanceType": ran_on}}
        assert chain._type(TYPES, state) == ran_on  # the type this link was created with
        decision = decide("run", LinkOutcome.from_description(desc), state, TYPES)
        assert (decision.action, decision.wait_s, decision.instance_type) == (action, wait, next_type), decision.reason
        state = decision.state
    assert "no capacity after 6 tries" in decision.reason
    assert state.spent_usd == pytest.approx(126.0)  # the one link that ran: 1 h of p4de at its own price


def test_a_link_that_ran_on_a_type_preferences_chose_is_priced_at_that_type() -> None:
    desc = {**describe("Stopped", "MaxRuntimeExceeded"),
            "ResourceConfig": {"InstanceCount": 2, "InstancePreferences": [{"InstanceType": "ml.p5.48xlarge"},
                                                                           {"InstanceType": "ml.p4de.24xlarge"}],
                               "SelectedInstanceType": "ml.p4de.24xlarge", "SelectedInstanceCount": 2}}
    outcome = LinkOutcome.from_description(desc)
    assert outcome.instance_type == "ml.p4de.24xlarge"
    assert decide("run", outcome, RunState(), TYPES).state.spent_usd == pytest.approx(126.0)
    assert TYPES.instance_types() == ("ml.p5.48xlarge", "ml.p4de.24xlarge", "ml.p4d.24xlarge")
    assert TYPES.price("ml.p5.48xlarge") == 250.0 and TYPES.price("ml.p4d.24xlarge") is None


def test_without_fallback_types_the_decision_names_no_type() -> None:
    decision = decide("run", LinkOutcome("run-1", "Failed", "Failed", CAPACITY), RunState(), POLICY)
    assert decision.instance_type is None and decision.wait_s == chain.DEFAULT_BACKOFF_S


def test_an_eventbridge_detail_reads_like_a_description() -> None:
    # the "SageMaker Training Job State Change" event's detail: DescribeTrainingJob's fields, times in ms
    detail = {"TrainingJobName": "run-3", "TrainingJobStatus": "Stopped", "SecondaryStatus": "MaxRuntimeExceeded",
              "CreationTime": "1583831889050", "SecondaryStatusTransitions": [], "Tags": {"sm-dist:run": "run"}}
    outcome = LinkOutcome.from_description(detail)
    assert outcome.ending is Ending.MAX_RUNTIME and outcome.billable_s == 0 and outcome.name == "run-3"


def test_policy_and_state_travel_as_tag_values() -> None:
    types = "/".join(["ml.p5.48xlarge", *(f"{t}@{p}" for t, p in (("ml.p4de.24xlarge", 126.26), ("ml.p4d.24xlarge",
                      98.32), ("ml.g6e.48xlarge", 120.17), ("ml.p5e.48xlarge", 300.55)))])  # InstancePreferences' 5
    policy = ChainPolicy(max_links=7, budget_usd=500.0, usd_per_hour=98.32, on_demand_after=2, link_runtime_s=3600,
                         capacity_retries=3, backoff_s=30.5, backoff_max_s=301.0, types=types)
    state = RunState(links=2, jobs=3, capacity_failures=1, interruptions=4, spent_usd=12.345678, on_demand=True,
                     type_index=2)
    assert ChainPolicy.from_tag(policy.to_tag()) == policy
    assert RunState.from_tag(state.to_tag()) == RunState(2, 3, 1, 4, 12.3457, True, 2)
    assert ChainPolicy.from_tag(ChainPolicy().to_tag()) == ChainPolicy() and ChainPolicy().to_tag()  # never empty
    assert RunState.from_tag(RunState().to_tag()) == RunState() and RunState().to_tag()
    # what CreateTrainingJob's TagValue pattern and length allow (docs/PLATFORM.md §1.5)
    for text in (policy.to_tag(), state.to_tag()):
        assert len(text) <= 256 and all(c.isalnum() or c in " _.:/=+-@" for c in text)
    with pytest.raises(ValueError, match="unknown field"):
        ChainPolicy.from_tag("max-links=3 colour=blue")


def test_link_names_stay_within_the_apis_63_characters() -> None:
    assert chain.link_name("run", 12) == "run-12"
    assert chain.check_run_name("a" * 60, 99) == "a" * 60
    with pytest.raises(ValueError, match="1-60 letters"):
        chain.check_run_name("a" * 61, 99)
    with pytest.raises(ValueError):
        chain.check_run_name("bad_name", 3)


def test_the_constants_are_the_plans() -> None:
    """The module carries copies (it imports no sm_dist: the Lambda runs it alone); they must agree."""
    from sm_dist.planning import budget

    assert chain.MAX_LINK_RUNTIME_S == budget.MAX_RUNTIME_LIMIT_S
    assert chain.LINK_OVERHEAD_S == budget.STOP_GRACE_S + budget.UPLOAD_ALLOWANCE_S
    assert chain.MIN_LINK_RUNTIME_S == budget.MIN_RUNTIME_S


def test_the_module_runs_alone() -> None:
    """Loaded outside the package, as the Lambda's inline code is: no sm_dist import."""
    spec = importlib.util.spec_from_file_location("chain_alone", chain.__file__)
    assert spec is not None and spec.loader is not None
    text = open(chain.__file__, encoding="utf-8").read()
    assert "import sm_dist" not in text and "from sm_dist" not in text
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does (dataclasses look their module up)
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    assert module.classify("Stopped", "MaxRuntimeExceeded").value == "max-runtime"


def test_a_max_runtime_link_that_wrote_no_checkpoint_ends_the_run() -> None:
    """The rule both supervisors apply after listing the checkpoint URI: nothing new after a MaxRuntime stop
    ends the run; written, or not known (None), goes on; a MaxWait (spot: perhaps it never ran) goes on."""
    policy, before = ChainPolicy(max_links=10), RunState(links=1, jobs=1)
    stopped = LinkOutcome("run-2", "Stopped", "MaxRuntimeExceeded", wrote_checkpoint=False)
    decision = decide("run", stopped, before, policy)
    assert decision.action is Action.STOP and decision.state.links == 2
    assert decision.reason.startswith("run-2 reached its MaxRuntime and wrote no checkpoint")
    for wrote in (True, None):
        assert decide("run", LinkOutcome("run-2", "Stopped", "MaxRuntimeExceeded", wrote_checkpoint=wrote), before,
                      policy).action is Action.NEXT
    waited = LinkOutcome("run-2", "Stopped", "MaxWaitTimeExceeded", wrote_checkpoint=False)
    assert decide("run", waited, before, policy).action is Action.NEXT


def test_a_link_that_asked_for_every_type_at_once_waits_after_its_capacity_error() -> None:
    """An on-demand link with InstancePreferences lets SageMaker try every listed type: its CapacityError means none
    had capacity, so the next link waits (a round was spent) instead of asking the same list again at once."""
    prefs = [{"InstanceType": t} for t in TYPES.instance_types()]
    desc = {**describe("Failed", "Failed", CAPACITY, billable=0),
            "ResourceConfig": {"InstanceCount": 2, "InstancePreferences": prefs}}
    outcome = LinkOutcome.from_description(desc)
    assert outcome.types_tried == 3
    first = decide("run", outcome, RunState(), TYPES)
    assert first.action is Action.RETRY and first.wait_s == TYPES.backoff_s and first.state.type_index == 0
    assert first.instance_type == "ml.p5.48xlarge" and "waiting 60 s" in first.reason
    second = decide("run", outcome, first.state, TYPES)  # TYPES allows 1 round more: this one ends the run
    assert second.action is Action.STOP and "no capacity after 6 tries" in second.reason
