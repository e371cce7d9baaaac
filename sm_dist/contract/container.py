"""The SageMaker training container's layout, as sm_dist relies on it (docs/PLATFORM.md §1.1, §1.4).

Every path the cloud job sees lives under `OPT_ML`. Local mode runs the same code in a folder per
emulated host and says where with `$SM_DIST_OPT_ML`; :func:`remap` is the one place that moves a
container path there.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sm_dist.errors import RuntimeEnvError

#: Where SageMaker mounts everything inside a training container.
OPT_ML = "/opt/ml"
#: Local mode's container root (an emulated host's folder); unset in the cloud.
OPT_ML_ENV = "SM_DIST_OPT_ML"
#: Local mode's other stand-ins, read by sm_dist's PID 1 and unset in the cloud: the rendezvous
#: host where hosts cannot resolve each other's names (a loopback address), the rendezvous and
#: master ports (free ones instead of SageMaker's fixed 29400 and 7777: another job on the machine
#: may hold those), this host's address for torchrun, and the processes per host.
RDZV_HOST_ENV = "SM_DIST_RDZV_HOST"
RDZV_PORT_ENV = "SM_DIST_RDZV_PORT"
MASTER_PORT_ENV = "SM_DIST_MASTER_PORT"
LOCAL_ADDR_ENV = "SM_DIST_LOCAL_ADDR"
NPROC_ENV = "SM_DIST_NPROC_PER_NODE"
#: "1" in the request's Environment of a job with EnableNetworkIsolation (the plan sets it): the
#: container has no S3 and no AWS credentials, only its peers, so a restarted host's checkpoint
#: folder is restored from the other hosts' folders (docs/PLATFORM.md §1.7).
NETWORK_ISOLATION_ENV = "SM_DIST_NETWORK_ISOLATION"
#: Local mode's stand-in: the host's log file, which a failure names instead of the cloud's CloudWatch stream.
LOCAL_LOG_ENV = "SM_DIST_LOCAL_LOG"

MODEL_DIR = f"{OPT_ML}/model"
OUTPUT_DIR = f"{OPT_ML}/output"
OUTPUT_DATA_DIR = f"{OUTPUT_DIR}/data"
#: Its first 1024 characters become DescribeTrainingJob.FailureReason (docs/PLATFORM.md §1.1).
FAILURE_FILE = f"{OUTPUT_DIR}/failure"
INPUT_DIR = f"{OPT_ML}/input"
INPUT_DATA_DIR = f"{INPUT_DIR}/data"
INPUT_CONFIG_DIR = f"{INPUT_DIR}/config"
#: The channel that carries the code bundle; on PYTHONPATH in the container.
CODE_CHANNEL = "code"
CODE_DIR = f"{INPUT_DATA_DIR}/{CODE_CHANNEL}"
#: CheckpointConfig.LocalPath when a job does not set one (docs/PLATFORM.md §1.4).
CHECKPOINT_LOCAL_PATH = f"{OPT_ML}/checkpoints"

#: Files SageMaker writes to INPUT_CONFIG_DIR (checkpointconfig.json only with a CheckpointConfig).
RESOURCE_CONFIG = "resourceconfig.json"
HYPERPARAMETERS = "hyperparameters.json"
INPUT_DATA_CONFIG = "inputdataconfig.json"
CHECKPOINT_CONFIG = "checkpointconfig.json"
#: Written with a TensorBoardOutputConfig, `{"LocalPath": ...}` (docs/PLATFORM.md §1.14).
TENSORBOARD_CONFIG = "tensorboardoutputconfig.json"
#: TensorBoardOutputConfig.LocalPath's default, the folder SageMaker syncs to its S3OutputPath (§1.14).
TENSORBOARD_LOCAL_PATH = f"{OUTPUT_DIR}/tensorboard"

#: The source dir's dependencies, pip-installed at job start as SageMaker's training toolkit does
#: (docs/PLATFORM.md §1.1); from WHEELS_DIR without an index when the bundle carries one.
REQUIREMENTS_FILE = "requirements.txt"
WHEELS_DIR = "wheels"
#: "0": PID 1 does not install them (local mode checks the caller's environment instead).
INSTALL_REQUIREMENTS_ENV = "SM_DIST_INSTALL_REQUIREMENTS"
#: The warm pool's persistent cache: a folder that outlives the job on the pool's instances, mounted
#: here and named by the variable (docs/PLATFORM.md §1.13.1); `sm_dist.container.warm_cache` uses it.
WARMPOOL_CACHE_DIR = f"{OPT_ML}/sagemaker/warmpoolcache"
WARMPOOL_CACHE_ENV = "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"
#: The caches PID 1 points into that folder (variable -> its folder there; sm_dist.container.warm_cache).
WARMPOOL_CACHE_FOLDERS = {
    "PIP_CACHE_DIR": "pip",
    "HF_HOME": "huggingface",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "TRITON_CACHE_DIR": "triton",
}

#: Suffix of a file still being copied into local mode's folder store (a URI's stand-in): never a checkpoint file.
PARTIAL_SUFFIX = ".sm-dist-partial"

#: Names SageMaker's checkpoint uploader skips (IGNORE) or writes itself next to a file it uploaded
#: (UPLOADING while it copies, UPLOADED after): docs/PLATFORM.md §1.4.
SYNC_IGNORE_SUFFIX = ".sagemaker-ignore"
SYNC_UPLOADING_SUFFIX = ".sagemaker-uploading"
SYNC_UPLOADED_SUFFIX = ".sagemaker-uploaded"
SYNC_SKIPPED_SUFFIXES = (SYNC_IGNORE_SUFFIX, SYNC_UPLOADING_SUFFIX, SYNC_UPLOADED_SUFFIX)

#: The directory variables SageMaker's environment exports (docs/PLATFORM.md §1.2).
SM_DIR_VARIABLES = {
    "SM_MODEL_DIR": MODEL_DIR,
    "SM_INPUT_DIR": INPUT_DIR,
    "SM_INPUT_DATA_DIR": INPUT_DATA_DIR,
    "SM_INPUT_CONFIG_DIR": INPUT_CONFIG_DIR,
    "SM_OUTPUT_DIR": OUTPUT_DIR,
    "SM_OUTPUT_DATA_DIR": OUTPUT_DATA_DIR,
    "SM_OUTPUT_FAILURE": FAILURE_FILE,
}

#: What SageMaker's own torchrun driver treats as EFA types (docs/PLATFORM.md §1.2): FI_PROVIDER=efa
#: on these, FI_EFA_USE_DEVICE_RDMA=1 and RDMAV_FORK_SAFE=1 also on the RDMA ones.
_DRIVER_EFA_TYPES = ("ml.g4dn.8xlarge", "ml.g4dn.12xlarge", "ml.g5.48xlarge", "ml.p3dn.24xlarge")
_DRIVER_RDMA_TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.trn1.32xlarge")
#: GPUDirect-RDMA EFA types newer than the driver's lists (docs/PLATFORM.md §1.2: "p5en, p6-b200 are
#: not in its lists"; §7: p6-b300, p6e-gb200); the instance catalog marks them EFA, so sm_dist
#: treats them like p5.
_NEWER_RDMA_TYPES = ("ml.p5en.48xlarge", "ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge", "ml.p6e-gb200.36xlarge")
EFA_RDMA_TYPES = frozenset(_DRIVER_RDMA_TYPES + _NEWER_RDMA_TYPES)
EFA_TYPES = frozenset(_DRIVER_EFA_TYPES) | EFA_RDMA_TYPES


def opt_ml_root(environ: Mapping[str, str] | None = None) -> str:
    """The container root this process sees: `$SM_DIST_OPT_ML` in local mode, else /opt/ml."""
    env = os.environ if environ is None else environ
    return env.get(OPT_ML_ENV) or OPT_ML


def remap(text: str, root: str | os.PathLike[str]) -> str:
    """Move a container path (or each one in an '='/':'-separated value such as PYTHONPATH) under `root`."""
    root = str(root)
    if root == OPT_ML:
        return text
    if text == OPT_ML or text.startswith(OPT_ML + "/"):
        return root + text[len(OPT_ML):]
    for sep in ("=", ":"):
        if sep in text and OPT_ML in text:
            return sep.join(remap(part, root) for part in text.split(sep))
    return text


def nproc_per_node(env: Mapping[str, str], spec_nproc: int | None, num_gpus: int = 0) -> int:
    """Worker processes per host, worked out in one place for PID 1 and local mode: local mode's
    NPROC_ENV (its --nproc-per-node), else the job spec's nproc_per_node, else one per GPU (PID 1
    counts them; local mode passes 0), else 1."""
    return int(env.get(NPROC_ENV) or spec_nproc or num_gpus or 1)


def sync_skipped(rel: str) -> bool:
    """True for a checkpoint-folder path SageMaker's uploader never uploads (any component ending in
    one of `SYNC_SKIPPED_SUFFIXES`)."""
    return any(part.endswith(SYNC_SKIPPED_SUFFIXES) for part in rel.split("/"))


#: What a training script's checkpoint looks like by name: a weight or state file, or a name that says so.
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors", ".distcp", ".bin")
_CHECKPOINT_WORDS = ("checkpoint", "ckpt", "snapshot")
#: The weight files in a model folder that sm_dist.tools.weights_compare reads and local mode's --verify
#: looks for (the tools compare the tensors; local mode, without torch, only asks whether there are any).
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
#: Never a checkpoint, whatever the folder is called: code, logs and caches.
_NOT_CHECKPOINTS = (".py", ".pyc", ".log", ".txt", ".md", ".json.lock")


def checkpoint_like(rel: str) -> bool:
    """Whether a path a script wrote looks like a checkpoint (suffix, or a component named so);
    used to say that one was written outside CheckpointConfig.LocalPath, which is not synced."""
    lowered = rel.lower()
    if lowered.endswith(_NOT_CHECKPOINTS) or "__pycache__" in lowered:
        return False
    return lowered.endswith(CHECKPOINT_SUFFIXES) or any(word in lowered for word in _CHECKPOINT_WORDS)


def synced_files(folder: Path) -> dict[str, os.stat_result]:
    """The files of a checkpoint folder SageMaker's uploader would upload: relative POSIX path -> stat
    (`sync_skipped` names left out; a file that vanishes while listed is left out too)."""
    found: dict[str, os.stat_result] = {}
    # os.walk, not Path.rglob: a folder deleted while it is walked (a script's retention) is skipped
    # by os.walk, where rglob raises FileNotFoundError
    for top, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(top, name)
            rel = path.relative_to(folder).as_posix()
            try:
                if not sync_skipped(rel) and stat.S_ISREG((st := path.stat()).st_mode):
                    found[rel] = st
            except OSError:
                continue
    return found


def host_order(hosts: Iterable[str]) -> tuple[str, ...]:
    """SageMaker's order of a job's hosts: sorted as text, algo-1, algo-10, algo-11, algo-2, ...

    resourceconfig.json lists them so, ModelTrainer's container ranks them so (SM_HOSTS,
    SM_CURRENT_HOST_RANK), and torchrun's c10d rendezvous numbers nodes by sorting their addresses
    as text — the host names under sm_dist's PID 1 — so GROUP_RANK is the same index
    (docs/PLATFORM.md §1.8).
    """
    return tuple(sorted(hosts))


@dataclass(frozen=True, kw_only=True)
class ResourceConfig:
    """input/config/resourceconfig.json: this host and its peers, hosts in SageMaker's order (`host_order`)."""

    current_host: str
    hosts: tuple[str, ...]
    instance_type: str | None = None
    network_interface: str | None = None


def config_path(root: str | os.PathLike[str], name: str) -> Path:
    """Where input/config/<name> (e.g. RESOURCE_CONFIG) lies under a container root."""
    return Path(remap(INPUT_CONFIG_DIR, root)) / name


def read_config(root: str | os.PathLike[str], name: str) -> dict[str, Any] | None:
    """The JSON object in input/config/<name> under `root`; None when absent; RuntimeEnvError when malformed."""
    path = config_path(root, name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RuntimeEnvError(f"{path}: unreadable SageMaker config ({exc})") from None
    if not isinstance(data, dict):
        raise RuntimeEnvError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


@dataclass(frozen=True, kw_only=True)
class CheckpointConfig:
    """input/config/checkpointconfig.json (only in a job with CheckpointConfig; docs/PLATFORM.md §1.1)."""

    local_path: str
    """LocalPath as the container sees it (remapped under the root)."""
    s3_uri: str | None


def read_checkpoint_config(root: str | os.PathLike[str]) -> CheckpointConfig | None:
    """checkpointconfig.json under `root`; None when absent or without LocalPath; RuntimeEnvError when malformed."""
    data = read_config(root, CHECKPOINT_CONFIG) or {}
    local = data.get("LocalPath")
    if not local:
        return None
    return CheckpointConfig(local_path=remap(str(local), root), s3_uri=str(data["S3Uri"]) if data.get("S3Uri") else None)


def read_tensorboard_dir(root: str | os.PathLike[str]) -> str | None:
    """The TensorBoard folder of a job with a TensorBoardOutputConfig (tensorboardoutputconfig.json's LocalPath,
    else the default), remapped under `root`; None without one; RuntimeEnvError when malformed."""
    data = read_config(root, TENSORBOARD_CONFIG)
    if data is None:
        return None
    return remap(str(data.get("LocalPath") or TENSORBOARD_LOCAL_PATH), root)


def read_resource_config(root: str | os.PathLike[str]) -> ResourceConfig | None:
    """resourceconfig.json under `root`; None when absent; RuntimeEnvError when malformed."""
    data = read_config(root, RESOURCE_CONFIG)
    if data is None:
        return None
    path = config_path(root, RESOURCE_CONFIG)
    if not isinstance(data.get("hosts"), list) or not data.get("current_host"):
        raise RuntimeEnvError(f"{path}: expected a JSON object with 'hosts' (a list) and 'current_host'")
    hosts = host_order(str(h) for h in data["hosts"])
    current = str(data["current_host"])
    if current not in hosts:
        raise RuntimeEnvError(f"{path}: current_host {current!r} is not among the hosts {list(hosts)}")
    return ResourceConfig(current_host=current, hosts=hosts, instance_type=data.get("current_instance_type"),
                          network_interface=data.get("network_interface_name"))


__all__ = [
    "CHECKPOINT_LOCAL_PATH", "CODE_DIR", "EFA_RDMA_TYPES", "EFA_TYPES", "FAILURE_FILE", "MODEL_DIR", "OPT_ML",
    "INSTALL_REQUIREMENTS_ENV", "OPT_ML_ENV", "RDZV_HOST_ENV", "RDZV_PORT_ENV", "MASTER_PORT_ENV", "LOCAL_ADDR_ENV", "NPROC_ENV", "nproc_per_node", "NETWORK_ISOLATION_ENV", "LOCAL_LOG_ENV", "REQUIREMENTS_FILE", "RESOURCE_CONFIG", "WHEELS_DIR", "SM_DIR_VARIABLES", "SYNC_IGNORE_SUFFIX", "SYNC_SKIPPED_SUFFIXES",
    "SYNC_UPLOADED_SUFFIX", "SYNC_UPLOADING_SUFFIX", "CHECKPOINT_SUFFIXES", "WEIGHT_SUFFIXES", "checkpoint_like", "CheckpointConfig", "read_checkpoint_config", "ResourceConfig",
    "TENSORBOARD_CONFIG", "TENSORBOARD_LOCAL_PATH", "read_tensorboard_dir", "config_path", "host_order",
    "opt_ml_root", "read_config", "read_resource_config", "remap", "sync_skipped", "synced_files", "PARTIAL_SUFFIX",
    "WARMPOOL_CACHE_DIR", "WARMPOOL_CACHE_ENV", "WARMPOOL_CACHE_FOLDERS",
]
