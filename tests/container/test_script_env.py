"""The environment sm_dist's PID 1 gives a script is the one SageMaker's ModelTrainer container gives it.

The reference is not ours: SageMaker SDK v3's own `container_drivers/scripts/environment.py` (the
code its `sm_train.sh` runs before the script) is run on the same /opt/ml files, and the variables
it writes are compared, name by name and value by value, with `sm_dist.container.script_env`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _modeltrainer import ONLY_MODELTRAINER, ONLY_SM_DIST, modeltrainer_env

from sm_dist.container.script_env import Host, script_environment

HOSTS = [f"algo-{i}" for i in range(1, 13)]
HYPERPARAMETERS = {"lr": "0.001", "epochs": "3", "model-name": "gpt2", "flag": "true", "layers": "[1, 2]", "s": "x y"}
DATA_CONFIG = {"code": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
               "train": {"TrainingInputMode": "FastFile", "S3DistributionType": "ShardedByS3Key",
                         "RecordWrapperType": "None"}}


def opt_ml(tmp_path: Path, current: str) -> Path:
    """A folder laid out as SageMaker lays out /opt/ml/input/config."""
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    resource = {"current_host": current, "current_instance_type": "ml.p4d.24xlarge", "current_group_name":
                "homogeneousCluster", "hosts": sorted(HOSTS), "network_interface_name": "eth0",
                "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.p4d.24xlarge",
                                     "hosts": sorted(HOSTS)}]}
    (config / "resourceconfig.json").write_text(json.dumps(resource))
    (config / "inputdataconfig.json").write_text(json.dumps(DATA_CONFIG))
    (config / "hyperparameters.json").write_text(json.dumps(HYPERPARAMETERS))
    return tmp_path


@pytest.mark.parametrize("current", ["algo-1", "algo-2", "algo-10", "algo-12"])
def test_every_variable_as_modeltrainer_sets_it(tmp_path: Path, current: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sagemaker.train")
    root = opt_ml(tmp_path / "opt-ml", current)
    reference = modeltrainer_env(root, tmp_path / "sm_training.env", monkeypatch)
    ours = script_environment(root, {"TRAINING_JOB_NAME": "job-7"}, Host(
        hosts=tuple(sorted(HOSTS)), current_host=current, instance_type="ml.p4d.24xlarge", interface="eth0",
        num_gpus=8, num_cpus=96, entry_script="train.py", processes_per_host=8))
    assert set(reference) - set(ours) == ONLY_MODELTRAINER
    assert set(ours) - set(reference) == ONLY_SM_DIST
    # ModelTrainer's constants name /opt/ml; ours name the root they were computed for
    mismatched = {k: (ours[k], reference[k]) for k in reference.keys() & ours.keys()
                  if ours[k].replace(str(root), "/opt/ml") != reference[k]}
    assert mismatched == {}
    assert ours["SM_CURRENT_HOST_RANK"] == str(sorted(HOSTS).index(current))  # SageMaker's order: as text


def test_a_paths_say_opt_ml_where_the_folder_is_mounted_there(tmp_path: Path) -> None:
    """In the cloud (and in a local host's private mount namespace) the root is /opt/ml itself."""
    root = opt_ml(tmp_path, "algo-2")
    env = script_environment(root, {}, Host(hosts=tuple(sorted(HOSTS)), current_host="algo-2", instance_type=None,
                                            interface="lo", num_gpus=0, num_cpus=2))
    assert env["SM_MODEL_DIR"] == f"{root}/model" and env["SM_CHANNEL_TRAIN"] == f"{root}/input/data/train"
    assert json.loads(env["SM_HPS"]) == {"lr": 0.001, "epochs": 3, "model-name": "gpt2", "flag": True,
                                         "layers": [1, 2], "s": "x y"}
    assert env["SM_HP_MODEL_NAME"] == "gpt2" and env["SM_HP_FLAG"] == "true" and env["SM_HP_LAYERS"] == "[1, 2]"
    assert env["SM_MASTER_ADDR"] == "algo-1" and env["SM_MASTER_PORT"] == "7777"
    assert script_environment(root, {"SM_DIST_MASTER_PORT": "4242"}, Host(
        hosts=("algo-1", "algo-2"), current_host="algo-2", instance_type=None, interface="lo", num_gpus=0,
        num_cpus=2, master_addr="127.0.0.1"))["SM_MASTER_PORT"] == "4242"


def test_tensorboard_folder_from_the_platforms_config_file(tmp_path: Path) -> None:
    """tensorboardoutputconfig.json (written with a TensorBoardOutputConfig, docs/PLATFORM.md §1.14) gives the
    script SM_TENSORBOARD_DIR and Hugging Face's TENSORBOARD_LOGGING_DIR; its LocalPath, else the default."""
    root = opt_ml(tmp_path, "algo-1")
    host = Host(hosts=("algo-1",), current_host="algo-1", instance_type=None, interface="lo", num_gpus=0, num_cpus=2)
    env = script_environment(root, {}, host)
    assert "SM_TENSORBOARD_DIR" not in env and "TENSORBOARD_LOGGING_DIR" not in env  # no TensorBoardOutputConfig
    config = root / "input" / "config" / "tensorboardoutputconfig.json"
    config.write_text(json.dumps({"S3OutputPath": "s3://b/job/tensorboard"}))
    env = script_environment(root, {}, host)
    assert env["SM_TENSORBOARD_DIR"] == env["TENSORBOARD_LOGGING_DIR"] == f"{root}/output/tensorboard"
    config.write_text(json.dumps({"LocalPath": "/opt/ml/output/tb", "S3OutputPath": "s3://b/p"}))
    assert script_environment(root, {}, host)["SM_TENSORBOARD_DIR"] == f"{root}/output/tb"
