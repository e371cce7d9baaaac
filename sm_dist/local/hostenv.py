"""The environment SageMaker gives the first process of one host, pointing at a local root.

Mirrors what SDK v3's container `environment.py` exports (docs/PLATFORM.md §1.2 env-var table), plus the
platform's TRAINING_JOB_NAME/ARN and `Plan.environment`. Differences a user should know about:
all hosts run on 127.0.0.1, so SM_MASTER_ADDR is 127.0.0.1 and SM_MASTER_PORT a free port
(SageMaker hard-codes algo-1:7777), and SM_DIST_OPT_ML tells sm_dist's launcher where /opt/ml is.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from sm_dist.contract.container import OPT_ML_ENV, SM_DIR_VARIABLES, remap
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.layout import HostRoot, channel_names, resource_config

#: Variables of the caller's machine that must not leak into an emulated container: they would
#: change what the runtime detects (the same list the test suite strips), or, for AWS_*, let a
#: local job reach the caller's AWS account (local mode sets its own endpoint and fake keys).
_HOST_ONLY = re.compile(
    r"^(AWS_.*|SM_.*|SAGEMAKER_.*|TRAINING_JOB_.*|TORCHELASTIC_.*|PET_.*|SLURM_.*|RANK|LOCAL_RANK|WORLD_SIZE|"
    r"LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_RANK|ROLE_WORLD_SIZE|ROLE_NAME|MASTER_ADDR|MASTER_PORT)$"
)
#: A fake but well-formed ARN: local jobs have no account.
_ARN = "arn:aws:sagemaker:local:000000000000:training-job/{name}"


def _hp_value(text: str) -> object:
    """SM_HPS holds each value json-decoded when possible ("3" -> 3), as SDK v3 does."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def sagemaker_env(config: LocalJobConfig, layout: HostRoot, master_port: int) -> dict[str, str]:
    """SM_* variables of `layout.host`, with every /opt/ml path remapped to its root."""
    hosts = list(config.hosts)
    root = layout.root
    channels = channel_names(config)
    hps = {k: _hp_value(v) for k, v in config.hyperparameters.items()}
    env = {
        "TRAINING_JOB_NAME": config.job_name,
        "TRAINING_JOB_ARN": _ARN.format(name=config.job_name),
        "SM_HOSTS": json.dumps(hosts),
        "SM_CURRENT_HOST": layout.host,
        "SM_HOST_COUNT": str(len(hosts)),
        "SM_CURRENT_HOST_RANK": str(hosts.index(layout.host)),
        "SM_MASTER_ADDR": "127.0.0.1",
        "SM_MASTER_PORT": str(master_port),
        "SM_NUM_GPUS": "0",
        "SM_NUM_NEURONS": "0",
        "SM_NUM_CPUS": str(os.cpu_count() or 1),
        "SM_CURRENT_INSTANCE_TYPE": config.instance_type,
        "SM_NETWORK_INTERFACE_NAME": "eth0",
        "SM_HPS": json.dumps(hps),
        "SM_CHANNELS": json.dumps(channels),
        "SM_RESOURCE_CONFIG": json.dumps(resource_config(config, layout.host)),
        "SM_LOG_LEVEL": "20",
        OPT_ML_ENV: str(root),
    }
    for key, value in config.hyperparameters.items():
        env["SM_HP_" + key.replace("-", "_").upper()] = value
    for name in channels:
        env["SM_CHANNEL_" + name.upper()] = str(layout.channel_dir(name))
    env.update({key: remap(path, root) for key, path in SM_DIR_VARIABLES.items()})
    return env


def host_environment(
    config: LocalJobConfig,
    layout: HostRoot,
    master_port: int,
    extra: Mapping[str, str] | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The full environment of the host's first process.

    `base` (default `os.environ`) minus anything SageMaker- or torchrun-specific, then
    `Plan.environment` remapped, then the SageMaker variables, then `extra` (local-mode
    settings such as the rendezvous override and the S3 endpoint) — later wins.
    """
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not _HOST_ONLY.match(k)}
    env.update({k: remap(v, layout.root) for k, v in config.environment.items()})
    env.update(sagemaker_env(config, layout, master_port))
    env.update(extra or {})
    return env
