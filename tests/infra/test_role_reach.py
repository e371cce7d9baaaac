"""The stack's role, checked as AWS would: IAM's simulator on its real policies, and moto's IAM enforcement.

`sm-dist infra deploy` into moto, then `fit` with role validation on (never SAGEMAKER_VALIDATE_ROLE=false):
- the stack's own role passes sm_dist's check, while the SDK's fixed gate refuses it (finding 1 of the
  first-real-launch review: 10 of 11 actions denied on `*`), which is why sm_dist asks the precise question;
- a role missing what the job does, a role SageMaker cannot assume, and URIs outside the stack's reach are
  refused before anything is uploaded, each in one line with the fix;
- under the role's own credentials with moto's IAM enforcement on, what the job does in S3 is allowed and a
  write outside its prefix is denied (moto's evaluator, independent of tests/_iam_simulator.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from _iam_simulator import store_as_iam_does

from sm_dist.errors import ConfigError
from sm_dist.provision import stack

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def _fit(session: Any, project: Path, dry_run: bool = False, **extra: Any) -> Any:
    import sm_dist

    settings = dict(source_dir=str(project), instance_type="ml.g5.2xlarge", instance_count=2, strategy="ddp",
                    checkpoint_mode="auto", infra_stack="sm-dist", session=session)
    if dry_run:
        return sm_dist.plan("train.py", **{**settings, **extra})
    return sm_dist.fit("train.py", wait=False, **{**settings, **extra})


def _nothing_created(session: Any, bucket: str) -> bool:
    jobs = session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    return jobs == [] and session.client("s3").list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_the_stacks_role_passes_fits_check_and_the_sdks_fixed_gate_does_not(
        aws_session: Any, config_home: Path, project: Path) -> None:
    from sagemaker.core.helper.iam_role_resolver import RoleValidationError, resolve_and_validate_role
    from sagemaker.core.helper.session_helper import Session

    out = stack.deploy("sm-dist", {"Prefix": "team"}, session=aws_session, poll_seconds=0).outputs
    job = _fit(aws_session, project)
    assert aws_session.client("sagemaker").describe_training_job(TrainingJobName=job.name)["RoleArn"] == out["role_arn"]
    with pytest.raises(RoleValidationError) as info:
        resolve_and_validate_role(provided_role=out["role_arn"], sagemaker_session=Session(boto_session=aws_session))
    missing = str(info.value).split("Missing permissions: ", 1)[1].splitlines()[0].split(", ")
    assert "cloudwatch:PutMetricData" in missing and len([a for a in missing if a.startswith("ec2:")]) == 9


def test_a_role_that_may_not_write_the_output_is_refused_naming_the_action(
        aws_session: Any, config_home: Path, project: Path) -> None:
    from _project import TEST_ROLE_POLICY, create_test_role

    out = stack.deploy("sm-dist", session=aws_session, poll_seconds=0).outputs
    policy = json.loads(json.dumps(TEST_ROLE_POLICY))
    policy["Statement"][0]["Action"].remove("s3:PutObject")
    role = create_test_role(aws_session, policy, name="no-writes")
    with pytest.raises(ConfigError) as info:
        _fit(aws_session, project, role=role, infra_stack=None)
    message = str(info.value)
    assert info.value.field == "role" and "may not s3:PutObject on s3://" in message
    assert "(model output)" in message and "(checkpoints)" in message and "\n" not in message
    assert _nothing_created(aws_session, out["bucket"])


def _runtime_checkpointing(project: Path) -> None:
    """The entry imports sm_dist: its checkpointer writes to S3 itself, the request has no CheckpointConfig."""
    (project / "train.py").write_text("import sm_dist  # noqa: F401\nprint('[sm_dist] step=1 loss=0.5')\n")


def test_the_runtimes_own_checkpoint_uri_is_checked_against_the_role(
        aws_session: Any, config_home: Path, project: Path) -> None:
    """Finding 5 of issue 39: with no CheckpointConfig in the request, the checkpoint URI is the job spec's;
    a role that may not write there was let through and the job failed at its first save."""
    from _project import TEST_ROLE_POLICY, create_test_role

    out = stack.deploy("sm-dist", session=aws_session, poll_seconds=0).outputs
    _runtime_checkpointing(project)
    policy = json.loads(json.dumps(TEST_ROLE_POLICY))
    policy["Statement"][0]["Resource"] = ["arn:aws:s3:::sagemaker-*", "arn:aws:s3:::sagemaker-*/*"]
    role = create_test_role(aws_session, policy, name="own-bucket-only")
    settings = dict(role=role, infra_stack=None, checkpoint_s3_uri="s3://elsewhere/ckpt")
    plan = _fit(aws_session, project, dry_run=True, **settings)
    assert "CheckpointConfig" not in plan.request and plan.job_spec.checkpoint.mode == "s3"
    with pytest.raises(ConfigError) as info:
        _fit(aws_session, project, **settings)
    message = str(info.value)
    assert info.value.field == "role" and "on s3://elsewhere/ckpt/ (checkpoints)" in message and "\n" not in message
    assert "s3:DeleteObject" in message
    assert _nothing_created(aws_session, out["bucket"])


def test_the_runtimes_own_checkpoint_uri_is_inside_the_stacks_reach(
        aws_session: Any, config_home: Path, project: Path) -> None:
    """Finding 5 of issue 39, the plan-time reach check: a default-mode checkpoint URI outside the stack's
    prefix is refused in the dry run, as a CheckpointConfig one is."""
    stack.deploy("sm-dist", session=aws_session, poll_seconds=0)
    _runtime_checkpointing(project)
    with pytest.raises(ConfigError) as info:
        _fit(aws_session, project, dry_run=True, checkpoint_s3_uri="s3://elsewhere/ckpt")
    assert info.value.field == "checkpoint_s3_uri" and info.value.value == "s3://elsewhere/ckpt"
    assert "may write only under" in str(info.value)


def test_a_role_sagemaker_cannot_assume_is_refused(aws_session: Any, config_home: Path, project: Path) -> None:
    out = stack.deploy("sm-dist", session=aws_session, poll_seconds=0).outputs
    trust = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    aws_session.client("iam").update_assume_role_policy(RoleName=out["role_arn"].rsplit("/", 1)[1],
                                                        PolicyDocument=json.dumps(trust))
    with pytest.raises(ConfigError, match="does not let sagemaker.amazonaws.com assume it"):
        _fit(aws_session, project)
    assert _nothing_created(aws_session, out["bucket"])


def test_a_caller_that_may_not_simulate_gets_a_warning_not_a_refusal(
        aws_session: Any, config_home: Path, project: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from moto.iam.exceptions import IAMException
    from moto.iam.responses import IamResponse

    class AccessDenied(IAMException):
        code = "AccessDenied"

    def refuse(self: Any) -> Any:
        raise AccessDenied("User: arn:aws:iam::123456789012:user/dev is not authorized to perform: "
                           "iam:SimulatePrincipalPolicy")

    monkeypatch.setattr(IamResponse, "simulate_principal_policy", refuse, raising=False)
    stack.deploy("sm-dist", session=aws_session, poll_seconds=0)
    _fit(aws_session, project)
    assert any("may not iam:SimulatePrincipalPolicy" in r.getMessage() for r in caplog.records)


def test_a_data_channel_outside_the_stack_is_refused_with_the_deploy_that_fixes_it(
        aws_session: Any, config_home: Path, project: Path) -> None:
    out = stack.deploy("sm-dist", session=aws_session, poll_seconds=0).outputs
    aws_session.client("s3").create_bucket(Bucket="my-data")
    with pytest.raises(ConfigError) as info:
        _fit(aws_session, project, inputs={"train": "s3://my-data/train/"})
    assert "sm-dist infra deploy --stack-name sm-dist --param DataBuckets=my-data" in str(info.value)
    assert _nothing_created(aws_session, out["bucket"])
    # a second stack: moto's stack update does not rewrite a role's inline policies (PLATFORM §5)
    stack.deploy("sm-dist-data", {"DataBuckets": "my-data"}, session=aws_session, poll_seconds=0)
    job = _fit(aws_session, project, infra_stack="sm-dist-data", inputs={"train": "s3://my-data/train/"})
    assert job.plan.request["InputDataConfig"][-1]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://my-data/train/"


@pytest.mark.parametrize(("extra", "field", "fix"), [
    ({"subnets": ["subnet-1"], "security_group_ids": ["sg-1"]}, "subnets", "--param VpcMode=true"),
    ({"output_kms_key": "arn:aws:kms:us-east-1:123456789012:key/other"}, "output_kms_key", "--param KmsKeyArn="),
    ({"checkpoint_s3_uri": "s3://elsewhere/ckpt"}, "checkpoint_s3_uri", "may write only under"),
])
def test_what_the_stack_does_not_grant_is_refused_in_the_dry_run(
        aws_session: Any, config_home: Path, project: Path, extra: dict[str, Any], field: str, fix: str) -> None:
    stack.deploy("sm-dist", session=aws_session, poll_seconds=0)
    with pytest.raises(ConfigError) as info:
        _fit(aws_session, project, dry_run=True, **extra)
    assert info.value.field == field and fix in str(info.value)


def test_under_the_roles_own_credentials_with_iam_enforced_the_jobs_s3_calls_are_allowed(
        aws_session: Any, config_home: Path, project: Path) -> None:
    """moto's own evaluator (IAM enforcement on, the role assumed through STS) on what the job does in S3."""
    import boto3
    from botocore.exceptions import ClientError
    from moto.core import set_initial_no_auth_action_count

    out = stack.deploy("sm-dist", {"Prefix": "team"}, session=aws_session, poll_seconds=0).outputs
    job = _fit(aws_session, project)
    store_as_iam_does(out["role_arn"])
    creds = aws_session.client("sts").assume_role(RoleArn=out["role_arn"], RoleSessionName="job")["Credentials"]
    bucket, code = out["bucket"], job.plan.code_s3_uri.split("/", 3)[3]
    ckpt = job.plan.checkpoint_uri.split("/", 3)[3]

    @set_initial_no_auth_action_count(0)
    def as_the_job() -> dict[str, bool]:
        s3 = boto3.Session(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                           aws_session_token=creds["SessionToken"], region_name="us-east-1").client("s3")

        def allowed(call: Any, **kwargs: Any) -> bool:
            try:
                call(Bucket=bucket, **kwargs)
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "AccessDenied", exc
                return False
            return True

        return {
            "read code": allowed(s3.get_object, Key=code + "train.py"),
            "write checkpoint": allowed(s3.put_object, Key=ckpt + "/step-1/model.pt", Body=b"x"),
            "read checkpoint": allowed(s3.get_object, Key=ckpt + "/step-1/model.pt"),
            "list checkpoints": allowed(s3.list_objects_v2, Prefix=ckpt + "/"),
            "write output": allowed(s3.put_object, Key=f"team/{job.name}/output/model.tar.gz", Body=b"x"),
            "write outside the prefix": allowed(s3.put_object, Key="other/x", Body=b"x"),
        }

    assert as_the_job() == {"read code": True, "write checkpoint": True, "read checkpoint": True,
                            "list checkpoints": True, "write output": True, "write outside the prefix": False}


def _iam_requests(operation: str, params: dict[str, Any], stack_id: str) -> list[tuple[str, str, dict[str, list[str]]]]:
    """(IAM action, resource ARN, context) that AWS authorizes for one API call fit made (the service
    authorization reference's mapping); an operation missing here fails the test, so a new call fit makes
    must be added to the caller policy and to this table."""
    arn = "arn:aws:{}:us-east-1:123456789012:{}".format
    bucket, key = params.get("Bucket", ""), params.get("Key", "")
    s3 = {"PutObject": ("s3:PutObject", f"arn:aws:s3:::{bucket}/{key}"),
          "HeadObject": ("s3:GetObject", f"arn:aws:s3:::{bucket}/{key}"),
          "GetObject": ("s3:GetObject", f"arn:aws:s3:::{bucket}/{key}"),
          "CreateMultipartUpload": ("s3:PutObject", f"arn:aws:s3:::{bucket}/{key}"),
          "UploadPart": ("s3:PutObject", f"arn:aws:s3:::{bucket}/{key}"),
          "CompleteMultipartUpload": ("s3:PutObject", f"arn:aws:s3:::{bucket}/{key}"),
          "ListObjectsV2": ("s3:ListBucket", f"arn:aws:s3:::{bucket}"),
          "HeadBucket": ("s3:ListBucket", f"arn:aws:s3:::{bucket}"),
          "GetBucketLocation": ("s3:GetBucketLocation", f"arn:aws:s3:::{bucket}")}
    job = arn("sagemaker", f"training-job/{str(params.get('TrainingJobName', '')).lower()}")
    found = {**{f"s3.{k}": [v] for k, v in s3.items()},
             "sagemaker.DescribeTrainingJob": [("sagemaker:DescribeTrainingJob", job)],
             "sagemaker.ListTrainingJobs": [("sagemaker:ListTrainingJobs", "*")],
             "cloudformation.DescribeStacks": [("cloudformation:DescribeStacks", stack_id)],
             "iam.GetRole": [("iam:GetRole", f"arn:aws:iam::123456789012:role/{params.get('RoleName')}")],
             "iam.SimulatePrincipalPolicy": [("iam:SimulatePrincipalPolicy", str(params.get("PolicySourceArn")))],
             "servicequotas.GetServiceQuota": [("servicequotas:GetServiceQuota", "*")],
             "servicequotas.ListAWSDefaultServiceQuotas": [("servicequotas:ListAWSDefaultServiceQuotas", "*")],
             "sts.GetCallerIdentity": []}  # needs no permission
    if operation == "sagemaker.CreateTrainingJob":
        return [("sagemaker:CreateTrainingJob", job, {}), ("sagemaker:AddTags", job, {}),
                ("iam:PassRole", params["RoleArn"], {"iam:PassedToService": ["sagemaker.amazonaws.com"]})]
    assert operation in found, f"fit made {operation}: add it to CallerPolicy (infra/sm-dist.yaml) and this table"
    return [(action, resource, {}) for action, resource in found[operation]]


def _caller_policy(aws_session: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The deployed stack sm-dist as described, and its CallerPolicy's document as IAM stores it."""
    described = aws_session.client("cloudformation").describe_stacks(StackName="sm-dist")["Stacks"][0]
    policy_arn = next(o["OutputValue"] for o in described["Outputs"] if o["OutputKey"] == "CallerPolicyArn")
    iam = aws_session.client("iam")
    version = iam.get_policy(PolicyArn=policy_arn)["Policy"]["DefaultVersionId"]
    document = iam.get_policy_version(PolicyArn=policy_arn, VersionId=version)["PolicyVersion"]["Document"]
    return described, json.loads(unquote(document)) if isinstance(document, str) else document


def test_the_caller_policy_allows_release_jobs_on_training_plans_and_reading_the_chain_stack(
        aws_session: Any, config_home: Path) -> None:
    """Findings 1, 4 and 9 of issue 39: `sm-dist release` calls UpdateTrainingJob; a job with a TrainingPlanArn is
    authorized on the plan and its reserved capacity too (docs/PLATFORM.md §1.10); fit(chain=True) reads the
    chain stack and `sm-dist status RUN` its queue of failed events. The policy allowed none of them."""
    from _iam_simulator import evaluate

    stack.deploy("sm-dist", session=aws_session, poll_seconds=0)
    document = _caller_policy(aws_session)[1]
    arn = "arn:aws:{}:us-east-1:123456789012:{}".format
    wanted = [("sagemaker:UpdateTrainingJob", arn("sagemaker", "training-job/run-1")),
              ("sagemaker:CreateTrainingJob", arn("sagemaker", "training-plan/p5-week")),
              ("sagemaker:CreateTrainingJob", arn("sagemaker", "reserved-capacity/rc-p5-1")),
              ("cloudformation:DescribeStacks", arn("cloudformation", "stack/sm-dist-chain/4f2c")),
              ("sqs:ReceiveMessage", arn("sqs", "sm-dist-chain-supervisor-failures"))]
    assert [(a, r) for a, r in wanted if evaluate([("caller", document)], a, r, {})[0] != "allowed"] == []
    assert evaluate([("caller", document)], "sagemaker:CreateTrainingJob", arn("sagemaker", "training-plan/p"),
                    {})[0] == "allowed"
    assert evaluate([("caller", document)], "cloudformation:DescribeStacks",
                    "arn:aws:cloudformation:eu-west-1:123456789012:stack/sm-dist-chain/4f2c", {})[0] == "implicitDeny"
    assert evaluate([("caller", document)], "sqs:ReceiveMessage", arn("sqs", "team-queue"), {})[0] == "implicitDeny"


def test_the_stacks_caller_policy_allows_every_call_fit_makes(aws_session: Any, config_home: Path,
                                                               project: Path) -> None:
    """The CallerPolicy output is what a person or CI role needs to launch with the stack: each API call fit
    makes is recorded and authorized as IAM would (action, resource ARN, the PassRole condition) against that
    policy alone. (moto's own enforcement checks non-S3 actions on resource "*" only, so it cannot judge a
    resource-scoped policy: PLATFORM §10.)"""
    from _iam_simulator import evaluate

    out = stack.deploy("sm-dist", {"Prefix": "team"}, session=aws_session, poll_seconds=0).outputs
    described, document = _caller_policy(aws_session)
    calls: list[tuple[str, dict[str, Any]]] = []

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        calls.append((f"{model.service_model.signing_name}.{model.name}", params))

    aws_session.events.register("before-parameter-build", record)
    job = _fit(aws_session, project)
    denied = [(op, action, resource) for op, params in calls
              for action, resource, context in _iam_requests(op, params, described["StackId"])
              if evaluate([("caller", document)], action, resource, context)[0] != "allowed"]
    assert {op for op, _ in calls} >= {"sagemaker.CreateTrainingJob", "s3.PutObject", "cloudformation.DescribeStacks",
                                       "iam.SimulatePrincipalPolicy"}
    assert denied == []
    assert evaluate([("caller", document)], "iam:PassRole", "arn:aws:iam::123456789012:role/admin",
                    {"iam:PassedToService": ["sagemaker.amazonaws.com"]})[0] == "implicitDeny"
    assert evaluate([("caller", document)], "iam:PassRole", out["role_arn"], {})[0] == "implicitDeny"
    assert job.plan.role_arn == out["role_arn"]


def test_mlflow_the_stacks_role_may_log_and_a_role_without_it_is_refused(
        aws_session: Any, config_home: Path, project: Path) -> None:
    """mlflow= adds the runtime's sagemaker-mlflow calls on the tracking server to what the role is asked
    (PLATFORM §1.15): the stack grants them for its account and region; TEST_ROLE_POLICY grants none."""
    from _project import create_test_role

    out = stack.deploy("sm-dist", session=aws_session, poll_seconds=0).outputs
    account = out["role_arn"].split(":")[4]
    arn = f"arn:aws:sagemaker:{aws_session.region_name}:{account}:mlflow-tracking-server/team"
    job = _fit(aws_session, project, mlflow=arn)
    sent = aws_session.client("sagemaker").describe_training_job(TrainingJobName=job.name)
    assert job.plan.request["MlflowConfig"]["MlflowResourceArn"] == arn and sent["RoleArn"] == out["role_arn"]
    role = create_test_role(aws_session, name="no-mlflow")
    with pytest.raises(ConfigError) as info:
        _fit(aws_session, project, role=role, infra_stack=None, mlflow=arn.replace("team", "other"))
    message = str(info.value)
    assert info.value.field == "role" and "sagemaker-mlflow:CreateRun" in message and "\n" not in message
    assert f"on {arn.replace('team', 'other')} (mlflow)" in message


def test_mlflow_app_the_role_is_asked_for_and_granted_callmlflowappapi(
        aws_session: Any, config_home: Path, project: Path) -> None:
    """Finding 11 of issue 39: an MLflow App is reached through sagemaker:CallMlflowAppApi on the app; the
    sagemaker-mlflow actions do not define the mlflow-app resource type (docs/PLATFORM.md §1.15). The stack
    granted those on mlflow-app/* and the check asked for them: a role without CallMlflowAppApi passed."""
    from _project import create_test_role

    out = stack.deploy("sm-dist", session=aws_session, poll_seconds=0).outputs
    account = out["role_arn"].split(":")[4]
    arn = f"arn:aws:sagemaker:{aws_session.region_name}:{account}:mlflow-app/app-team"
    job = _fit(aws_session, project, mlflow=arn)
    assert job.plan.request["MlflowConfig"]["MlflowResourceArn"] == arn
    tracking_only = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sagemaker-mlflow:*", "Resource": "arn:aws:sagemaker:*:*:mlflow-app/*"}]}
    from _project import TEST_ROLE_POLICY

    policy = json.loads(json.dumps(TEST_ROLE_POLICY))
    policy["Statement"] += tracking_only["Statement"]
    role = create_test_role(aws_session, policy, name="mlflow-actions-only")
    with pytest.raises(ConfigError) as info:
        _fit(aws_session, project, role=role, infra_stack=None, mlflow=arn)
    assert info.value.field == "role" and f"may not sagemaker:CallMlflowAppApi on {arn} (mlflow)" in str(info.value)
