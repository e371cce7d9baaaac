"""remote_debug (RemoteDebugConfig) and infra_check (InfraCheckConfig) in the plan: the request, what SageMaker
refuses or cannot do with them, the default rule and the infra check's time in the estimate (docs/PLATFORM.md §1.16)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _project import ROLE_ARN

import sm_dist
from sm_dist import cli
from sm_dist.contract.sagemaker import ssm_command, ssm_target
from sm_dist.errors import ConfigError
from sm_dist.estimator.cost import INFRA_CHECK_SECONDS, infra_check_offered, infra_check_on

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CLOUD: dict[str, Any] = dict(instance_type="ml.p4d.24xlarge", instance_count=2, role=ROLE_ARN, region="us-east-1",
                             output_s3_uri="s3://team-bucket/out", max_runtime_s=3600, job_name="llm-debug-1")


def _plan(source_dir: Path, **settings: Any) -> Any:
    return sm_dist.plan("train.py", source_dir=str(source_dir), **{**CLOUD, **settings})


def test_remote_debug_sets_the_request_and_the_plan_shows_the_ssm_command(source_dir: Path) -> None:
    plan = _plan(source_dir, remote_debug=True)
    assert plan.request["RemoteDebugConfig"] == {"EnableRemoteDebug": True}
    assert ("aws ssm start-session --target sagemaker-training-job:llm-debug-1_algo-1" in str(plan)
            and "sm-dist debug llm-debug-1" in str(plan))
    assert "RemoteDebugConfig" not in _plan(source_dir).request
    assert "sm-dist debug" in plan._repr_html_()
    # rehearsed locally, the same command opens a shell in the emulated host; no infra check runs here
    text = str(sm_dist.plan("train.py", source_dir=str(source_dir), local=True, instance_type="ml.p4d.24xlarge",
                            instance_count=4, remote_debug=True, job_name="llm-debug-1"))
    assert "debug        sm-dist debug llm-debug-1 [--host algo-N]: a shell in the emulated host here (in the cloud" in text
    assert "(assumed); local mode runs no check" in text


def test_the_documented_ssm_target() -> None:
    assert ssm_target("training-job-test-remote-debug") == "sagemaker-training-job:training-job-test-remote-debug_algo-1"
    assert ssm_command("j", "algo-2", "eu-west-1") == ["aws", "ssm", "start-session", "--target",
                                                       "sagemaker-training-job:j_algo-2", "--region", "eu-west-1"]


def test_remote_debug_under_network_isolation_is_refused_in_one_line(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"remote_debug=True: SSM cannot reach a container under network isolation") as err:
        _plan(source_dir, remote_debug=True, network_isolation=True)
    assert "\n" not in str(err.value)


def test_remote_debug_in_a_vpc_warns_about_the_route_to_ssm(source_dir: Path) -> None:
    plan = _plan(source_dir, remote_debug=True, subnets=["subnet-0123456789abcdef0"],
                 security_group_ids=["sg-0123456789abcdef0"])
    assert any("ssmmessages" in w for w in plan.warnings)


def test_infra_check_defaults_on_from_four_gpu_instances(source_dir: Path) -> None:
    assert _plan(source_dir, instance_count=4).request["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert "InfraCheckConfig" not in _plan(source_dir, instance_count=3).request
    assert "InfraCheckConfig" not in _plan(source_dir, instance_count=4, infra_check=False).request
    assert _plan(source_dir, instance_count=1, infra_check=True).request["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert "infra check  SageMaker checks" in str(_plan(source_dir, instance_count=4))


def test_infra_check_is_refused_where_it_is_not_offered(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"infra_check=True: .*not ml.m5.xlarge: drop infra_check \(--no-infra-check\)"):
        _plan(source_dir, instance_type="ml.m5.xlarge", instance_count=1, infra_check=True)
    assert "InfraCheckConfig" not in _plan(source_dir, instance_type="ml.m5.xlarge", instance_count=8).request
    assert [infra_check_offered(k) for k in ("ml.p5.48xlarge", "ml.g5.xlarge", "ml.trn1.32xlarge", "ml.c5.xlarge",
                                             "ml.m5.large", "ml.graviton.x")] == [True, True, True, False, False, False]
    assert infra_check_on(None, "ml.p5.48xlarge", 4) and not infra_check_on(None, "ml.p5.48xlarge", 3)


def test_the_estimate_adds_the_infra_checks_time(source_dir: Path) -> None:
    sized = dict(params=1e8, tokens=1e9, strategy="ddp", instance_count=4)
    on, off = _plan(source_dir, **sized).sizing.row, _plan(source_dir, infra_check=False, **sized).sizing.row
    # (a restart after a failure runs it again: a hair more than once)
    assert on.hours - off.hours == pytest.approx(INFRA_CHECK_SECONDS / 3600, rel=1e-3)
    assert on.cost.sagemaker > off.cost.sagemaker


def test_a_setting_that_is_not_a_bool_is_refused(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match="remote_debug='yes': expected True or False"):
        _plan(source_dir, remote_debug="yes")
    with pytest.raises(ConfigError, match="infra_check=1: expected True or False"):
        _plan(source_dir, infra_check=1)


def test_the_cli_flags(source_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fit", "train.py", "--source-dir", str(source_dir), "--instance-type", "ml.p4d.24xlarge",
            "--instance-count", "4", "--role", ROLE_ARN, "--region", "us-east-1", "--output-s3-uri",
            "s3://team-bucket/out", "--max-runtime-s", "3600", "--dry-run", "--json"]
    assert cli.main([*argv, "--remote-debug", "--no-infra-check"]) == 0
    request = json.loads(capsys.readouterr().out)["request"]
    assert request["RemoteDebugConfig"] == {"EnableRemoteDebug": True} and "InfraCheckConfig" not in request
    assert cli.main([*argv, "--infra-check"]) == 0
    assert json.loads(capsys.readouterr().out)["request"]["InfraCheckConfig"] == {"EnableInfraCheck": True}


def test_the_role_check_asks_for_the_ssm_agents_actions(source_dir: Path) -> None:
    from sm_dist.cloud.role_check import SSM_AGENT, needs

    def wanted(plan: Any) -> bool:
        return any(need.actions == SSM_AGENT for need in needs(plan.request, "us-east-1", "123456789012"))

    assert wanted(_plan(source_dir, remote_debug=True)) and not wanted(_plan(source_dir))
