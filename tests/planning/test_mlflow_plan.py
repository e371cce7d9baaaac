"""`mlflow=`: the request's MlflowConfig, the script's MLFLOW_* variables, the checks and the plan's report
(docs/PLATFORM.md §1.15)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from _project import ROLE_ARN

import sm_dist
from sm_dist.errors import ConfigError
from sm_dist.planning.constraints import check_mlflow_region, check_request
from sm_dist.planning.mlflow_setting import MlflowSettings, MlflowTarget, parse_mlflow

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ARN = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team"
APP = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-ABC123"
CLOUD = dict(instance_type="ml.g5.12xlarge", role=ROLE_ARN, output_s3_uri="s3://out-bucket/runs", region="us-east-1",
             max_runtime_s=3600)


def _plan(source_dir: Path, **settings: Any) -> Any:
    return sm_dist.plan("train.py", source_dir=str(source_dir), **{**CLOUD, **settings})


def test_an_arn_sets_mlflowconfig_and_the_scripts_environment(source_dir: Path) -> None:
    plan = _plan(source_dir, mlflow=ARN, job_name="cnn-mlflow-1")
    assert plan.request["MlflowConfig"] == {"MlflowResourceArn": ARN, "MlflowExperimentName": "sm-dist",
                                            "MlflowRunName": "cnn-mlflow-1"}
    env = plan.request["Environment"]
    assert env["MLFLOW_TRACKING_URI"] == ARN and env["MLFLOW_EXPERIMENT_NAME"] == "sm-dist"
    assert env["MLFLOW_RUN_NAME"] == "cnn-mlflow-1" and env["SM_DIST_MLFLOW"] == "1"
    assert dict(plan.environment) == env


def test_names_from_the_dict_and_the_users_environment_wins(source_dir: Path) -> None:
    settings: MlflowSettings = {"arn": APP, "experiment": "resnet", "run": "lr-3e-4"}
    plan = _plan(source_dir, mlflow=settings, environment={"MLFLOW_EXPERIMENT_NAME": "mine"})
    assert plan.request["MlflowConfig"] == {"MlflowResourceArn": APP, "MlflowExperimentName": "resnet",
                                            "MlflowRunName": "lr-3e-4"}
    assert plan.environment["MLFLOW_EXPERIMENT_NAME"] == "mine"  # environment= is the user's last word
    assert plan.environment["MLFLOW_RUN_NAME"] == "lr-3e-4"


def test_without_mlflow_nothing_is_set(source_dir: Path) -> None:
    plan = _plan(source_dir)
    assert "MlflowConfig" not in plan.request
    assert not any(k.startswith("MLFLOW_") or k == "SM_DIST_MLFLOW" for k in plan.environment)
    assert "mlflow" not in str(plan)


@pytest.mark.parametrize("value, field", [
    ("arn:aws:sagemaker:us-east-1:1234:mlflow-tracking-server/team", "mlflow"),  # an account has 12 digits
    ("arn:aws:sagemaker:us-east-1:123456789012:training-job/team", "mlflow"),
    ("arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/", "mlflow"),
    ("team", "mlflow"),
    ({"arn": ARN, "experimnt": "x"}, "mlflow"),
    ({"experiment": "x"}, "mlflow"),
    (["arn"], "mlflow"),
    ({"arn": ARN, "run": "r" * 257}, "mlflow.run"),
    ({"arn": ARN, "experiment": ""}, "mlflow.experiment"),
    ("arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/" + "t" * 2048, "mlflow"),
])
def test_what_aws_or_the_plugin_would_refuse_is_one_line(value: object, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_mlflow(value)
    assert caught.value.field == field and "\n" not in str(caught.value)


def test_a_misspelled_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'experimnt': the keys are 'arn', 'experiment' and 'run'$"):
        parse_mlflow({"arn": ARN, "experimnt": "x"})


def test_a_tracking_server_in_another_region_is_refused(source_dir: Path) -> None:
    other = ARN.replace("us-east-1", "eu-west-1")
    with pytest.raises(ConfigError, match="the tracking server is in eu-west-1, the job in us-east-1") as caught:
        _plan(source_dir, mlflow=other)
    assert caught.value.field == "mlflow"
    check_mlflow_region({"MlflowConfig": {"MlflowResourceArn": ARN}}, "us-east-1")  # the same region passes
    check_mlflow_region({}, "us-east-1")


def test_a_local_plan_takes_any_regions_server(source_dir: Path) -> None:
    """A local plan's region is a label and its MLflow a file store: the region is not compared."""
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), local=True, mlflow=ARN.replace("us-east-1", "eu-west-1"))
    assert plan.request["MlflowConfig"]["MlflowResourceArn"].startswith("arn:aws:sagemaker:eu-west-1")
    assert "local mode logs to a file store" in str(plan)


def test_the_service_models_pattern_is_checked_on_the_request() -> None:
    """The service model's own rule (docs/PLATFORM.md §1.15), for a MlflowConfig built past parse_mlflow."""
    request = {"MlflowConfig": {"MlflowResourceArn": "arn:aws:sagemaker:us-east-1:123456789012:tracking/x"}}
    with pytest.raises(ConfigError, match="must match") as caught:
        check_request(request, None)
    assert caught.value.field == "mlflow (MlflowConfig.MlflowResourceArn)"
    with pytest.raises(ConfigError, match="at most 256") as caught:
        check_request({"MlflowConfig": {"MlflowResourceArn": ARN, "MlflowRunName": "r" * 257}}, None)
    assert caught.value.field == "mlflow (MlflowConfig.MlflowRunName)"


def test_the_report_names_the_server_experiment_and_run(source_dir: Path) -> None:
    plan = _plan(source_dir, mlflow={"arn": ARN, "experiment": "cnn"}, job_name="cnn-7")
    line = next(line for line in str(plan).splitlines() if line.startswith("mlflow"))
    assert ARN in line and "experiment cnn, run cnn-7" in line and "sagemaker-mlflow" in line
    assert "experiment cnn, run cnn-7" in plan._repr_html_()


def test_the_target_is_a_value() -> None:
    target = parse_mlflow({"arn": ARN, "run": "r1"})
    assert target == MlflowTarget(ARN, None, "r1") and parse_mlflow(target) is target and parse_mlflow(None) is None
    assert target.named("exp", "job").to_dict() == {"arn": ARN, "experiment": "exp", "run": "r1"}


def test_cli_flags_join_the_arn(source_dir: Path) -> None:
    from sm_dist.launch.cli import _mlflow_names

    settings: dict[str, Any] = {"mlflow": ARN}
    _mlflow_names(settings, argparse.Namespace(mlflow_experiment="exp", mlflow_run=None))
    assert settings["mlflow"] == {"arn": ARN, "experiment": "exp"}
    settings = {"mlflow": {"arn": ARN, "run": "file-run"}}  # a config file's dict, the flag wins
    _mlflow_names(settings, argparse.Namespace(mlflow_experiment=None, mlflow_run="flag-run"))
    assert settings["mlflow"] == {"arn": ARN, "run": "flag-run"}
    with pytest.raises(ConfigError, match="add --mlflow ARN") as caught:
        _mlflow_names({}, argparse.Namespace(mlflow_experiment=None, mlflow_run="r"))
    assert caught.value.field == "--mlflow-run"
