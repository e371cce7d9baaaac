"""Job-root layout and host environment: what SageMaker puts into a container, per host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sm_dist.errors import ConfigError
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.hostenv import host_environment
from sm_dist.local.layout import create_host_root, remap


def test_layout_has_the_sagemaker_files(fake_config: LocalJobConfig, tmp_path: Path) -> None:
    layout = create_host_root(fake_config, "algo-2", tmp_path / "h2", "s3://b/p")
    cfg = layout.config_dir
    resource = json.loads((cfg / "resourceconfig.json").read_text())
    assert resource["current_host"] == "algo-2"
    assert resource["hosts"] == ["algo-1", "algo-2"]  # SageMaker's order (sorted as text)
    assert resource["current_instance_type"] == "ml.g5.xlarge"
    assert resource["instance_groups"][0]["hosts"] == ["algo-1", "algo-2"]
    assert resource["network_interface_name"] == "lo"  # the emulated instances' network
    assert json.loads((cfg / "hyperparameters.json").read_text()) == {"steps": "8", "ckpt_every": "2"}
    assert set(json.loads((cfg / "inputdataconfig.json").read_text())) == {"code"}
    assert json.loads((cfg / "checkpointconfig.json").read_text()) == {
        "LocalPath": "/opt/ml/checkpoints", "S3Uri": "s3://b/p"}
    assert (layout.channel_dir("code") / "fake_container.py").is_file()
    for sub in ("model", "output/data", "checkpoints"):
        assert (layout.root / sub).is_dir()


def test_no_checkpointconfig_without_uri(fake_config: LocalJobConfig, tmp_path: Path) -> None:
    layout = create_host_root(fake_config, "algo-1", tmp_path / "h1", None)
    assert not (layout.config_dir / "checkpointconfig.json").exists()


def test_remap_paths_in_values(tmp_path: Path) -> None:
    assert remap("/opt/ml/model", tmp_path) == f"{tmp_path}/model"
    assert remap("/opt/ml", tmp_path) == str(tmp_path)
    assert remap("/opt/ml/a:/usr/lib", tmp_path) == f"{tmp_path}/a:/usr/lib"
    assert remap("--dir=/opt/ml/x", tmp_path) == f"--dir={tmp_path}/x"
    assert remap("/opt/mlx", tmp_path) == "/opt/mlx"
    assert remap("s3://bucket/opt", tmp_path) == "s3://bucket/opt"


def test_host_environment_is_what_the_platform_gives(fake_config: LocalJobConfig, tmp_path: Path) -> None:
    """SageMaker starts PID 1 with the request's Environment and TRAINING_JOB_NAME/ARN, nothing SM_*:
    local mode does the same, plus its SM_DIST_* ports; PID 1 computes the rest."""
    layout = create_host_root(fake_config, "algo-2", tmp_path / "h2", None)
    base = {"PATH": "/bin", "SM_CURRENT_HOST": "leak", "RANK": "7", "HOME": "/h", "AWS_PROFILE": "prod"}
    ports = {"SM_DIST_RDZV_PORT": 1, "SM_DIST_MASTER_PORT": 2}
    env = host_environment(fake_config, layout, ports, private=True, base=base)
    assert env["PATH"] == "/bin" and "RANK" not in env and "AWS_PROFILE" not in env
    assert not [k for k in env if k.startswith("SM_") and not k.startswith("SM_DIST_")]
    assert env["PYTHONPATH"] == "/opt/ml/input/data/code"  # the host's folder is /opt/ml in its namespace
    assert (env["TRAINING_JOB_NAME"], env["TRAINING_JOB_ARN"]) == (
        "fake-job", "arn:aws:sagemaker:local:000000000000:training-job/fake-job")
    assert (env["SM_DIST_RDZV_PORT"], env["SM_DIST_MASTER_PORT"]) == ("1", "2")
    assert "SM_DIST_OPT_ML" not in env and "SM_DIST_RDZV_HOST" not in env
    shared = host_environment(fake_config, layout, ports, private=False, base=base)
    assert shared["PYTHONPATH"] == str(layout.channel_dir("code"))  # no /opt/ml here: every path remapped
    assert (shared["SM_DIST_OPT_ML"], shared["SM_DIST_RDZV_HOST"]) == (str(layout.root), "127.0.0.1")


@pytest.mark.parametrize(
    ("field", "value"),
    [("job_name", "bad_name"), ("instance_count", 0), ("hyperparameters", {"lr": 0.1}), ("channels", {"code": Path(".")})],
)
def test_config_rejects_bad_values(field: str, value: object) -> None:
    kwargs: dict[str, object] = {"job_name": "j", "container_command": ("true",), field: value}
    with pytest.raises(ConfigError, match=field):
        LocalJobConfig(**kwargs)  # type: ignore[arg-type]
