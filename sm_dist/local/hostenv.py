"""The environment one emulated host's first process starts with: what the platform gives, no more.

SageMaker starts a training container with the image's own environment, the request's
`Environment` and two variables of its own, `TRAINING_JOB_NAME` and `TRAINING_JOB_ARN`
(docs/PLATFORM.md §1.1), a third on a warm pool, `SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY`; every `SM_*` variable a script sees is computed inside the container by
its PID 1 — sm_dist's PID 1 (`sm_dist.container.script_env`). Local mode therefore gives each
host just those platform variables and, for the emulation itself, `SM_DIST_*` settings: the
rendezvous and master ports (free ones: another job on this machine may hold SageMaker's fixed
29400 and 7777), and — only where a host cannot have /opt/ml and its own /etc/hosts
(`sm_dist.local.mountns`) — where its folder is (`SM_DIST_OPT_ML`) and a loopback rendezvous.

Under network isolation (docs/PLATFORM.md §1.7: no outbound calls, S3 included, and no AWS
credentials in the container; only the peers) a host gets no S3 endpoint and no credentials: the
local endpoint's address and keys are left out, and the places boto3 would find credentials besides
the environment — this user's ~/.aws files, an EC2 instance's metadata service — are pointed at
nothing. The hosts still reach each other on the loopback, as peers do. The emulated checkpoint
sync runs in local mode's own process (`sm_dist.local.ckpt_sync`), as SageMaker's runs outside the
container, and keeps working.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from sm_dist.contract.container import (
    LOCAL_LOG_ENV,
    OPT_ML_ENV,
    RDZV_HOST_ENV,
    WARMPOOL_CACHE_DIR,
    WARMPOOL_CACHE_ENV,
    WARMPOOL_CACHE_FOLDERS,
    remap,
)
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.layout import HostRoot

#: Variables of the caller's machine that must not leak into an emulated container: they would
#: change what the runtime detects (the same list the test suite strips), or, for AWS_*, let a
#: local job reach the caller's AWS account (local mode sets its own endpoint and fake keys).
_HOST_ONLY = re.compile(
    r"^(AWS_.*|SM_.*|SAGEMAKER_.*|TRAINING_JOB_.*|TORCHELASTIC_.*|PET_.*|SLURM_.*|RANK|LOCAL_RANK|WORLD_SIZE|"
    r"LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_RANK|ROLE_WORLD_SIZE|ROLE_NAME|MASTER_ADDR|MASTER_PORT)$"
)
#: What an isolated host gets instead of the endpoint and keys: no shared credentials or config file
#: (this machine's user may have them), no instance metadata (this machine may be an EC2 instance).
ISOLATED_ENV = {"AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_CONFIG_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true"}
#: A fake but well-formed ARN: local jobs have no account.
_ARN = "arn:aws:sagemaker:local:000000000000:training-job/{name}"


def platform_env(config: LocalJobConfig) -> dict[str, str]:
    """The variables SageMaker itself sets in every training container of the job."""
    return {"TRAINING_JOB_NAME": config.job_name, "TRAINING_JOB_ARN": _ARN.format(name=config.job_name)}


def host_environment(
    config: LocalJobConfig,
    layout: HostRoot,
    ports: Mapping[str, int],
    *,
    private: bool,
    extra: Mapping[str, str] | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The full environment of the host's first process.

    `base` (default `os.environ`) minus anything SageMaker- or torchrun-specific, then the request's
    `Environment` (`Plan.environment`), then the platform's variables, the emulation's ports (`ports`:
    RDZV_PORT_ENV, MASTER_PORT_ENV) and `extra` (the S3 endpoint, the process count) — later wins.
    `private`: the host sees its folder at /opt/ml and its peers by name; else every path is
    remapped to its folder and the rendezvous is on the loopback address. Under the job's network
    isolation `extra`'s AWS_* variables (the endpoint, its keys, the region) are left out and
    `ISOLATED_ENV` added.
    """
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not _HOST_ONLY.match(k)}
    env.update(config.environment if private else {k: remap(v, layout.root) for k, v in config.environment.items()})
    env.update(platform_env(config))
    if config.warm_pool is not None:  # as SageMaker names a warm pool's persistent cache (docs/PLATFORM.md §1.13.1)
        env[WARMPOOL_CACHE_ENV] = WARMPOOL_CACHE_DIR if private else remap(WARMPOOL_CACHE_DIR, layout.root)
        # a cache variable of this process (your shell's HF_HOME; torch sets TORCHINDUCTOR_CACHE_DIR in
        # os.environ once it compiled) is not the container's: PID 1 points it into the pool, as in the cloud
        for name in WARMPOOL_CACHE_FOLDERS:
            if name not in config.environment:
                env.pop(name, None)
    env.update({key: str(port) for key, port in ports.items()})
    if not private:
        env[OPT_ML_ENV] = str(layout.root)
        env[RDZV_HOST_ENV] = "127.0.0.1"
    if config.network_isolation:
        env.update({k: v for k, v in (extra or {}).items() if not k.startswith("AWS_")})
        env.update(ISOLATED_ENV)
    else:
        env.update(extra or {})
    return env


def host_files_env(tmp: Path, log: Path) -> dict[str, str]:
    """A host's own temporary folder `tmp` (created; under the job's root, like an instance's own /tmp:
    torchrun's torchelastic_* logs, PID 1's state and the script's temp files go there, and the
    runner removes it when the attempt ends) and its log file, which its failure names instead of
    the cloud's CloudWatch stream (`contract.container.LOCAL_LOG_ENV`)."""
    tmp.mkdir(parents=True, exist_ok=True)
    return {"TMPDIR": str(tmp), LOCAL_LOG_ENV: str(log)}


__all__ = ["ISOLATED_ENV", "host_environment", "host_files_env", "platform_env"]
