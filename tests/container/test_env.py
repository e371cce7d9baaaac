"""detect_env from plain dicts: every launcher, SageMaker files, and broken environments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sm_dist.container import slurm_nodes
from sm_dist.container.env import detect_env
from sm_dist.contract.container import host_order, remap
from sm_dist.errors import RuntimeEnvError

TORCHRUN = {
    "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
    "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29511",
    "TORCHELASTIC_RESTART_COUNT": "2", "TORCHELASTIC_RUN_ID": "none",
}


def _sagemaker_root(tmp_path: Path, hosts: list[str], current: str, checkpoint: str | None = None) -> Path:
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    resource = {"current_host": current, "hosts": sorted(hosts), "network_interface_name": "eth0"}
    (config / "resourceconfig.json").write_text(json.dumps(resource))
    if checkpoint:
        (config / "checkpointconfig.json").write_text(json.dumps({"LocalPath": checkpoint, "S3Uri": "s3://b/p"}))
    return tmp_path


def test_single_process_defaults() -> None:
    env = detect_env({})
    assert (env.launcher, env.world_size, env.rank, env.backend, env.device_type) == ("single", 1, 0, "gloo", "cpu")
    assert env.master_addr is None and not env.on_sagemaker and env.is_main and not env.is_distributed


def test_torchrun_variables_define_ranks() -> None:
    env = detect_env(TORCHRUN)
    assert env.launcher == "torchrun"
    assert (env.world_size, env.rank, env.local_rank, env.local_world_size) == (4, 3, 1, 2)
    assert (env.node_rank, env.num_nodes, env.master_addr, env.master_port) == (1, 2, "10.0.0.1", 29511)
    assert env.restart_count == 2
    assert env.job_name is None  # never TORCHELASTIC_RUN_ID ("none" under static rendezvous)


def test_gpus_select_nccl_and_cuda() -> None:
    assert detect_env({**TORCHRUN, "SM_NUM_GPUS": "8"}).backend == "nccl"
    env = detect_env(TORCHRUN, num_gpus=2)
    assert (env.backend, env.device_type, env.num_gpus) == ("nccl", "cuda", 2)


def test_torchrun_inside_sagemaker_adds_hosts_and_dirs(tmp_path: Path) -> None:
    root = _sagemaker_root(tmp_path, ["algo-10", "algo-2", "algo-1"], "algo-2", checkpoint="/opt/ml/checkpoints")
    env = detect_env({**TORCHRUN, "SM_DIST_OPT_ML": str(root), "TRAINING_JOB_NAME": "job-1",
                      "SM_MODEL_DIR": "/opt/ml/model", "SM_CHANNEL_TRAIN": "/opt/ml/input/data/train"})
    assert env.launcher == "torchrun" and env.on_sagemaker
    assert env.rank == 3  # torchrun's ranks win over SageMaker's host index
    assert env.hosts == ("algo-1", "algo-10", "algo-2")  # SageMaker's order: sorted as text
    assert env.current_host == "algo-2" and env.job_name == "job-1"
    assert env.checkpoint_dir == f"{root}/checkpoints"
    assert env.model_dir == f"{root}/model"
    assert env.output_dir == f"{root}/output/data"
    assert dict(env.channels) == {"train": f"{root}/input/data/train"}
    assert hash(env) == hash(detect_env({**TORCHRUN, "SM_DIST_OPT_ML": str(root), "TRAINING_JOB_NAME": "job-1"}))
    with pytest.raises(TypeError):
        env.channels["x"] = "y"  # frozen all the way down


def test_sagemaker_without_torchrun_is_one_process_per_host(tmp_path: Path) -> None:
    root = _sagemaker_root(tmp_path, ["algo-1", "algo-2", "algo-10"], "algo-10")
    env = detect_env({"SM_DIST_OPT_ML": str(root), "SM_NUM_GPUS": "0"})
    assert env.launcher == "sagemaker"
    # algo-10 is second in SageMaker's order (algo-1, algo-10, algo-2), as ModelTrainer ranks it
    assert (env.world_size, env.rank, env.node_rank, env.master_addr, env.master_port) == (3, 1, 1, "algo-1", 7777)
    assert env.checkpoint_dir is None  # no CheckpointConfig


def test_sagemaker_env_vars_without_files() -> None:
    env = detect_env({"SM_HOSTS": '["algo-2","algo-1"]', "SM_CURRENT_HOST": "algo-1",
                      "SM_DIST_OPT_ML": "/nonexistent-root"})
    assert env.launcher == "sagemaker" and env.hosts == ("algo-1", "algo-2") and env.rank == 0


def test_slurm() -> None:
    env = detect_env({
        "SLURM_NTASKS": "8", "SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
        "SLURM_JOB_NODELIST": "gpu[09-10]", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "4321",
        "SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NAME": "train",
    })
    assert env.launcher == "slurm"
    assert (env.world_size, env.rank, env.local_rank, env.local_world_size, env.node_rank) == (8, 5, 1, 4, 1)
    assert (env.master_addr, env.master_port, env.job_name) == ("gpu09", 15000 + 4321, "4321")
    assert env.hosts == ("gpu09", "gpu10")


def test_slurm_interactive_shell_is_not_a_launcher() -> None:
    assert detect_env({"SLURM_NTASKS": "1", "SLURM_PROCID": "0", "SLURM_JOB_NAME": "bash"}).launcher == "single"


@pytest.mark.parametrize("nodelist, hosts", [
    ("node1", ["node1"]),
    ("gpu[01-03,7],login1", ["gpu01", "gpu02", "gpu03", "gpu7", "login1"]),
    ("a[1-2]-b[3-4]", ["a1-b3", "a1-b4", "a2-b3", "a2-b4"]),
    ("x1 x2", ["x1", "x2"]),
])
def test_slurm_nodelist_expansion(nodelist: str, hosts: list[str]) -> None:
    assert slurm_nodes.expand(nodelist) == hosts


@pytest.mark.parametrize("environ, words", [
    ({**TORCHRUN, "RANK": "4"}, "rank 4 is outside 0..3"),
    ({**TORCHRUN, "RANK": "-1"}, "rank -1"),
    ({**TORCHRUN, "LOCAL_RANK": "2"}, "local rank 2"),
    ({**TORCHRUN, "MASTER_ADDR": ""}, "MASTER_ADDR"),
    ({k: v for k, v in TORCHRUN.items() if k != "MASTER_PORT"}, "MASTER_PORT"),
    ({**TORCHRUN, "WORLD_SIZE": "four"}, "WORLD_SIZE='four'"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "LOCAL_WORLD_SIZE"),
    ({"SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_JOB_NAME": "train"}, "SLURM_JOB_NODELIST"),
    ({"SLURM_NTASKS": "2", "SLURM_PROCID": "2", "SLURM_JOB_NODELIST": "n1", "SLURM_JOB_NAME": "t"}, "rank 2"),
    ({"SLURM_NTASKS": "2", "SLURM_PROCID": "0", "SLURM_JOB_NODELIST": "n[1-", "SLURM_JOB_NAME": "t"}, "brackets"),
    ({"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-9"}, "algo-9"),
    ({"SM_HOSTS": "algo-1", "SM_CURRENT_HOST": "algo-1"}, "SM_HOSTS"),
])
def test_inconsistent_environments_raise(environ: dict[str, str], words: str) -> None:
    with pytest.raises(RuntimeEnvError, match=words.replace("(", r"\(").replace(".", r"\.")):
        detect_env(environ)


def test_unreadable_resourceconfig_raises(tmp_path: Path) -> None:
    (tmp_path / "input" / "config").mkdir(parents=True)
    (tmp_path / "input" / "config" / "resourceconfig.json").write_text("{not json")
    with pytest.raises(RuntimeEnvError, match="resourceconfig.json"):
        detect_env({"SM_DIST_OPT_ML": str(tmp_path)})


def test_host_order_and_remap() -> None:
    assert host_order(["algo-10", "algo-2", "algo-1"]) == ("algo-1", "algo-10", "algo-2")
    assert remap("/opt/ml/model", "/tmp/h1") == "/tmp/h1/model"
    assert remap("/opt/mlx", "/tmp/h1") == "/opt/mlx"
    assert remap("/opt/ml/model", "/opt/ml") == "/opt/ml/model"


def test_detect_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in TORCHRUN.items():
        monkeypatch.setenv(key, value)
    assert detect_env().rank == 3


@pytest.mark.slow
def test_env_and_runtime_package_import_without_torch() -> None:
    code = ("import sys, sm_dist.runtime, sm_dist.container.env, sm_dist.contract.log_lines\n"
            "sm_dist.container.env.detect_env({})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
