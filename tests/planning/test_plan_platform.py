"""Plans that real SageMaker would accept and run as planned: checkpoints the container can reach,
a multi-instance job that can resume, tags the API takes, every region (docs/PLATFORM.md §1.4–§1.7, §6)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _project import ROLE_ARN

import sm_dist

BASE = dict(instance_type="ml.p4d.24xlarge", instance_count=2, strategy="ddp", role=ROLE_ARN, region="us-east-1",
            output_s3_uri="s3://team-bucket/out", max_runtime_s=3600)


def _plan(source_dir: Path, **settings: object) -> sm_dist.Plan:
    return sm_dist.plan("train.py", source_dir=str(source_dir), **{**BASE, **settings})


def test_network_isolation_checkpoints_through_sagemakers_sync(source_dir: Path) -> None:
    plan = _plan(source_dir, network_isolation=True, checkpoint_s3_uri="s3://team-bucket/ckpt", max_restarts=0)
    assert plan.job_spec.checkpoint.mode == "sagemaker-sync"
    assert plan.request["CheckpointConfig"]["S3Uri"] == "s3://team-bucket/ckpt"
    assert plan.request["EnableNetworkIsolation"] is True


def test_a_vpc_job_uses_the_sync_and_says_what_the_subnets_need(source_dir: Path) -> None:
    plan = _plan(source_dir, subnets=["subnet-1"], security_group_ids=["sg-1"], checkpoint_s3_uri="s3://team-bucket/c")
    assert plan.job_spec.checkpoint.mode == "sagemaker-sync"
    assert any("S3 gateway endpoint or a NAT" in w for w in plan.warnings)


RUNTIME_SCRIPT = "import torch\nfrom sm_dist import runtime\n"


def test_direct_s3_stays_the_default_for_sm_dists_checkpointer(source_dir: Path) -> None:
    """A script using sm_dist's runtime, sm_dist's entrypoints and function entries write to S3 themselves."""
    (source_dir / "rt.py").write_text(RUNTIME_SCRIPT)
    uri = {"checkpoint_s3_uri": "s3://team-bucket/c"}
    assert sm_dist.plan("rt.py", source_dir=str(source_dir), **{**BASE, **uri}).job_spec.checkpoint.mode == "s3"
    assert sm_dist.plan("gpt.py", source_dir=str(source_dir), **{**BASE, **uri}).job_spec.checkpoint.mode == "s3"
    function = sm_dist.plan("pkg.mod:main", source_dir=str(source_dir), **{**BASE, **uri})
    assert function.job_spec.checkpoint.mode == "s3" and "CheckpointConfig" not in function.request


def test_a_script_of_its_own_gets_sagemakers_checkpoint_sync(source_dir: Path) -> None:
    """A script that never imports sm_dist saves into /opt/ml/checkpoints itself: only CheckpointConfig
    carries that folder to S3 and back (and restarted workers get it through sm_dist.container.worker)."""
    plan = _plan(source_dir, checkpoint_s3_uri="s3://team-bucket/c")
    assert plan.job_spec.checkpoint.mode == "sagemaker-sync"
    assert plan.request["CheckpointConfig"] == {"S3Uri": "s3://team-bucket/c", "LocalPath": "/opt/ml/checkpoints"}


def test_a_multi_instance_job_without_a_uri_checkpoints_under_its_output(source_dir: Path) -> None:
    plan = _plan(source_dir)
    ckpt = plan.job_spec.checkpoint
    assert ckpt.mode == "sagemaker-sync" and ckpt.uri == f"s3://team-bucket/out/{plan.job_name}/checkpoints"
    assert any("a job on 2 instances checkpoints to" in w for w in plan.warnings)
    single = _plan(source_dir, instance_count=1)  # one host's disk does resume an in-job restart
    assert single.job_spec.checkpoint.mode == "local" and single.job_spec.checkpoint.uri is None
    off = _plan(source_dir, checkpoint_mode="off")
    assert off.job_spec.checkpoint.mode == "off"


def test_a_local_multi_instance_plan_needs_no_uri(source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), instance_count=2, strategy="ddp", local=True)
    assert plan.job_spec.checkpoint.uri is None  # local mode syncs every host's folder to its own endpoint


def test_a_checkpoint_uri_the_tag_pattern_refuses_is_not_tagged(source_dir: Path) -> None:
    plan = _plan(source_dir, checkpoint_s3_uri="s3://team-bucket/runs/~alice/a,b")
    tags = {t["Key"]: t["Value"] for t in plan.request["Tags"]}
    assert "sm-dist:checkpoint-uri" not in tags and tags["sm-dist:strategy"] == "ddp"
    tagged = _plan(source_dir, checkpoint_s3_uri="s3://team-bucket/runs/alice")
    assert {t["Key"]: t["Value"] for t in tagged.request["Tags"]}["sm-dist:checkpoint-uri"] == "s3://team-bucket/runs/alice"


@pytest.mark.parametrize("region", ["eu-west-1", "eu-central-1", "ap-southeast-2"])
def test_any_region_plans_with_the_catalogs_prices_labelled(source_dir: Path, region: str) -> None:
    plan = _plan(source_dir, region=region, strategy="auto", params=1e9, tokens=1e9,
                 checkpoint_s3_uri="s3://team-bucket/c")
    image = plan.request["AlgorithmSpecification"]["TrainingImage"]
    assert f".dkr.ecr.{region}.amazonaws.com/pytorch:2.13-" in image
    assert any("prices are us-east-1's" in w and region in w for w in plan.warnings)
    assert plan.sizing.row is not None and plan.sizing.row.cost is not None  # an estimate, labelled, not a refusal


def test_a_local_run_on_another_torch_than_the_images_is_flagged(source_dir: Path) -> None:
    from importlib.metadata import version

    here = ".".join(version("torch").split(".")[:2])
    other = "2.12" if here != "2.12" else "2.13"
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), instance_count=2, strategy="ddp", local=True,
                        torch_version=other)
    assert any(f"the job's image has torch {other}: a local run does not test that version" in w for w in plan.warnings)
    same = sm_dist.plan("train.py", source_dir=str(source_dir), instance_count=2, strategy="ddp", local=True,
                        torch_version=here)
    assert not any("a local run does not test" in w for w in same.warnings)


def test_the_default_image_is_the_newest_torch_the_runtime_supports() -> None:
    from sm_dist.catalog.images import default_version
    from sm_dist.contract import torch_support

    assert torch_support.parse(default_version()) == torch_support.NEWEST
