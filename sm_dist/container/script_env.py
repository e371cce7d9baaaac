"""The SageMaker variables a training script sees, computed once, as ModelTrainer's container computes them.

sm_dist's PID 1 replaces the PID 1 of SageMaker SDK v3's ModelTrainer (`sm_train.sh`, which
sources the file `container_drivers/scripts/environment.py` writes), so it owes the script the
same environment: every name that file sets, with values in its format (strings as they are,
everything else JSON), computed from what the platform provides — the `input/config/*.json`
files, `TRAINING_JOB_NAME`, the hardware — and nothing else (docs/PLATFORM.md §1.8). Local mode
provides the same files and platform variables, so a script sees the same names there; paths say
`/opt/ml/...` wherever the host's folder is mounted at /opt/ml.

Standard library only: the container runs this before torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sm_dist.contract.container import (
    CHECKPOINT_LOCAL_PATH,
    CODE_DIR,
    HYPERPARAMETERS,
    INPUT_CONFIG_DIR,
    INPUT_DATA_CONFIG,
    INPUT_DATA_DIR,
    MASTER_PORT_ENV,
    RESOURCE_CONFIG,
    SM_DIR_VARIABLES,
    read_checkpoint_config,
    read_config,
    read_tensorboard_dir,
    remap,
)
from sm_dist.errors import RuntimeEnvError

#: ModelTrainer's container hard-codes these (environment.py: `SM_MASTER_ADDR = "algo-1"`,
#: `SM_MASTER_PORT = 7777`, docs/PLATFORM.md §1.2); the first host in SageMaker's order is algo-1.
MASTER_PORT = 7777
#: logging.INFO, ModelTrainer's default when SM_LOG_LEVEL is not in the container's environment (a
#: number then; the variable's text when it is set).
DEFAULT_LOG_LEVEL = 20
#: sm_dist's own name for CheckpointConfig.LocalPath (not a SageMaker variable): a script finds its
#: checkpoint folder wherever /opt/ml is.
CHECKPOINT_DIR_ENV = "SM_CHECKPOINT_DIR"
#: With a TensorBoardOutputConfig: the folder SageMaker syncs to S3 while the job runs (sm_dist's name, as no
#: SageMaker container sets one), and the same for Hugging Face Trainer's TensorBoardCallback (docs/PLATFORM.md §1.14).
TENSORBOARD_DIR_ENV = "SM_TENSORBOARD_DIR"
HF_TENSORBOARD_ENV = "TENSORBOARD_LOGGING_DIR"


@dataclass(frozen=True, kw_only=True)
class Host:
    """What PID 1 knows of this host besides the config files."""

    hosts: tuple[str, ...]
    """Every host, in SageMaker's order (`contract.container.host_order`)."""
    current_host: str
    instance_type: str | None
    interface: str | None
    num_gpus: int
    num_cpus: int
    num_neurons: int = 0
    master_addr: str | None = None
    """Where SM_MASTER_ADDR points (None: the first host, as ModelTrainer's algo-1)."""
    entry_script: str | None = None
    """The script the job runs, relative to the code dir (None for a function entry)."""
    processes_per_host: int | None = None


def _serialize(value: object) -> str:
    """ModelTrainer's `safe_serialize`: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _deserialize(text: str) -> object:
    """ModelTrainer's `safe_deserialize`: JSON when the text parses as JSON, else the text ("3" -> 3)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _json_config(root: Path, name: str) -> dict[str, object]:
    data = read_config(root, name)
    if data is None and name == RESOURCE_CONFIG:
        raise RuntimeEnvError(f"{remap(INPUT_CONFIG_DIR, root)}/{name}: no such file")
    return dict(data or {})


def script_environment(root: Path, env: Mapping[str, str], host: Host) -> dict[str, str]:
    """Every SageMaker variable ModelTrainer's container gives a script, for the container at `root`.

    `root` is /opt/ml (or local mode's folder standing in for it, without a private mount);
    `env` is the container's environment (TRAINING_JOB_NAME, SM_LOG_LEVEL, local mode's port).
    """
    resource = _json_config(root, RESOURCE_CONFIG)
    data_config = _json_config(root, INPUT_DATA_CONFIG)
    hyperparameters = {str(k): _deserialize(str(v)) for k, v in _json_config(root, HYPERPARAMETERS).items()}
    paths = {key: remap(path, root) for key, path in SM_DIR_VARIABLES.items()}
    channels = list(data_config)
    channel_dirs = {name: f"{remap(INPUT_DATA_DIR, root)}/{name}" for name in channels}
    values: dict[str, object] = {
        **paths,
        "SM_LOG_LEVEL": env.get("SM_LOG_LEVEL") or DEFAULT_LOG_LEVEL,
        "SM_MASTER_ADDR": host.master_addr or host.hosts[0],
        "SM_MASTER_PORT": int(env.get(MASTER_PORT_ENV) or MASTER_PORT),
        "SM_SOURCE_DIR": remap(CODE_DIR, root),
        "SM_ENTRY_SCRIPT": host.entry_script or "",
        # what ModelTrainer's Torchrun() serializes; its driver folder (SM_DISTRIBUTED_DRIVER_DIR) has no
        # counterpart here: sm_dist's PID 1 is the driver
        "SM_DISTRIBUTED_CONFIG": {"process_count_per_node": host.processes_per_host, "smp": None},
        **{f"SM_CHANNEL_{name.upper()}": path for name, path in channel_dirs.items()},
        "SM_CHANNELS": channels,
        **{f"SM_HP_{key.replace('-', '_').upper()}": value for key, value in hyperparameters.items()},
        "SM_HPS": hyperparameters,
        "SM_CURRENT_HOST": host.current_host,
        "SM_CURRENT_INSTANCE_TYPE": resource.get("current_instance_type", host.instance_type or ""),
        "SM_HOSTS": list(host.hosts),
        "SM_NETWORK_INTERFACE_NAME": host.interface or "",
        "SM_HOST_COUNT": len(host.hosts),
        "SM_CURRENT_HOST_RANK": host.hosts.index(host.current_host),
        "SM_NUM_CPUS": host.num_cpus,
        "SM_NUM_GPUS": host.num_gpus,
        "SM_NUM_NEURONS": host.num_neurons,
        "SM_RESOURCE_CONFIG": resource,
        "SM_INPUT_DATA_CONFIG": data_config,
    }
    values["SM_TRAINING_ENV"] = _training_env(values, channel_dirs, env)
    checkpoint = read_checkpoint_config(root)
    values[CHECKPOINT_DIR_ENV] = checkpoint.local_path if checkpoint else remap(CHECKPOINT_LOCAL_PATH, root)
    tensorboard = read_tensorboard_dir(root)
    if tensorboard is not None:
        values[TENSORBOARD_DIR_ENV] = values[HF_TENSORBOARD_ENV] = tensorboard
    return {key: _serialize(value) for key, value in values.items()}


def _training_env(values: Mapping[str, object], channel_dirs: Mapping[str, str],
                  env: Mapping[str, str]) -> dict[str, object]:
    """SM_TRAINING_ENV: the same facts as one JSON object, keyed as ModelTrainer keys them."""
    return {
        "channel_input_dirs": dict(channel_dirs),
        "current_host": values["SM_CURRENT_HOST"],
        "current_instance_type": values["SM_CURRENT_INSTANCE_TYPE"],
        "hosts": values["SM_HOSTS"],
        "master_addr": values["SM_MASTER_ADDR"],
        "master_port": values["SM_MASTER_PORT"],
        "hyperparameters": values["SM_HPS"],
        "input_data_config": values["SM_INPUT_DATA_CONFIG"],
        "input_config_dir": values["SM_INPUT_CONFIG_DIR"],
        "input_data_dir": values["SM_INPUT_DATA_DIR"],
        "input_dir": values["SM_INPUT_DIR"],
        "job_name": env.get("TRAINING_JOB_NAME", ""),
        "log_level": values["SM_LOG_LEVEL"],
        "model_dir": values["SM_MODEL_DIR"],
        "network_interface_name": values["SM_NETWORK_INTERFACE_NAME"],
        "num_cpus": values["SM_NUM_CPUS"],
        "num_gpus": values["SM_NUM_GPUS"],
        "num_neurons": values["SM_NUM_NEURONS"],
        "output_data_dir": values["SM_OUTPUT_DATA_DIR"],
        "resource_config": values["SM_RESOURCE_CONFIG"],
    }


def cpu_count() -> int:
    """CPUs of this container, as ModelTrainer counts them (`multiprocessing.cpu_count()`)."""
    return os.cpu_count() or 1


__all__ = ["CHECKPOINT_DIR_ENV", "HF_TENSORBOARD_ENV", "MASTER_PORT", "TENSORBOARD_DIR_ENV", "Host", "cpu_count", "script_environment"]
