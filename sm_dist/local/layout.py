"""The job root of one emulated host, laid out like a SageMaker container's /opt/ml.

Every host gets its own folder (`<job root>/hosts/algo-N`) with what the platform itself puts
there (docs/PLATFORM.md §1.1): input/config/{resourceconfig,hyperparameters,inputdataconfig,
checkpointconfig,tensorboardoutputconfig}.json, input/data/<channel> (including the code bundle), and empty model/,
output/ and checkpoints/ folders. A restarted job (managed spot) gets a fresh folder, as a new
instance would. On a warm pool (`sm_dist.local.warm_pool`) sagemaker/warmpoolcache is a link to the
host's persistent cache, which outlives the job as the platform's does. `outside_warnings` reads a
finished attempt's folders for checkpoint-like files written outside the synced one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sm_dist.contract.container import (
    CHECKPOINT_CONFIG,
    HYPERPARAMETERS,
    INPUT_DATA_CONFIG,
    OPT_ML,
    RESOURCE_CONFIG,
    TENSORBOARD_CONFIG,
    TENSORBOARD_LOCAL_PATH,
    WARMPOOL_CACHE_DIR,
    checkpoint_like,
    host_order,
    remap,
    synced_files,
)
from sm_dist.local.config import LocalJobConfig

#: SageMaker's name for the only instance group of a homogeneous cluster (resourceconfig.json).
HOMOGENEOUS_GROUP = "homogeneousCluster"
#: The emulated instances' network: this machine's loopback (SageMaker reports `eth0` on a single-ENI
#: instance, docs/PLATFORM.md §1.1); NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME follow it.
NETWORK_INTERFACE = "lo"
#: What SageMaker writes per channel in File mode (inputdataconfig.json, docs/PLATFORM.md §1.1).
_CHANNEL_CONFIG = {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}


@dataclass(frozen=True)
class HostRoot:
    """Paths of one emulated host; `root` plays the part of /opt/ml."""

    host: str
    root: Path

    def container_path(self, path: str) -> Path:
        """Map a path under /opt/ml (as the cloud job sees it) to this host's folder."""
        return Path(remap(path, self.root))

    @property
    def config_dir(self) -> Path:
        return self.root / "input" / "config"

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def failure_file(self) -> Path:
        return self.root / "output" / "failure"

    def channel_dir(self, name: str) -> Path:
        return self.root / "input" / "data" / name


def resource_config(config: LocalJobConfig, host: str) -> dict[str, object]:
    """resourceconfig.json of `host`, with the fields the newer platform writes."""
    hosts = list(host_order(config.hosts))
    return {
        "current_host": host,
        "current_instance_type": config.instance_type,
        "current_group_name": HOMOGENEOUS_GROUP,
        "hosts": hosts,
        "instance_groups": [
            {"instance_group_name": HOMOGENEOUS_GROUP, "instance_type": config.instance_type, "hosts": hosts}
        ],
        "network_interface_name": NETWORK_INTERFACE,
    }


def channel_names(config: LocalJobConfig) -> list[str]:
    """Input channels of the job in the request's order: the code channel first, then the plan's."""
    return (["code"] if config.code_dir is not None else []) + list(config.channels)


def create_host_root(config: LocalJobConfig, host: str, root: Path, checkpoint_uri: str | None) -> HostRoot:
    """Create (from scratch) the /opt/ml folder of `host` at `root`."""
    if root.exists():
        shutil.rmtree(root)
    layout = HostRoot(host, root)
    layout.config_dir.mkdir(parents=True)
    for sub in ("model", "output/data", "output/tensorboard", "code"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    layout.container_path(config.checkpoint_local_path).mkdir(parents=True, exist_ok=True)
    if config.warm_pool is not None:  # a link: the host's folder is remade each attempt, the cache is kept
        cache = layout.container_path(WARMPOOL_CACHE_DIR)
        cache.parent.mkdir(parents=True, exist_ok=True)
        (config.warm_pool / host).mkdir(parents=True, exist_ok=True)
        cache.symlink_to(config.warm_pool / host, target_is_directory=True)
    if config.code_dir is not None:
        shutil.copytree(config.code_dir, layout.channel_dir("code"), symlinks=False)
    order = host_order(config.hosts)
    for name, channel in config.channels.items():
        # each instance gets its own copy of its share (File mode downloads; FastFile shows the same files)
        for key in channel.share(order.index(host), len(order)):
            target = layout.channel_dir(name) / key
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(channel.folder / key, target)
        layout.channel_dir(name).mkdir(parents=True, exist_ok=True)
    data_config = {n: dict(_CHANNEL_CONFIG) for n in channel_names(config)}
    for name, channel in config.channels.items():
        data_config[name].update(TrainingInputMode=channel.mode, S3DistributionType=channel.distribution)
    _write_json(layout.config_dir / RESOURCE_CONFIG, resource_config(config, host))
    _write_json(layout.config_dir / HYPERPARAMETERS, dict(config.hyperparameters))
    _write_json(layout.config_dir / INPUT_DATA_CONFIG, data_config)
    if checkpoint_uri is not None:
        _write_json(
            layout.config_dir / CHECKPOINT_CONFIG,
            {"LocalPath": config.checkpoint_local_path, "S3Uri": checkpoint_uri},
        )
    if config.tensorboard_uri is not None:  # the service's default LocalPath: the request sends none
        _write_json(layout.config_dir / TENSORBOARD_CONFIG,
                    {"LocalPath": TENSORBOARD_LOCAL_PATH, "S3OutputPath": config.tensorboard_uri})
    return layout


def _write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def outside_warnings(config: LocalJobConfig, layouts: Sequence[HostRoot], since: float) -> list[str]:
    """Checkpoint-like files the script wrote in a host's /opt/ml outside the synced folder (the
    code dir is its working directory): SageMaker neither syncs them nor keeps them for a restart."""
    synced = config.checkpoint_local_path.removeprefix(OPT_ML).strip("/")
    kept = (synced, "model", "output", "input/config")  # synced, or what SageMaker does keep
    out = []
    for layout in layouts:
        found = sorted(rel for rel, st in synced_files(layout.root).items()
                       if st.st_mtime >= since and checkpoint_like(rel)
                       and not any(rel == k or rel.startswith(k + "/") for k in kept))
        if found:
            names = ", ".join(f"{OPT_ML}/{rel}" for rel in found[:3]) + (f" and {len(found) - 3} more"
                                                                         if len(found) > 3 else "")
            out.append(f"{layout.host} wrote {names} outside the checkpoint folder "
                       f"{config.checkpoint_local_path}: SageMaker does not sync it, so after a restart each "
                       "host resumes from its own copy (or none) and a new job from none; save checkpoints "
                       "under the checkpoint folder (SM_CHECKPOINT_DIR)")
    return out
