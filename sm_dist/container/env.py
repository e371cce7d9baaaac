"""Which launcher started this process, and what that means: a pure function to a frozen value.

`detect_env(environ)` reads a mapping (`os.environ` by default) and, on SageMaker, the JSON
config files under `$SM_DIST_OPT_ML/input/config`, and returns a :class:`RunEnv`. It never
writes to the environment, imports only the standard library (the container runs it before
torch is loaded) and turns an inconsistent environment into a RuntimeEnvError instead of a
process-group hang.

Precedence: torchrun variables (RANK, WORLD_SIZE, ...) define the ranks whenever present —
also inside SageMaker, where sm_dist's PID 1 starts torchrun; SageMaker variables then add
hosts, job name and directories. Without torchrun, SageMaker (one process per host) or Slurm
(SLURM_PROCID, ...) define the ranks; otherwise the process runs alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sm_dist.container import slurm_nodes
from sm_dist.contract.container import (
    OPT_ML_ENV,
    RDZV_HOST_ENV,
    host_order,
    opt_ml_root,
    read_checkpoint_config,
    read_resource_config,
    remap,
)
from sm_dist.errors import RuntimeEnvError

#: Slurm has no port variable; Lightning's SLURMEnvironment derives one from the job id
#: (15000 + last 4 digits) and falls back to 12910 (docs/PLATFORM.md §2.4). Same rule here.
SLURM_PORT_BASE = 15000
SLURM_DEFAULT_PORT = 12910
#: Slurm job names of interactive allocations, where the user runs their own launcher.
SLURM_INTERACTIVE_NAMES = ("bash", "interactive")

LAUNCHERS = ("torchrun", "sagemaker", "slurm", "single")


@dataclass(frozen=True, kw_only=True)
class RunEnv:
    """The run as this process sees it. Built by :func:`detect_env`; never mutated."""

    launcher: str
    """Who set the ranks: "torchrun", "sagemaker" (one process per host), "slurm" or "single"."""
    on_sagemaker: bool
    """Running inside a SageMaker training container (or local mode's emulation of one)."""
    world_size: int
    """Number of processes in the job."""
    rank: int
    """Global rank of this process, 0..world_size-1."""
    local_rank: int
    """Rank within this host (selects the GPU)."""
    local_world_size: int
    """Processes on this host."""
    node_rank: int
    """Index of this host, 0..num_nodes-1."""
    num_nodes: int
    """Number of hosts."""
    master_addr: str | None
    """Address of rank 0's rendezvous store (None for a single process)."""
    master_port: int | None
    """Port of that store."""
    num_gpus: int
    """GPUs visible on this host (SM_NUM_GPUS or what the caller measured)."""
    hosts: tuple[str, ...]
    """Host names in SageMaker's order (sorted as text: algo-1, algo-10, algo-2); empty when unknown."""
    current_host: str | None
    """This host's name when the platform tells it."""
    job_name: str | None
    """TRAINING_JOB_NAME on SageMaker, SLURM_JOB_ID on Slurm, else None (never TORCHELASTIC_RUN_ID)."""
    restart_count: int
    """How often torchrun (or Slurm) restarted the workers in this job."""
    model_dir: str
    """Where the final model goes (SM_MODEL_DIR; uploaded by SageMaker at the end)."""
    output_dir: str
    """Where other outputs go (SM_OUTPUT_DATA_DIR)."""
    checkpoint_dir: str | None
    """CheckpointConfig.LocalPath on SageMaker when configured, else None."""
    channels: Mapping[str, str] = field(hash=False)
    """Input channel name -> local folder (SM_CHANNEL_*); read-only."""

    @property
    def backend(self) -> str:
        """torch.distributed backend: nccl with GPUs, gloo without."""
        return "nccl" if self.num_gpus > 0 else "gloo"

    @property
    def device_type(self) -> str:
        """"cuda" with GPUs, else "cpu"."""
        return "cuda" if self.num_gpus > 0 else "cpu"

    @property
    def is_distributed(self) -> bool:
        """More than one process."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that logs and writes single-copy files."""
        return self.rank == 0


@dataclass(frozen=True, kw_only=True)
class _Ranks:
    """Where this process sits, as one launcher's variables say (RunEnv's rank fields)."""

    world_size: int
    rank: int
    local_rank: int
    local_world_size: int
    node_rank: int
    num_nodes: int
    master_addr: str | None
    master_port: int | None
    hosts: tuple[str, ...] = ()  # the launcher's own host list (Slurm's), used when SageMaker names none


@dataclass(frozen=True, kw_only=True)
class _SageMakerFacts:
    """What SageMaker's variables and config files say (all empty/None off SageMaker)."""

    on_sagemaker: bool
    hosts: list[str]
    current_host: str | None
    model_dir: str
    output_dir: str
    checkpoint_dir: str | None
    channels: dict[str, str]


def detect_env(environ: Mapping[str, str] | None = None, *, num_gpus: int | None = None) -> RunEnv:
    """Describe the run from `environ` (default: os.environ).

    `num_gpus` is what the caller measured (e.g. torch.cuda.device_count()); when None the
    function stays pure and uses SM_NUM_GPUS, or 0.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    root = opt_ml_root(env)
    sm = _sagemaker_facts(env, root)
    gpus = num_gpus if num_gpus is not None else _int(env, "SM_NUM_GPUS", 0)
    if "RANK" in env or "WORLD_SIZE" in env:
        ranks = _torchrun_ranks(env)
        launcher = "torchrun"
    elif sm.on_sagemaker and sm.hosts:
        ranks = _sagemaker_ranks(env, sm)
        launcher = "sagemaker"
    elif _is_slurm(env):
        ranks = _slurm_ranks(env)
        launcher = "slurm"
    else:
        ranks = _Ranks(world_size=1, rank=0, local_rank=0, local_world_size=1, node_rank=0,
                       num_nodes=1, master_addr=None, master_port=None)
        launcher = "single"
    _check_ranks(launcher, ranks)
    return RunEnv(
        launcher=launcher,
        on_sagemaker=sm.on_sagemaker,
        num_gpus=gpus,
        hosts=tuple(sm.hosts or ranks.hosts),
        current_host=sm.current_host or env.get("SLURMD_NODENAME") or None,
        job_name=env.get("TRAINING_JOB_NAME") or env.get("SLURM_JOB_ID") or None,
        restart_count=_int(env, "TORCHELASTIC_RESTART_COUNT", _int(env, "SLURM_RESTART_COUNT", 0)),
        model_dir=sm.model_dir,
        output_dir=sm.output_dir,
        checkpoint_dir=sm.checkpoint_dir,
        channels=MappingProxyType(sm.channels),
        world_size=ranks.world_size, rank=ranks.rank, local_rank=ranks.local_rank,
        local_world_size=ranks.local_world_size, node_rank=ranks.node_rank, num_nodes=ranks.num_nodes,
        master_addr=ranks.master_addr, master_port=ranks.master_port,
    )


def _int(env: Mapping[str, str], key: str, default: int | None = None) -> int:
    raw = env.get(key)
    if raw is None or raw == "":
        if default is None:
            raise RuntimeEnvError(f"{key} is not set; the launcher must export it")
        return default
    try:
        return int(raw)
    except ValueError:
        raise RuntimeEnvError(f"{key}={raw!r}: expected an integer") from None


def _sagemaker_facts(env: Mapping[str, str], root: str) -> _SageMakerFacts:
    """Hosts, directories and channels from SageMaker's env vars and config files."""
    resource = read_resource_config(root)
    on_sm = resource is not None or "SM_CURRENT_HOST" in env or "TRAINING_JOB_NAME" in env or OPT_ML_ENV in env
    hosts = list(resource.hosts) if resource is not None else None
    if hosts is None and env.get("SM_HOSTS"):
        try:
            hosts = json.loads(env["SM_HOSTS"])
        except ValueError:
            raise RuntimeEnvError(f"SM_HOSTS={env['SM_HOSTS']!r}: expected a JSON list of host names") from None
    hosts = list(host_order(hosts or ()))
    current = resource.current_host if resource is not None else env.get("SM_CURRENT_HOST")
    if current and hosts and current not in hosts:
        raise RuntimeEnvError(f"current host {current!r} is not among the hosts {hosts}")
    ckpt_config = read_checkpoint_config(root) if on_sm else None
    base = root if on_sm else "."
    channels = {
        key[len("SM_CHANNEL_"):].lower(): remap(value, root)
        for key, value in env.items()
        if key.startswith("SM_CHANNEL_")
    }
    return _SageMakerFacts(
        on_sagemaker=on_sm, hosts=hosts, current_host=current, channels=channels,
        model_dir=remap(env.get("SM_MODEL_DIR") or f"{base}/model", root),
        output_dir=remap(env.get("SM_OUTPUT_DATA_DIR") or f"{base}/output/data", root),
        checkpoint_dir=ckpt_config.local_path if ckpt_config else None,
    )


def _torchrun_ranks(env: Mapping[str, str]) -> _Ranks:
    world = _int(env, "WORLD_SIZE")
    local_world = _int(env, "LOCAL_WORLD_SIZE", 1 if world == 1 else None)
    addr = env.get("MASTER_ADDR") or None
    port = _int(env, "MASTER_PORT", 0) or None
    if world > 1 and (addr is None or port is None):
        raise RuntimeEnvError(
            f"WORLD_SIZE={world} but MASTER_ADDR={addr!r} MASTER_PORT={port!r}: a multi-process "
            "run needs both; start it with torchrun (which sets them) or export them"
        )
    return _Ranks(
        world_size=world,
        rank=_int(env, "RANK", 0 if world == 1 else None),
        local_rank=_int(env, "LOCAL_RANK", 0 if world == 1 else None),
        local_world_size=local_world,
        node_rank=_int(env, "GROUP_RANK", 0),
        num_nodes=_int(env, "GROUP_WORLD_SIZE", max(1, world // max(local_world, 1))),
        master_addr=addr,
        master_port=port,
    )


def _sagemaker_ranks(env: Mapping[str, str], sm: _SageMakerFacts) -> _Ranks:
    """SageMaker without torchrun: one process per host, ranked in SageMaker's host order (as ModelTrainer does)."""
    hosts = sm.hosts
    current = sm.current_host
    if not current:
        raise RuntimeEnvError("SageMaker hosts are known but the current host is not (SM_CURRENT_HOST)")
    return _Ranks(
        world_size=len(hosts),
        rank=hosts.index(current),
        local_rank=0,
        local_world_size=1,
        node_rank=hosts.index(current),
        num_nodes=len(hosts),
        master_addr=env.get(RDZV_HOST_ENV) or hosts[0],
        master_port=_int(env, "SM_MASTER_PORT", 7777) if len(hosts) > 1 else None,
    )


def _is_slurm(env: Mapping[str, str]) -> bool:
    return "SLURM_NTASKS" in env and env.get("SLURM_JOB_NAME") not in SLURM_INTERACTIVE_NAMES


def _slurm_ranks(env: Mapping[str, str]) -> _Ranks:
    world = _int(env, "SLURM_NTASKS")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    hosts = slurm_nodes.expand(nodelist) if nodelist else []
    num_nodes = _int(env, "SLURM_JOB_NUM_NODES", _int(env, "SLURM_NNODES", max(len(hosts), 1)))
    addr = env.get("MASTER_ADDR") or (hosts[0] if hosts else None)
    if world > 1 and addr is None:
        raise RuntimeEnvError(
            f"SLURM_NTASKS={world} but neither SLURM_JOB_NODELIST nor MASTER_ADDR is set: "
            "run the script with srun inside an allocation, or export MASTER_ADDR"
        )
    job_id = env.get("SLURM_JOB_ID", "")
    default_port = SLURM_PORT_BASE + int(job_id[-4:]) if job_id[-4:].isdigit() else SLURM_DEFAULT_PORT
    return _Ranks(
        world_size=world,
        rank=_int(env, "SLURM_PROCID"),
        local_rank=_int(env, "SLURM_LOCALID", 0),
        local_world_size=slurm_nodes.tasks_on_node(env, world, num_nodes),
        node_rank=_int(env, "SLURM_NODEID", 0),
        num_nodes=num_nodes,
        master_addr=addr if world > 1 else None,
        master_port=_int(env, "MASTER_PORT", default_port) if world > 1 else None,
        hosts=tuple(hosts),  # Slurm's own order: SLURM_NODEID indexes the expanded node list
    )


def _check_ranks(launcher: str, r: _Ranks) -> None:
    """Reject combinations that would otherwise hang in the rendezvous."""
    checks = [
        (r.world_size >= 1, f"world size {r.world_size} must be >= 1"),
        (0 <= r.rank < r.world_size, f"rank {r.rank} is outside 0..{r.world_size - 1}"),
        (r.local_world_size >= 1, f"local world size {r.local_world_size} must be >= 1"),
        (0 <= r.local_rank < r.local_world_size, f"local rank {r.local_rank} is outside 0..{r.local_world_size - 1}"),
        (r.local_world_size <= r.world_size,
         f"local world size {r.local_world_size} exceeds world size {r.world_size}"),
        (0 <= r.node_rank < r.num_nodes, f"node rank {r.node_rank} is outside 0..{r.num_nodes - 1}"),
    ]
    for ok, message in checks:
        if not ok:
            raise RuntimeEnvError(f"inconsistent {launcher} environment: {message}")


__all__ = ["LAUNCHERS", "RunEnv", "detect_env"]
