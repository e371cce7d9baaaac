"""resolve(): outputs of a stack deployed to moto, or of the config file deploy wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sm_dist.errors import ConfigError
from sm_dist.provision import config, outputs, template


def _create(session: Any, name: str, **params: str) -> None:
    session.client("cloudformation").create_stack(
        StackName=name,
        TemplateBody=template.template_text(),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()],
        Capabilities=["CAPABILITY_IAM"],
    )


def test_resolve_named_stack_reads_cloudformation_outputs(aws_session: Any) -> None:
    _create(aws_session, "sm-dist")
    got = outputs.resolve("sm-dist", session=aws_session)
    bucket = aws_session.client("s3").list_buckets()["Buckets"][0]["Name"]
    role = aws_session.client("iam").list_roles()["Roles"][0]["Arn"]
    assert got == {
        "role_arn": role,
        "bucket": bucket,
        "checkpoint_uri": f"s3://{bucket}/checkpoints",
        "artifact_uri": f"s3://{bucket}",
        # the template's default repositories (deploy passes the image table's, test_deploy.py)
        "image_repository_arns": "arn:aws:ecr:us-east-1:763104351884:repository/pytorch,"
                                 "arn:aws:ecr:us-east-1:763104351884:repository/pytorch-training",
        # what else the role may reach: nothing by default (fit's reach check reads these)
        "kms_key_arn": "none", "vpc_mode": "false", "data_buckets": "none",
        # what whoever runs fit needs (README "Provision")
        "caller_policy_arn": got["caller_policy_arn"],
    }
    assert got["caller_policy_arn"].startswith("arn:aws:iam::123456789012:policy/")


def test_resolve_honours_bucket_name_and_prefix(aws_session: Any) -> None:
    _create(aws_session, "team", BucketName="team-ckpt", Prefix="ml/run")
    got = outputs.resolve("team", session=aws_session)
    assert got["bucket"] == "team-ckpt"
    assert got["checkpoint_uri"] == "s3://team-ckpt/ml/run/checkpoints"
    assert got["artifact_uri"] == "s3://team-ckpt/ml/run"


def test_resolve_unknown_stack_names_stack_and_region(aws_session: Any) -> None:
    with pytest.raises(ConfigError) as info:
        outputs.resolve("nope", session=aws_session)
    assert info.value.field == "infra_stack" and info.value.value == "nope"
    assert "us-east-1" in str(info.value) and "sm-dist infra deploy" in str(info.value)


def test_resolve_rejects_a_stack_without_our_outputs(aws_session: Any) -> None:
    body = json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket"}}})
    aws_session.client("cloudformation").create_stack(StackName="plain", TemplateBody=body)
    with pytest.raises(ConfigError, match="role_arn"):
        outputs.resolve("plain", session=aws_session)


def test_from_stack_rejects_failed_stack() -> None:
    stack = {"StackName": "x", "StackStatus": "ROLLBACK_COMPLETE", "Outputs": []}
    with pytest.raises(ConfigError, match="ROLLBACK_COMPLETE"):
        outputs.from_stack(stack)


class _NoAws:
    """A session that fails the test if anything asks it for a client."""

    def client(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("resolve(None) must not call AWS")


def test_resolve_without_name_reads_the_config_file(config_home: Path) -> None:
    entry = {"role_arn": "arn:aws:iam::1:role/r", "bucket": "b", "checkpoint_uri": "s3://b/checkpoints", "region": "eu-west-1"}
    config.record("first", {**entry, "bucket": "old"})
    config.record("second", entry)
    got = outputs.resolve(session=_NoAws())
    assert got == {"role_arn": "arn:aws:iam::1:role/r", "bucket": "b", "checkpoint_uri": "s3://b/checkpoints"}


def test_resolve_without_name_or_config_explains(config_home: Path) -> None:
    with pytest.raises(ConfigError) as info:
        outputs.resolve(session=_NoAws())
    assert str(config_home) in str(info.value) and "sm-dist infra deploy" in str(info.value)


def test_config_record_and_forget_move_the_default(config_home: Path) -> None:
    config.record("a", {"bucket": "x"})
    config.record("b", {"bucket": "y"})
    assert config.read()["default"] == "b"
    assert config.forget("b") is True
    assert config.read() == {"version": 1, "default": "a", "stacks": {"a": {"bucket": "x"}}}
    assert config.forget("b") is False


def test_config_path_defaults_to_dot_config(tmp_path: Path) -> None:
    assert config.config_path({"HOME": str(tmp_path)}) == tmp_path / ".config" / "sm_dist" / "infra.json"
    assert config.config_path({"SM_DIST_CONFIG_HOME": "/x"}) == Path("/x/infra.json")


def test_corrupt_config_is_a_config_error(config_home: Path) -> None:
    config_home.mkdir()
    (config_home / "infra.json").write_text("{not json")
    with pytest.raises(ConfigError, match="unreadable"):
        outputs.resolve()
