"""The chain stack: its Lambda code is the decision module and the supervisor, its rights are the least
that work, it deploys to moto, and the deployed code acts on moto's training jobs.

(cfn-lint runs on every shipped template in test_template.py.)
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sm_dist.errors import ConfigError
from sm_dist.provision import chain_stack, config, stack, template

pytest.importorskip("yaml")
NAME = chain_stack.TEMPLATE
ROLE = "arn:aws:iam::123456789012:role/sm-dist-training"


def _statements() -> dict[str, dict[str, Any]]:
    """The role's statements by Sid (a conditional one, `!If [COND, STATEMENT, !Ref AWS::NoValue]`, as written)."""
    role = template.load(NAME)["Resources"]["SupervisorRole"]["Properties"]
    listed = role["Policies"][0]["PolicyDocument"]["Statement"]
    return {s["Sid"]: s for s in (s["Fn::If"][1] if "Fn::If" in s else s for s in listed)}


def test_the_inline_code_is_the_decision_module_and_the_supervisor() -> None:
    code = chain_stack.zip_file(template.template_text(NAME))
    assert code == chain_stack.inline_code(), "run: python -m sm_dist.provision.chain_stack"
    assert "def decide(" in code and "def handler(" in code and "from sm_dist" not in code
    assert len(code) > 4096  # CloudFormation's old inline limit no longer applies (docs/PLATFORM.md §1.12)


def test_render_replaces_only_the_code_block() -> None:
    text = template.template_text(NAME)
    again = chain_stack.render(chain_stack.render(text, "print('x')\n\nprint('y')\n"), chain_stack.inline_code())
    assert again == text


def test_the_supervisor_may_pass_only_the_execution_role_and_only_to_sagemaker() -> None:
    statements = _statements()
    passing = [s for s in statements.values() if "iam:PassRole" in str(s["Action"])]
    assert len(passing) == 1 and passing[0]["Resource"] == {"Ref": "ExecutionRoleArn"}
    assert passing[0]["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    create = statements["CreateLinks"]
    assert create["Action"] == "sagemaker:CreateTrainingJob"
    assert create["Condition"] == {"Null": {"aws:RequestTag/sm-dist:run": "false"}}  # only jobs tagged as links
    for statement in statements.values():
        assert statement["Resource"] != "*" and "*" not in str(statement["Action"])
        if str(statement["Action"]).count("sagemaker:"):
            resources = [r["Fn::Sub"].rsplit(":", 1)[1] for r in
                         (statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]])]
            assert set(resources) <= {"training-job/*", "training-plan/*", "reserved-capacity/*"}, resources
    assert statements["WriteOwnLogs"]["Resource"] == {"Fn::GetAtt": ["SupervisorLogGroup", "Arn"]}
    # after a MaxRuntime stop it lists the one bucket it is given (none given: no statement, it never lists)
    listing = statements["ListCheckpoints"]
    assert listing["Action"] == "s3:ListBucket"
    assert listing["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:s3:::${CheckpointBucket}"}
    conditional = [s for s in template.load(NAME)["Resources"]["SupervisorRole"]["Properties"]["Policies"][0][
        "PolicyDocument"]["Statement"] if "Fn::If" in s]
    assert conditional == [{"Fn::If": ["ListsCheckpoints", listing, {"Ref": "AWS::NoValue"}]}]


def _deployed_role_policy(aws_session: Any) -> dict[str, Any]:
    """The supervisor role's inline policy as moto's IAM stores it after a deploy: a dict's repr, with
    AWS::NoValue entries as None (docs/PLATFORM.md §10)."""
    import ast

    iam = aws_session.client("iam")
    role = next(r["RoleName"] for r in iam.list_roles()["Roles"] if "SupervisorRole" in r["RoleName"])
    document = iam.get_role_policy(RoleName=role, PolicyName="sm-dist-supervisor")["PolicyDocument"]
    return ast.literal_eval(document) if isinstance(document, str) else document


def test_the_supervisor_may_create_a_link_on_a_training_plan(aws_session: Any, config_home: Path) -> None:
    """Finding 1 of issue 39: CreateTrainingJob with a TrainingPlanArn is authorized on the plan and its
    reserved capacity too (docs/PLATFORM.md §1.10); the role granted training-job/* only."""
    from _iam_simulator import evaluate

    stack.deploy("sm-dist-chain", {"ExecutionRoleArn": ROLE}, session=aws_session, template_name=NAME, poll_seconds=0)
    document = _deployed_role_policy(aws_session)
    tagged = {"aws:RequestTag/sm-dist:run": ["run"]}
    sagemaker = "arn:aws:sagemaker:us-east-1:123456789012:{}".format
    for resource in ("training-job/run-2", "training-plan/p5-week", "reserved-capacity/rc-p5-1"):
        assert evaluate([("supervisor", document)], "sagemaker:CreateTrainingJob", sagemaker(resource),
                        tagged)[0] == "allowed", resource
    assert evaluate([("supervisor", document)], "sagemaker:CreateTrainingJob", sagemaker("training-job/x"),
                    {})[0] == "implicitDeny"  # an untagged job stays refused


def test_the_stack_keeps_the_events_its_function_fails_on(aws_session: Any, config_home: Path) -> None:
    """Finding 7 of issue 39: an event the function raises on is retried twice by Lambda, then dropped; the
    stack now sends it to its queue (the function's dead-letter queue), which the role may write and the
    stack's output names (sm-dist status reads it: tests/cloud/test_run.py)."""
    from _iam_simulator import evaluate

    resources = template.load(NAME)["Resources"]
    function = resources["SupervisorFunction"]["Properties"]
    assert function["DeadLetterConfig"] == {"TargetArn": {"Fn::GetAtt": ["FailedEvents", "Arn"]}}
    target = resources["LinkEndedRule"]["Properties"]["Targets"][0]
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["FailedEvents", "Arn"]}}  # undelivered events too
    statement = resources["RuleKeepsUndeliveredEvents"]["Properties"]["PolicyDocument"]["Statement"]
    assert statement == [{"Sid": "EventBridgeKeepsUndeliveredEvents", "Effect": "Allow",
                          "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
                          "Resource": {"Fn::GetAtt": ["FailedEvents", "Arn"]},
                          "Condition": {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["LinkEndedRule", "Arn"]}}}}]
    queue = resources["FailedEvents"]["Properties"]
    assert queue["MessageRetentionPeriod"] == 1_209_600 and queue["SqsManagedSseEnabled"] is True  # 14 days, the most
    stack.deploy("sm-dist-chain", {"ExecutionRoleArn": ROLE}, session=aws_session, template_name=NAME, poll_seconds=0)
    described = aws_session.client("cloudformation").describe_stacks(StackName="sm-dist-chain")["Stacks"][0]
    url = next(o["OutputValue"] for o in described["Outputs"] if o["OutputKey"] == "FailedEventsQueueUrl")
    attributes = aws_session.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    assert attributes["QueueArn"].endswith(":sm-dist-chain-supervisor-failures")
    assert evaluate([("supervisor", _deployed_role_policy(aws_session))], "sqs:SendMessage", attributes["QueueArn"],
                    {})[0] == "allowed"


def test_the_rule_hands_every_ended_training_job_to_the_function() -> None:
    resources = template.load(NAME)["Resources"]
    pattern = resources["LinkEndedRule"]["Properties"]["EventPattern"]
    assert pattern == {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
                       "detail": {"TrainingJobStatus": ["Completed", "Failed", "Stopped"]}}
    assert resources["RuleInvokesSupervisor"]["Properties"]["SourceArn"] == {"Fn::GetAtt": ["LinkEndedRule", "Arn"]}
    function = resources["SupervisorFunction"]["Properties"]
    assert function["Handler"] == "index.handler" and function["Timeout"] == 900  # a capacity wait fits


def test_the_stack_deploys_to_moto_and_records_no_default(aws_session: Any, config_home: Path) -> None:
    info = stack.deploy("sm-dist-chain", {"ExecutionRoleArn": ROLE}, session=aws_session, template_name=NAME,
                        poll_seconds=0)
    assert info.status == "CREATE_COMPLETE"
    function = aws_session.client("lambda").get_function(FunctionName="sm-dist-chain-supervisor")["Configuration"]
    assert function["Handler"] == "index.handler" and function["Runtime"] == "python3.12"
    rules = aws_session.client("events").list_rules()["Rules"]
    assert len(rules) == 1 and "SageMaker Training Job State Change" in rules[0]["EventPattern"]
    recorded = config.read()  # fit --infra-stack never picks the chain stack; fit(chain=True) checks it
    assert recorded["default"] is None and recorded["stacks"] == {}
    assert recorded["chain_stacks"] == {"us-east-1": "sm-dist-chain"}
    from sm_dist.provision import teardown

    teardown.delete("sm-dist-chain", session=aws_session, poll_seconds=0)
    assert config.read()["chain_stacks"] == {}  # forgotten with the stack


def test_the_chain_stack_takes_the_role_from_the_base_stack(aws_session: Any, config_home: Path) -> None:
    """No --param ExecutionRoleArn by hand: deploy reads the recorded base stack's RoleArn output; with no
    base stack, or one in another region, one line says so and nothing is created."""
    cfn = aws_session.client("cloudformation")
    with pytest.raises(ConfigError, match=r"--param ExecutionRoleArn=None: no sm_dist base stack recorded"):
        stack.deploy("sm-dist-chain", session=aws_session, template_name=NAME, poll_seconds=0)
    base = stack.deploy("sm-dist", session=aws_session, poll_seconds=0)
    elsewhere = {**config.read(), "stacks": {"sm-dist": {**config.read()["stacks"]["sm-dist"], "region": "eu-west-1"}}}
    config.config_path().write_text(json.dumps(elsewhere))
    with pytest.raises(ConfigError, match=r"base stack sm-dist is in eu-west-1, not us-east-1"):
        stack.deploy("sm-dist-chain", session=aws_session, template_name=NAME, poll_seconds=0)
    assert [s["StackName"] for s in cfn.describe_stacks()["Stacks"]] == ["sm-dist"]
    stack.deploy("sm-dist", session=aws_session, poll_seconds=0)  # records it again, in this region
    lines: list[str] = []
    info = stack.deploy("sm-dist-chain", session=aws_session, template_name=NAME, poll_seconds=0, on_event=lines.append)
    assert info.parameters["ExecutionRoleArn"] == base.outputs["role_arn"] and info.status == "CREATE_COMPLETE"
    assert any("the role of base stack sm-dist (its RoleArn output)" in line for line in lines)
    assert info.parameters["CheckpointBucket"] == base.outputs["bucket"]  # the bucket its supervisor may list
    assert any("the bucket of base stack sm-dist (its BucketName output)" in line for line in lines)


@pytest.fixture
def index() -> Iterator[types.ModuleType]:
    """The template's inlined code loaded as the Lambda runtime loads it (module `index`)."""
    module = types.ModuleType("index")
    sys.modules["index"] = module  # dataclasses look their module up
    try:
        exec(compile(chain_stack.zip_file(template.template_text(NAME)), "index.py", "exec"), module.__dict__)
        yield module
    finally:
        del sys.modules["index"]


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def test_the_deployed_code_ends_a_completed_run_in_moto(aws_session: Any, index: types.ModuleType) -> None:
    """moto completes a job at once: the inlined handler reads it, its tags, and writes the decision."""
    sagemaker = aws_session.client("sagemaker")
    policy, state = index.ChainPolicy(max_links=3), index.RunState()
    tags = [{"Key": "sm-dist:run", "Value": "run"}, {"Key": "sm-dist:link", "Value": "1"},
            {"Key": "sm-dist:chain", "Value": policy.to_tag()}, {"Key": "sm-dist:chain-state", "Value": state.to_tag()}]
    for name, job_tags in (("run-1", tags), ("other-job", [])):
        sagemaker.create_training_job(
            TrainingJobName=name, RoleArn=ROLE, Tags=job_tags,
            AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13",
                                    "TrainingInputMode": "File"},
            OutputDataConfig={"S3OutputPath": "s3://team-bucket/out"},
            ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
            StoppingCondition={"MaxRuntimeInSeconds": 3600})
    event = {"detail": {"TrainingJobName": "run-1", "TrainingJobStatus": "Completed"}}
    result = index.handler(event, _Context())
    assert result["action"] == "done" and "the run is done" in result["reason"]
    arn = sagemaker.describe_training_job(TrainingJobName="run-1")["TrainingJobArn"]
    decided = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]}
    assert decided["sm-dist:chain-decision"].startswith("done")
    assert index.handler(event, _Context())["action"] == "ignored"  # decided already
    other = index.handler({"detail": {"TrainingJobName": "other-job"}}, _Context())
    assert other["action"] == "ignored" and "not a job of an sm_dist run" in other["reason"]
    assert len(sagemaker.list_training_jobs()["TrainingJobSummaries"]) == 2  # nothing created
