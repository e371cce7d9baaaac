"""Stack names and --param values are checked against the template, before any AWS call."""

from __future__ import annotations

import pytest

from sm_dist.errors import ConfigError
from sm_dist.provision import params


@pytest.mark.parametrize("name", ["sm-dist", "A", "team-42-ckpt", "x" * 128])
def test_valid_stack_names(name: str) -> None:
    assert params.check_stack_name(name) == name


@pytest.mark.parametrize("name", ["", "-lead", "9lives", "with space", "under_score", "x" * 129, None])
def test_invalid_stack_names(name: object) -> None:
    with pytest.raises(ConfigError) as info:
        params.check_stack_name(name)
    assert info.value.field == "--stack-name" and info.value.value == name


def test_parse_assignments_keeps_everything_after_the_first_equals() -> None:
    assert params.parse_assignments(["Prefix=a=b", "BucketName="]) == {"Prefix": "a=b", "BucketName": ""}


@pytest.mark.parametrize("items", [["NoEquals"], ["=value"], ["Prefix=a", "Prefix=b"]])
def test_parse_assignments_rejects_malformed(items: list[str]) -> None:
    with pytest.raises(ConfigError, match="--param"):
        params.parse_assignments(items)


@pytest.mark.parametrize(
    "bucket",
    ["my-checkpoints", "a.b.c", "abc", "a" * 63, "team-2026.ckpt", ""],
)
def test_bucket_names_s3_accepts(bucket: str) -> None:
    assert params.check_parameters({"BucketName": bucket}) == {"BucketName": bucket}


@pytest.mark.parametrize(
    "bucket",
    ["ab", "a" * 64, "My-Bucket", "under_score", "-lead", "trail-", "a..b", "a.-b", "10.0.0.1",
     "xn--punycode", "sthree-x", "name-s3alias", "name--ol-s3"],
)
def test_bucket_names_s3_rejects(bucket: str) -> None:
    with pytest.raises(ConfigError) as info:
        params.check_parameters({"BucketName": bucket})
    assert info.value.field == "--param BucketName"
    assert "valid S3 bucket name" in str(info.value)


def test_unknown_key_suggests_the_close_one() -> None:
    with pytest.raises(ConfigError, match="did you mean CheckpointRetentionDays"):
        params.check_parameters({"CheckpointRetentionDay": "3"})


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("CheckpointRetentionDays", "0", "1 to 3650"),
        ("CheckpointRetentionDays", "3651", "1 to 3650"),
        ("CheckpointRetentionDays", "ten", "1 to 3650"),
        ("Versioning", "TRUE", "['true', 'false']"),
        ("KmsKeyArn", "alias/my-key", "KMS key ARN"),
        ("Prefix", "/leading", "no leading or trailing /"),
        ("ImageAccountId", "12345", "12-digit"),
        ("ImageRepositories", "a,b,c,d", "one to three ECR repository names"),
        ("ImageRepositories", "pytorch,", "one to three ECR repository names"),
    ],
)
def test_values_checked_against_template_constraints(key: str, value: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        params.check_parameters({key: value})
    assert fragment in str(info.value) and info.value.value == value


def test_good_values_pass() -> None:
    good = {"CheckpointRetentionDays": "90", "Versioning": "true", "Prefix": "team/run-1",
            "KmsKeyArn": "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            "VpcMode": "true", "ImageRepositories": "team/trainer,pytorch*"}
    assert params.check_parameters(good) == good
