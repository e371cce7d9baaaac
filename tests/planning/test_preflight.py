"""Every preflight rule refuses a bad call before anything is uploaded or created (moto)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _project import CKPT_BUCKET, ROLE_ARN, aws_state

import sm_dist
from sm_dist.errors import CatalogError, ConfigError, DoesNotFitError, SmDistError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GOOD = dict(instance_type="ml.p4d.24xlarge", instance_count=2, strategy="ddp", role=ROLE_ARN,
            checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/run", max_runtime_s=3600)

CASES = {
    "unknown instance": ({"instance_type": "ml.p4d.24xlarg"}, CatalogError, "did you mean 'ml.p4d.24xlarge'"),
    "not CUDA": ({"instance_type": "ml.trn1.32xlarge"}, ConfigError, "not CUDA"),
    "dp on two instances": ({"strategy": "dp"}, ConfigError, "one instance"),
    "spot without checkpoints": ({"spot": True, "checkpoint_s3_uri": None}, ConfigError, "checkpoint_s3_uri"),
    "spot with local checkpoints": ({"spot": True, "checkpoint_mode": "local"}, ConfigError, "durable"),
    "MaxWait below MaxRuntime": ({"spot": True, "max_wait_s": 60}, ConfigError, ">= MaxRuntime"),
    "MaxWait without spot": ({"max_wait_s": 7200}, ConfigError, "spot"),
    "model does not fit": ({"params": 3e9}, DoesNotFitError, "strategies that fit: "),
    "auto without model size": ({"strategy": "auto"}, ConfigError, "model size"),
    "secret hyperparameter": ({"hyperparameters": {"hf_token": "abc"}}, ConfigError, "Secrets Manager"),
    "secret-looking key": ({"hyperparameters": {"wandb_api_key": "abc"}}, ConfigError, "secret"),
    "NUL in a value": ({"hyperparameters": {"note": "a\0b"}}, ConfigError, "NUL character"),
    "reserved env": ({"environment": {"PYTHONPATH": "/x"}}, ConfigError, "set by sm_dist"),
    "budget too small": ({"max_cost_usd": 0.01}, ConfigError, "buys only"),
    "missing entry": ({"entry": "trian.py"}, ConfigError, "no such file"),
    "checkpoint bucket missing": ({"checkpoint_s3_uri": "s3://no-such-bucket/x"}, ConfigError, "does not exist"),
    "checkpoint bucket elsewhere": ({"checkpoint_s3_uri": "s3://eu-bucket/x"}, ConfigError, "is in eu-west-1"),
    "data bucket elsewhere": ({"inputs": {"train": "s3://eu-bucket/data"}}, ConfigError, "is in eu-west-1"),
    "data bucket missing": ({"inputs": {"train": "s3://no-such-bucket/data"}}, ConfigError, "does not exist"),
    "no role anywhere": ({"role": None}, ConfigError, "role="),
    # the API's limits (docs/PLATFORM.md §1.5), refused before the upload rather than by CreateTrainingJob
    "env value too long": ({"environment": {"NOTE": "x" * 513}}, ConfigError, "longer than 512 chars"),
    "too many tags": ({"tags": {f"t{i}": "v" for i in range(50)}}, ConfigError, "tags (SageMaker takes 50"),
    "tag value off the pattern": ({"tags": {"team": "a,b"}}, ConfigError, "a tag value is"),
    "direct S3 in network isolation": ({"network_isolation": True, "checkpoint_mode": "s3"}, ConfigError,
                                       "cannot reach S3; use checkpoint_mode='sagemaker-sync'"),
    "host-local checkpoints on 2 instances": ({"checkpoint_mode": "local"}, ConfigError, "each host's shards"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rule_refuses_before_creating(aws: str, source_dir: Path, case: str) -> None:
    import boto3

    boto3.client("s3", region_name="eu-west-1").create_bucket(
        Bucket="eu-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    before = aws_state()
    overrides, error, text = CASES[case]
    settings = {**GOOD, "source_dir": str(source_dir), **overrides}
    entry = settings.pop("entry", "train.py")
    with pytest.raises(error) as caught:
        sm_dist.fit(entry, wait=False, **settings)
    assert text in str(caught.value)
    assert isinstance(caught.value, SmDistError)
    assert aws_state() == before  # no bucket, no object, no job


def test_good_call_does_create(aws: str, source_dir: Path) -> None:
    """The same baseline without a mistake goes through: the cases above fail for their rule."""
    job = sm_dist.fit("train.py", wait=False, source_dir=str(source_dir), **GOOD)
    buckets, jobs, objects = aws_state()
    assert jobs == [job.name] and objects == len(job.plan.bundle.files)


@pytest.mark.parametrize(("name", "secret"), [
    ("hf_token", True), ("wandb_api_key", True), ("db-password", True), ("client_secret", True),
    ("AWS_SECRET_ACCESS_KEY", True), ("githubtoken", True), ("max_tokens", False), ("tokenizer", False),
    ("keyframes", False), ("lr", False),
])
def test_secret_names(name: str, secret: bool) -> None:
    from sm_dist.planning.preflight import looks_secret

    assert looks_secret(name) is secret


def test_structured_values_are_checked_as_the_json_they_become() -> None:
    from sm_dist.planning.preflight import check_hyperparameters

    check_hyperparameters({"layers": [1, 2], "opt": {"betas": [0.9, 0.95]}, "name": "it's run-1"})
    with pytest.raises(ConfigError, match="hyperparameters.opt"):
        check_hyperparameters({"opt": {"note": "x" * 2500}})  # 2500 characters, and more as JSON
