"""From nothing to a (moto) job: `sm-dist infra deploy`, then `fit` with the stack's outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sm_dist.provision import stack

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _settings(project: Path) -> dict[str, Any]:
    return dict(source_dir=str(project), instance_type="ml.g5.2xlarge", instance_count=2, strategy="ddp",
                checkpoint_mode="auto")


def test_dry_run_uses_the_named_stacks_outputs(aws_session: Any, config_home: Path, project: Path) -> None:
    import sm_dist

    out = stack.deploy("sm-dist", {"Prefix": "team"}, session=aws_session, poll_seconds=0).outputs
    plan = sm_dist.plan("train.py", infra_stack="sm-dist", session=aws_session, **_settings(project))
    assert plan.role_arn == out["role_arn"]
    assert plan.code_s3_uri.startswith(out["artifact_uri"] + "/")
    assert plan.checkpoint_uri.startswith(out["checkpoint_uri"] + "/")
    assert aws_session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert aws_session.client("s3").list_objects_v2(Bucket=out["bucket"])["KeyCount"] == 0


def test_deploy_then_fit_launches_with_the_recorded_stack(aws_session: Any, config_home: Path, project: Path) -> None:
    import sm_dist

    out = stack.deploy("sm-dist", session=aws_session, poll_seconds=0).outputs
    job = sm_dist.fit("train.py", wait=False, infra_stack="", session=aws_session, **_settings(project))
    desc = aws_session.client("sagemaker").describe_training_job(TrainingJobName=job.name)
    assert desc["RoleArn"] == out["role_arn"]
    assert desc["OutputDataConfig"]["S3OutputPath"].startswith(out["artifact_uri"])
    keys = [o["Key"] for o in aws_session.client("s3").list_objects_v2(Bucket=out["bucket"])["Contents"]]
    assert any(k.endswith("/train.py") for k in keys)


def test_deploy_then_fit_without_role_or_stack_uses_the_recorded_stack(
    aws_session: Any, config_home: Path, project: Path
) -> None:
    """A user who ran `sm-dist infra deploy` never pastes an ARN: no role and no infra_stack suffice."""
    import sm_dist

    out = stack.deploy("sm-dist", session=aws_session, poll_seconds=0).outputs
    plan = sm_dist.plan("train.py", session=aws_session, **_settings(project))
    assert plan.role_arn == out["role_arn"]
    assert plan.code_s3_uri.startswith(out["artifact_uri"] + "/")


def _nothing_created(session: Any, bucket: str) -> bool:
    jobs = session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    return jobs == [] and session.client("s3").list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_an_image_the_stacks_role_may_not_pull_is_refused_before_the_upload(aws_session: Any, config_home: Path,
                                                                            project: Path) -> None:
    import sm_dist
    from sm_dist.errors import ConfigError

    out = stack.deploy("sm-dist", {"ImageRepositories": "team/trainer"}, session=aws_session, poll_seconds=0).outputs
    with pytest.raises(ConfigError) as info:
        sm_dist.fit("train.py", wait=False, infra_stack="sm-dist", session=aws_session, **_settings(project))
    assert info.value.field == "image_uri" and "pytorch:2.13-cu133" in str(info.value.value)
    assert "sm-dist infra deploy --stack-name sm-dist" in str(info.value) and "--image-uri" in str(info.value)
    assert _nothing_created(aws_session, out["bucket"])
    own = "763104351884.dkr.ecr.us-east-1.amazonaws.com/team/trainer:1.0"  # in the repository the role may pull
    plan = sm_dist.plan("train.py", infra_stack="sm-dist", session=aws_session, image_uri=own,
                       **_settings(project))
    assert plan.request["AlgorithmSpecification"]["TrainingImage"] == own


def test_a_stack_recorded_before_its_image_permissions_were_gets_a_warning(aws_session: Any, config_home: Path,
                                                                         project: Path) -> None:
    import sm_dist
    from sm_dist.provision import config

    out = stack.deploy("old", session=aws_session, poll_seconds=0).outputs
    entry = config.read()["stacks"]["old"]
    del entry["image_repository_arns"]  # what an older sm-dist recorded
    config.record("old", entry)
    plan = sm_dist.plan("train.py", infra_stack="", session=aws_session, **_settings(project))
    assert any("infra stack old does not say which images" in w and "redeploy" in w for w in plan.warnings)
    assert plan.role_arn == out["role_arn"]
