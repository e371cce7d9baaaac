"""deploy / show / delete against moto's in-process CloudFormation, S3 and IAM.

moto applies a bucket's encryption and a role's trust policy and inline policies, so those are
checked on the deployed resources. What it ignores (docs/PLATFORM.md §5) is covered by test_template.py:
public access block, lifecycle, versioning, and the TLS-only bucket policy (moto 5.2.5 has no
CloudFormation support for AWS::S3::BucketPolicy and does not even list it as a resource).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from sm_dist.errors import ConfigError, InfraError
from sm_dist.provision import config, outputs, stack, teardown


def _deploy(session: Any, name: str = "sm-dist", lines: list[str] | None = None, **params: str) -> stack.StackInfo:
    sink = lines.append if lines is not None else None
    return stack.deploy(name, params, session=session, on_event=sink, poll_seconds=0)


def _policy(doc: Any) -> dict[str, Any]:
    """moto returns CloudFormation-made inline policies as a Python repr string (docs/PLATFORM.md §5)."""
    if isinstance(doc, dict):
        return doc
    try:
        return json.loads(doc)
    except ValueError:
        return ast.literal_eval(doc)


def _role_policies(session: Any, role_arn: str) -> dict[str, dict[str, Any]]:
    iam = session.client("iam")
    role = role_arn.rsplit("/", 1)[1]
    names = iam.list_role_policies(RoleName=role)["PolicyNames"]
    return {n: _policy(iam.get_role_policy(RoleName=role, PolicyName=n)["PolicyDocument"]) for n in names}


def test_deploy_creates_stack_with_outputs_and_records_them(aws_session: Any, config_home: Path) -> None:
    lines: list[str] = []
    info = _deploy(aws_session, lines=lines)
    assert info.status == "CREATE_COMPLETE" and info.changed and info.region == "us-east-1"
    bucket = info.outputs["bucket"]
    assert info.outputs["checkpoint_uri"] == f"s3://{bucket}/checkpoints"
    assert info.outputs["role_arn"].startswith("arn:aws:iam::123456789012:role/")
    assert any("CREATE_COMPLETE" in line for line in lines)
    recorded = json.loads((config_home / "infra.json").read_text())
    assert recorded["default"] == "sm-dist" and recorded["stacks"]["sm-dist"]["region"] == "us-east-1"
    assert outputs.resolve("sm-dist", session=aws_session) == info.outputs
    assert outputs.resolve() == info.outputs


def test_deployed_bucket_is_encrypted_with_s3_keys_by_default(aws_session: Any, config_home: Path) -> None:
    bucket = _deploy(aws_session).outputs["bucket"]
    rules = aws_session.client("s3").get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}


def test_deployed_bucket_uses_the_given_kms_key(aws_session: Any, config_home: Path) -> None:
    key = aws_session.client("kms").create_key()["KeyMetadata"]["Arn"]
    info = _deploy(aws_session, KmsKeyArn=key)
    rules = aws_session.client("s3").get_bucket_encryption(Bucket=info.outputs["bucket"])["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}
    kms = [s for s in _role_policies(aws_session, info.outputs["role_arn"])["sm-dist-bucket"]["Statement"] if s and s.get("Sid") == "UseBucketKey"]
    assert kms and kms[0]["Resource"] == key


def test_deployed_role_trusts_only_sagemaker(aws_session: Any, config_home: Path) -> None:
    role_arn = _deploy(aws_session).outputs["role_arn"]
    role = aws_session.client("iam").get_role(RoleName=role_arn.rsplit("/", 1)[1])["Role"]
    principals = [s["Principal"] for s in role["AssumeRolePolicyDocument"]["Statement"]]
    assert principals == [{"Service": "sagemaker.amazonaws.com"}]


def test_deployed_role_s3_access_is_limited_to_bucket_and_prefix(aws_session: Any, config_home: Path) -> None:
    info = _deploy(aws_session, BucketName="team-ckpt", Prefix="ml/run")
    policies = _role_policies(aws_session, info.outputs["role_arn"])
    assert set(policies) == {"sm-dist-bucket", "sm-dist-training"}  # no VPC policy by default
    s3 = [s for p in policies.values() for s in p["Statement"] if s and str(s["Action"]).count("s3:")]
    resources = {r for s in s3 for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])}
    assert resources == {"arn:aws:s3:::team-ckpt", "arn:aws:s3:::team-ckpt/ml/run/*"}
    listing = next(s for s in s3 if s["Action"] == "s3:ListBucket")
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["ml/run", "ml/run/*"]}}


def test_vpc_mode_adds_the_network_interface_policy(aws_session: Any, config_home: Path) -> None:
    info = _deploy(aws_session, VpcMode="true")
    vpc = _role_policies(aws_session, info.outputs["role_arn"])["sm-dist-vpc"]
    actions = {a for s in vpc["Statement"] for a in s["Action"]}
    assert "ec2:CreateNetworkInterface" in actions and "ec2:DeleteNetworkInterfacePermission" in actions


def test_update_changes_parameters_and_outputs(aws_session: Any, config_home: Path) -> None:
    _deploy(aws_session, Prefix="one")
    info = _deploy(aws_session, Prefix="two", CheckpointRetentionDays="7")
    assert info.status == "UPDATE_COMPLETE"
    assert info.parameters["Prefix"] == "two" and info.parameters["CheckpointRetentionDays"] == "7"
    assert info.outputs["checkpoint_uri"].endswith("/two/checkpoints")
    assert outputs.resolve()["checkpoint_uri"] == info.outputs["checkpoint_uri"]


def test_update_keeps_parameters_not_given_again(aws_session: Any, config_home: Path) -> None:
    _deploy(aws_session, Prefix="team", CheckpointRetentionDays="14")
    info = _deploy(aws_session, Versioning="true")
    assert (info.parameters["Prefix"], info.parameters["CheckpointRetentionDays"], info.parameters["Versioning"]) == ("team", "14", "true")
    assert info.outputs["checkpoint_uri"].endswith("/team/checkpoints")


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("sm-dist", {"BucketName": "Bad_Bucket"}, "--param BucketName"),
        ("sm-dist", {"BucketName": "192.168.1.1"}, "--param BucketName"),
        ("sm-dist", {"BucketName": "a..b"}, "--param BucketName"),
        ("sm-dist", {"Bucketname": "ok-name"}, "--param Bucketname"),
        ("sm-dist", {"CheckpointRetentionDays": "0"}, "--param CheckpointRetentionDays"),
        ("sm-dist", {"VpcMode": "yes"}, "--param VpcMode"),
        ("1-starts-with-digit", {}, "--stack-name"),
        ("has_underscore", {}, "--stack-name"),
    ],
)
def test_bad_input_is_rejected_before_anything_is_created(
    aws_session: Any, config_home: Path, name: str, params: dict[str, str], field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _deploy(aws_session, name, **params)
    assert info.value.field == field
    assert aws_session.client("cloudformation").describe_stacks()["Stacks"] == []
    assert aws_session.client("s3").list_buckets()["Buckets"] == []
    assert not (config_home / "infra.json").exists()


def test_show_prints_outputs_and_unknown_stack_is_config_error(aws_session: Any, config_home: Path) -> None:
    deployed = _deploy(aws_session)
    shown = stack.show("sm-dist", session=aws_session)
    assert shown.outputs == deployed.outputs and shown.status == "CREATE_COMPLETE"
    with pytest.raises(ConfigError, match="no such stack in region us-east-1"):
        stack.show("missing", session=aws_session)


def test_delete_refuses_a_non_empty_bucket_then_empties_it_when_asked(aws_session: Any, config_home: Path) -> None:
    bucket = _deploy(aws_session).outputs["bucket"]
    s3 = aws_session.client("s3")
    s3.put_object(Bucket=bucket, Key="checkpoints/step-1/model.pt", Body=b"weights")
    with pytest.raises(InfraError, match="not empty.*--empty-bucket"):
        teardown.delete("sm-dist", session=aws_session, poll_seconds=0)
    assert stack.show("sm-dist", session=aws_session).status == "CREATE_COMPLETE"
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 1

    lines: list[str] = []
    status = teardown.delete("sm-dist", session=aws_session, empty_bucket=True, on_event=lines.append, poll_seconds=0)
    assert status == "DELETE_COMPLETE" and any("DELETE_COMPLETE" in line for line in lines)
    assert bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert config.read()["stacks"] == {}
    with pytest.raises(ConfigError):
        outputs.resolve("sm-dist", session=aws_session)


def test_delete_of_an_empty_stack_needs_no_flag(aws_session: Any, config_home: Path) -> None:
    _deploy(aws_session)
    assert teardown.delete("sm-dist", session=aws_session, poll_seconds=0) == "DELETE_COMPLETE"


def test_delete_unknown_stack_is_config_error(aws_session: Any, config_home: Path) -> None:
    with pytest.raises(ConfigError, match="no such stack"):
        teardown.delete("missing", session=aws_session, poll_seconds=0)


def test_stacks_not_made_by_sm_dist_are_left_alone(aws_session: Any, config_home: Path) -> None:
    body = json.dumps({"Description": "someone else's", "Resources": {"B": {"Type": "AWS::S3::Bucket"}}})
    cfn = aws_session.client("cloudformation")
    cfn.create_stack(StackName="theirs", TemplateBody=body)
    for attempt in (lambda: _deploy(aws_session, "theirs"), lambda: teardown.delete("theirs", session=aws_session, poll_seconds=0)):
        with pytest.raises(ConfigError, match="not deployed from an sm_dist template"):
            attempt()
    after = cfn.describe_stacks(StackName="theirs")["Stacks"][0]
    assert after["StackStatus"] == "CREATE_COMPLETE" and after["Description"] == "someone else's"


def _pull_resources(session: Any, role_arn: str) -> list[str]:
    """The PullTrainingImage statement's repositories (moto renders an AWS::NoValue list entry as None, PLATFORM §5)."""
    stmt = next(s for s in _role_policies(session, role_arn)["sm-dist-training"]["Statement"]
                if s and s.get("Sid") == "PullTrainingImage")
    return [r for r in stmt["Resource"] if r is not None]


@pytest.mark.parametrize("region", ["us-east-1", "il-central-1", "ap-southeast-5"])
def test_deploy_lets_the_role_pull_the_image_tables_repositories_of_its_region(config_home: Path, aws_credentials: str,
                                                                               region: str) -> None:
    import boto3
    import moto

    from sm_dist.catalog.images import registry_account, repositories, training_image

    with moto.mock_aws():
        info = _deploy(boto3.Session(region_name=region))
        expected = [f"arn:aws:ecr:{region}:{registry_account(region)}:repository/{r}" for r in repositories()]
        assert _pull_resources(boto3.Session(region_name=region), info.outputs["role_arn"]) == expected
        assert info.outputs["image_repository_arns"] == ",".join(expected)
        assert outputs.resolve()["image_repository_arns"] == ",".join(expected)  # what fit reads
        default = training_image(None, region, gpu=True)
        assert f"arn:aws:ecr:{region}:{default.account}:repository/{default.repository}" in expected


def test_explicit_image_parameters_win_over_the_image_table(aws_session: Any, config_home: Path) -> None:
    info = _deploy(aws_session, ImageAccountId="111122223333", ImageRepositories="team/trainer")
    assert _pull_resources(aws_session, info.outputs["role_arn"]) == [
        "arn:aws:ecr:us-east-1:111122223333:repository/team/trainer"]
    assert info.parameters["ImageRepositories"] == "team/trainer"
