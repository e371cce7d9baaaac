"""`sm-dist infra ...`: in-process against moto, and as a subprocess against moto's server
through AWS_ENDPOINT_URL. Errors are one line and an exit code, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sm_dist import cli
from sm_dist.provision import template


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["infra", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_template_prints_the_shipped_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(capsys, "template")
    assert code == 0 and out == template.template_text()
    code, out, _ = _main(capsys, "template", "--list")
    assert code == 0 and "sm-dist.yaml" in out.split()


def test_deploy_show_delete_round_trip(aws_session: Any, config_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "deploy", "--stack-name", "cli-stack", "--param", "Prefix=team")
    assert code == 0, err
    assert "stack cli-stack (us-east-1): CREATE_COMPLETE" in out and "/team/checkpoints" in out
    assert "CREATE_COMPLETE" in err  # progress lines
    assert str(config_home / "infra.json") in out

    code, out, _ = _main(capsys, "show", "cli-stack", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["status"] == "CREATE_COMPLETE" and shown["parameters"]["Prefix"] == "team"

    aws_session.client("s3").put_object(Bucket=shown["outputs"]["bucket"], Key="team/checkpoints/x", Body=b"1")
    code, out, err = _main(capsys, "delete", "cli-stack")
    assert code == 1 and err.count("\n") == 1 and "--empty-bucket" in err and "Traceback" not in err
    code, out, err = _main(capsys, "delete", "cli-stack", "--empty-bucket")
    assert code == 0 and "DELETE_COMPLETE" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["deploy", "--stack-name", "s", "--param", "BucketName=Not_Valid"], "--param BucketName='Not_Valid'"),
        (["deploy", "--stack-name", "s", "--param", "Nope=1"], "--param Nope='1': unknown parameter"),
        (["deploy", "--stack-name", "s", "--param", "novalue"], "use KEY=VALUE"),
        (["show", "missing"], "stack='missing': no such stack in region us-east-1"),
        (["delete", "missing"], "stack='missing': no such stack"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    aws_session: Any, config_home: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    code, out, err = _main(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("sm-dist infra: error: ") and err.count("\n") == 1 and fragment in err
    assert aws_session.client("cloudformation").describe_stacks()["Stacks"] == []


def _sub(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sm_dist.cli", "infra", *args], capture_output=True, text=True, env=env)


def _aws_env(endpoint: str, config_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SM_DIST_"))}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1",
               AWS_ENDPOINT_URL=endpoint, SM_DIST_CONFIG_HOME=str(config_home))
    return env


@pytest.mark.slow
def test_subprocess_honours_aws_endpoint_url(moto_endpoint: str, config_home: Path) -> None:
    env = _aws_env(moto_endpoint, config_home)
    proc = _sub("deploy", "--stack-name", "endpoint-stack", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "CREATE_COMPLETE" in proc.stderr and "Found credentials" not in proc.stderr  # no botocore chatter
    deployed = json.loads(proc.stdout)
    proc = _sub("show", "endpoint-stack", "--json", env=env)
    assert proc.returncode == 0 and json.loads(proc.stdout)["outputs"] == deployed["outputs"]
    recorded = json.loads((config_home / "infra.json").read_text())
    assert recorded["stacks"]["endpoint-stack"]["bucket"] == deployed["outputs"]["bucket"]
    proc = _sub("delete", "endpoint-stack", env=env)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_subprocess_errors_never_print_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SM_DIST_"))}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    proc = _sub("show", "sm-dist", env=env)  # no region anywhere
    assert proc.returncode == 2 and "AWS_REGION" in proc.stderr and "Traceback" not in proc.stderr
    env.update(AWS_REGION="us-east-1", AWS_ENDPOINT_URL="http://127.0.0.1:9")  # nothing listens on port 9
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_MAX_ATTEMPTS="1")
    proc = _sub("show", "sm-dist", env=env)
    assert proc.returncode == 1 and "cannot reach" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_infra_help_and_provision_imports_load_nothing_heavy() -> None:
    code = (
        "import sys, sm_dist.cli\n"
        "import sm_dist.provision.outputs, sm_dist.provision.stack, sm_dist.provision.teardown\n"
        "try:\n    sm_dist.cli.main(['infra', 'deploy', '--help'])\nexcept SystemExit:\n    pass\n"
        "import json; print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out.strip().splitlines()[-1])
    assert not [m for m in loaded if m.split(".")[0] in ("boto3", "botocore", "yaml", "torch", "sagemaker")]


@pytest.mark.slow
def test_cli_from_nothing_to_a_launched_job(moto_endpoint: str, config_home: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`sm-dist infra deploy`, then `sm-dist fit --infra-stack NAME` against moto's server, with fit's role
    check on (IAM's simulator answered in the server's threads, tests/_iam_simulator.py)."""
    import _iam_simulator

    _iam_simulator.install(monkeypatch)
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('[sm_dist] step=1 loss=0.5')\n")
    env = _aws_env(moto_endpoint, config_home)
    env.update(AWS_DEFAULT_REGION="us-east-1")
    proc = _sub("deploy", "--stack-name", "e2e-stack", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["outputs"]
    fit = subprocess.run(
        [sys.executable, "-m", "sm_dist.cli", "fit", "train.py", "--source-dir", str(project), "--instance-type",
         "ml.g5.2xlarge", "--instance-count", "2", "--strategy", "ddp", "--infra-stack", "e2e-stack"],
        capture_output=True, text=True, env=env,
    )
    assert fit.returncode == 0, fit.stderr
    import boto3

    sagemaker = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")\
        .client("sagemaker", endpoint_url=moto_endpoint)
    names = [j["TrainingJobName"] for j in sagemaker.list_training_jobs()["TrainingJobSummaries"]]
    roles = {sagemaker.describe_training_job(TrainingJobName=n)["RoleArn"] for n in names}
    assert out["role_arn"] in roles
