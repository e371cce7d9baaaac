"""tensorboard=True: TensorBoardOutputConfig in the request, its constraints, and the plan's line (docs/PLATFORM.md §1.14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _project import ROLE_ARN

import sm_dist
from sm_dist import cli
from sm_dist.errors import ConfigError
from sm_dist.planning.constraints import check_request
from sm_dist.planning.reach import check_reach

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CLOUD = dict(instance_type="ml.p4d.24xlarge", instance_count=2, role=ROLE_ARN, region="us-east-1",
             output_s3_uri="s3://team-bucket/out", max_runtime_s=3600, job_name="tb-job-1")


def test_the_request_names_the_s3_path_under_the_jobs_output_and_leaves_local_path_to_the_service(
        source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), tensorboard=True, **CLOUD)
    # no LocalPath: CreateTrainingJob refuses one under /opt/ml, its own default included (§1.14)
    assert plan.request["TensorBoardOutputConfig"] == {"S3OutputPath": "s3://team-bucket/out/tb-job-1/tensorboard"}
    assert plan.tensorboard_uri == "s3://team-bucket/out/tb-job-1/tensorboard"
    off = sm_dist.plan("train.py", source_dir=str(source_dir), **CLOUD)
    assert "TensorBoardOutputConfig" not in off.request and off.tensorboard_uri is None


def test_a_chains_jobs_share_the_runs_folder(source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), tensorboard=True, chain=True,
                        checkpoint_s3_uri="s3://team-bucket/ckpt", **CLOUD)
    assert plan.job_name == "tb-job-1-1"
    assert plan.tensorboard_uri == "s3://team-bucket/out/tb-job-1/tensorboard"


def test_the_plan_says_where_it_goes_and_how_to_see_it(source_dir: Path) -> None:
    text = str(sm_dist.plan("train.py", source_dir=str(source_dir), tensorboard=True, **CLOUD))
    line = next(x for x in text.splitlines() if x.startswith("tensorboard"))
    assert "/opt/ml/output/tensorboard ($SM_TENSORBOARD_DIR) -> s3://team-bucket/out/tb-job-1/tensorboard" in line
    assert "tensorboard --logdir s3://team-bucket/out/tb-job-1/tensorboard" in line
    html = sm_dist.plan("train.py", source_dir=str(source_dir), tensorboard=True, **CLOUD)._repr_html_()
    assert "s3://team-bucket/out/tb-job-1/tensorboard" in html
    assert "tensorboard  " not in str(sm_dist.plan("train.py", source_dir=str(source_dir), **CLOUD))


def test_a_local_plan_syncs_to_its_own_endpoint(source_dir: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), tensorboard=True, local=True, job_name="tb-local-1")
    assert plan.tensorboard_uri == "s3://sm-dist-local/sm-dist/tb-local-1/tensorboard"
    assert "local mode syncs it" in str(plan)


def test_a_non_bool_is_one_line_naming_the_field(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match="tensorboard='yes': expected True or False"):
        sm_dist.plan("train.py", source_dir=str(source_dir), tensorboard="yes", **CLOUD)  # type: ignore[typeddict-item]


def test_an_s3_path_too_long_names_output_s3_uri() -> None:
    """S3OutputPath: at most 1024 characters and s3:// or https:// (botocore's S3Uri). In a plan the code
    channel's URI, one character longer, is refused first; the request's own path is checked all the same."""
    long = "s3://team-bucket/" + "p" * 1008
    with pytest.raises(ConfigError, match=r"output_s3_uri \(TensorBoardOutputConfig.S3OutputPath\).*at most 1024"):
        check_request({"TensorBoardOutputConfig": {"S3OutputPath": long}}, None)
    with pytest.raises(ConfigError, match=r"output_s3_uri \(TensorBoardOutputConfig.S3OutputPath\)='ftp://b/p'"):
        check_request({"TensorBoardOutputConfig": {"S3OutputPath": "ftp://b/p"}}, None)


@pytest.mark.parametrize("local_path", ["/opt/ml/output/tensorboard", "/tmp/tb", "/usr/local/nvidia/x", "/opt/ml"])
def test_a_reserved_local_path_is_refused(local_path: str) -> None:
    request = {"TensorBoardOutputConfig": {"S3OutputPath": "s3://b/p", "LocalPath": local_path}}
    with pytest.raises(ConfigError, match="refuses a TensorBoardOutputConfig.LocalPath under /opt/ml, /tmp"):
        check_request(request, None)


def test_a_local_path_elsewhere_goes_through() -> None:
    request = {"TensorBoardOutputConfig": {"S3OutputPath": "s3://b/p", "LocalPath": "/opt/mlx/tb"}}
    assert check_request(request, None)[0] == request


def test_an_infra_stacks_role_must_be_able_to_write_there() -> None:
    reach = {"bucket": "stack-bucket", "artifact_uri": "s3://stack-bucket/art"}
    request = {"OutputDataConfig": {"S3OutputPath": "s3://stack-bucket/art"},
               "TensorBoardOutputConfig": {"S3OutputPath": "s3://other-bucket/tb"}}
    with pytest.raises(ConfigError, match="tensorboard='s3://other-bucket/tb': the role of infra stack st may write only"):
        check_reach(request, reach, "st")
    request["TensorBoardOutputConfig"] = {"S3OutputPath": "s3://stack-bucket/art/job/tensorboard"}
    check_reach(request, reach, "st")


def test_the_cli_flag(source_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fit", "train.py", "--source-dir", str(source_dir), "--instance-type", CLOUD["instance_type"],
            "--role", ROLE_ARN, "--region", "us-east-1", "--output-s3-uri", "s3://team-bucket/out",
            "--max-runtime-s", "3600", "--job-name", "tb-job-1", "--tensorboard", "--dry-run", "--json"]
    assert cli.main(argv) == 0
    request = json.loads(capsys.readouterr().out)["request"]
    assert request["TensorBoardOutputConfig"] == {"S3OutputPath": "s3://team-bucket/out/tb-job-1/tensorboard"}
