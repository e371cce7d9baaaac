"""Where this host sits in the job and how torchrun is started: PID 1's pure parts.

`read_topology` turns ``input/config/resourceconfig.json`` (under $SM_DIST_OPT_ML) and the
overrides into a frozen `Topology`; `torchrun_argv` and `worker_env` build the command and the
environment from it. Standard library only (the container runs this before torch). Overrides:
SM_DIST_RDZV_HOST / SM_DIST_RDZV_PORT (rendezvous; local mode: 127.0.0.1 and a free port),
SM_DIST_LOCAL_ADDR (how other hosts reach this one), SM_DIST_NPROC_PER_NODE.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sm_dist._resources import resource_dir
from sm_dist.container import worker
from sm_dist.container.hang_watch import nccl_flight_recorder
from sm_dist.container.script_env import Host, cpu_count, script_environment
from sm_dist.contract import torch_support
from sm_dist.contract.checkpoint import CheckpointMode
from sm_dist.contract.container import (
    EFA_RDMA_TYPES,
    EFA_TYPES,
    LOCAL_ADDR_ENV,
    NETWORK_ISOLATION_ENV,
    RDZV_HOST_ENV,
    RDZV_PORT_ENV,
    RESOURCE_CONFIG,
    config_path,
    nproc_per_node,
    read_resource_config,
)
from sm_dist.contract.sagemaker import STOP_GRACE_SECONDS
from sm_dist.errors import (  # ContainerStartError: reported via output/failure
    ContainerStartError,
    RuntimeEnvError,
)
from sm_dist.jobspec import (
    INTERRUPT_MARKER_ENV,
    JOB_SPEC_ENV,
    JOB_SPEC_FILENAME,
    JobSpec,
    entry_is_function,
)

_log = logging.getLogger("sm_dist.pid1")

#: What torchrun runs (with --module) before a script whose checkpoint folder is synced.
WORKER_MODULE = "sm_dist.container.worker"

#: torchrun's own default port for c10d rendezvous (torch/distributed/run.py docs).
DEFAULT_RDZV_PORT = 29400
#: SageMaker sends SIGKILL STOP_GRACE_SECONDS (120) after SIGTERM; torchrun waits this long for the
#: workers to commit their checkpoint before it kills them, leaving 20 s for the rest.
SHUTDOWN_TIMEOUT_S = STOP_GRACE_SECONDS - 20
#: "Hostname information may not be immediately available" (docs/PLATFORM.md §1.1): retry resolution.
HOST_RESOLVE_TIMEOUT_S = 600
HOST_RESOLVE_INTERVAL_S = 2.0
#: The first pause between tries of algo-1's rendezvous store; it doubles up to HOST_RESOLVE_INTERVAL_S.
STORE_FIRST_TRY_S = 0.1
#: How long hosts wait for each other: instances of one job routinely start minutes apart (image
#: pull, data download). A host waits this long for algo-1's rendezvous store to accept
#: connections (torch's c10d client gives up after 60 s), then torchrun's rendezvous waits this
#: long for every host to join (its `join_timeout`, default 600 s; docs/PLATFORM.md §2.2).
RDZV_WAIT_S = 1800
RDZV_LOG_EVERY_S = 30.0


@dataclass(frozen=True)
class Topology:
    """This host's place in the job, from resourceconfig.json and the overrides."""

    hosts: tuple[str, ...]
    current_host: str
    node_rank: int
    rdzv_host: str
    rdzv_port: int
    nproc_per_node: int
    num_gpus: int
    local_addr: str
    """How the other hosts reach this one (torchrun --local-addr; else it uses the FQDN, which
    need not resolve across a cluster whose image entrypoint did not set the hostname)."""
    instance_type: str | None = None
    interface: str | None = None

    @property
    def nnodes(self) -> int:
        return len(self.hosts)

    @property
    def emulated(self) -> bool:
        """Every host is this machine (local mode's loopback rendezvous)."""
        return self.rdzv_host in ("localhost", "::1") or self.rdzv_host.startswith("127.")


def count_gpus() -> int:
    """GPUs on this host, counted as SageMaker's own driver does (`nvidia-smi --list-gpus`)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "--list-gpus"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.strip().startswith("GPU"))


def read_topology(root: Path, env: Mapping[str, str], spec: JobSpec, num_gpus: int) -> Topology:
    """Hosts, rank and rendezvous endpoint of this host."""
    try:
        config = read_resource_config(root)
    except RuntimeEnvError as exc:
        raise ContainerStartError(f"cannot read {exc}") from None
    if config is None:
        raise ContainerStartError(f"cannot read {config_path(root, RESOURCE_CONFIG)}: no such file")
    hosts, current = config.hosts, config.current_host
    rdzv_override = env.get(RDZV_HOST_ENV)  # local mode where hosts cannot resolve each other: a loopback address
    node_rank = hosts.index(current)
    return Topology(
        hosts=hosts, current_host=current, node_rank=node_rank,
        rdzv_host=rdzv_override or hosts[0], rdzv_port=int(env.get(RDZV_PORT_ENV) or DEFAULT_RDZV_PORT),
        nproc_per_node=nproc_per_node(env, spec.nproc_per_node, num_gpus), num_gpus=num_gpus,
        local_addr=env.get(LOCAL_ADDR_ENV) or _emulated_addr(rdzv_override, node_rank) or current,
        instance_type=config.instance_type, interface=config.network_interface,
    )


def _emulated_addr(rdzv_host: str | None, node_rank: int) -> str | None:
    """This host's address when every host is this machine (a loopback rendezvous).

    torchrun's c10d rendezvous numbers the hosts by sorting their addresses as strings (then
    by pid). Were every emulated host 127.0.0.1, the pids would decide and global rank 0 could
    land on any host. Each gets its own loopback address instead, every octet three digits so
    that string order is host order: algo-1 -> 127.100.100.100, algo-2 -> 127.100.100.101, ...
    (Linux routes all of 127.0.0.0/8 to the loopback interface.)
    """
    if rdzv_host is None:
        return None
    if rdzv_host not in ("localhost", "::1") and not rdzv_host.startswith("127."):
        return rdzv_host
    return f"127.{100 + node_rank // 10000}.{100 + node_rank // 100 % 100}.{100 + node_rank % 100}"


def script_argv(spec: JobSpec, code_dir: Path) -> list[str]:
    """The training script and its arguments: the entry, the verbatim args, then `--key value` per
    hyperparameter (a bare `--key` for an empty value: store_true flags)."""
    if entry_is_function(spec.entry):
        runner = code_dir / "sm_dist" / "_entrypoints" / "run_function.py"
        if not runner.is_file():  # editable install / source checkout
            runner = resource_dir("entrypoints") / "run_function.py"
        argv = [str(runner), spec.entry]
    else:
        script = code_dir / spec.entry
        if not script.is_file():
            raise ContainerStartError(f"entry script {spec.entry!r} not found in the code dir {code_dir}")
        argv = [str(script)]
    return argv + spec.script_args()


def restores_folder(spec: JobSpec, isolated: bool = False) -> bool:
    """Whether restarted workers first get the checkpoint folder SageMaker would restore
    (`sm_dist.container.worker`): a job checkpointing through CheckpointConfig (the folder is synced
    to a URI) whose entry is a script — or any entry under network isolation, where sm_dist's
    checkpointer cannot fetch another host's shards from S3 either (docs/PLATFORM.md §1.7)."""
    return (isolated or not entry_is_function(spec.entry)) and spec.checkpoint.mode is CheckpointMode.SAGEMAKER_SYNC


def torchrun_argv(topo: Topology, spec: JobSpec, code_dir: Path, run_id: str) -> list[str]:
    """`python -m torch.distributed.run …` for this host. Every worker starts as
    `sm_dist.container.worker`, which execs the script."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        f"--nnodes={topo.nnodes}",
        f"--nproc-per-node={topo.nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={topo.rdzv_host}:{topo.rdzv_port}",
        f"--rdzv-id={run_id}",
        # Name the store host explicitly: hostname matching fails when every host is 127.0.0.1.
        f"--rdzv-conf=is_host={'true' if topo.node_rank == 0 else 'false'},join_timeout={RDZV_WAIT_S}",
        f"--local-addr={topo.local_addr}",
        f"--max-restarts={spec.max_restarts}",
        "--module", WORKER_MODULE,
        *script_argv(spec, code_dir),
    ]


def worker_env(env: Mapping[str, str], topo: Topology, root: Path, code_dir: Path, marker: Path,
               state_dir: Path | None = None, spec: JobSpec | None = None) -> dict[str, str]:
    """torchrun's environment: the container's plus sm_dist's and SageMaker-style variables.
    `state_dir`: PID 1's scratch folder for `sm_dist.container.worker`."""
    out = dict(env)
    if state_dir is not None:
        out[worker.STATE_ENV] = str(state_dir)
        out[worker.RDZV_ENDPOINT_ENV] = f"{topo.rdzv_host}:{topo.rdzv_port}"
        out[worker.HOST_ADDR_ENV] = topo.local_addr  # where the peers reach this host (an isolated restore)
        if spec is not None and restores_folder(spec, env.get(NETWORK_ISOLATION_ENV) == "1"):
            out[worker.RESTORE_ENV] = "1"
    out[JOB_SPEC_ENV] = str(code_dir / JOB_SPEC_FILENAME)
    out[INTERRUPT_MARKER_ENV] = str(marker)
    out["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    out.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(SHUTDOWN_TIMEOUT_S))
    out.setdefault("PYTHONUNBUFFERED", "1")
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(code_dir), env.get("PYTHONPATH", "")) if p)
    if topo.interface:  # as SageMaker's driver does (docs/PLATFORM.md §1.2)
        out.setdefault("NCCL_SOCKET_IFNAME", topo.interface)
        if not topo.emulated:  # the checkpointer's gloo groups: the same interface, not the hostname's guess
            out.setdefault("GLOO_SOCKET_IFNAME", topo.interface)
    out.setdefault("NCCL_PROTO", "simple")  # SageMaker's own torchrun driver always sets it (§1.2)
    if topo.num_gpus:
        nccl_flight_recorder(out, root / "output" / "data" / f"nccl-trace-{topo.current_host}-rank")
    region = region_of(env.get("TRAINING_JOB_ARN", ""))
    if region:  # the in-container AWS clients (checkpoints to S3) need the job's region
        out.setdefault("AWS_REGION", region)
        out.setdefault("AWS_DEFAULT_REGION", region)
    if topo.instance_type in EFA_TYPES:
        out.setdefault("FI_PROVIDER", "efa")
    if topo.instance_type in EFA_RDMA_TYPES:
        out.setdefault("FI_EFA_USE_DEVICE_RDMA", "1")
        out.setdefault("RDMAV_FORK_SAFE", "1")
    # SageMaker's variables, as ModelTrainer's container computes them (its own values win there too:
    # sm_train.sh sources them after the container starts)
    out.update(script_environment(root, env, Host(
        hosts=topo.hosts, current_host=topo.current_host, instance_type=topo.instance_type,
        interface=topo.interface, num_gpus=topo.num_gpus, num_cpus=cpu_count(),
        master_addr=topo.rdzv_host if topo.emulated else None,
        entry_script=None if spec is None or entry_is_function(spec.entry) else spec.entry,
        processes_per_host=topo.nproc_per_node,
    )))
    return out


def region_of(job_arn: str) -> str | None:
    """The region of a training job ARN (arn:aws:sagemaker:<region>:<account>:training-job/<name>)."""
    parts = job_arn.split(":")
    return parts[3] if len(parts) > 5 and parts[0] == "arn" and parts[3] else None


def check_torch(version: str | None) -> str | None:
    """The image's torch against sm_dist's supported range: ContainerStartError below the floor;
    a warning line above the newest tested; None otherwise (or when torch is not installed:
    the script may not need it)."""
    if version is None:
        return None
    refused = torch_support.refusal(version)
    if refused:
        raise ContainerStartError(refused)
    return torch_support.untested(version)


def installed_torch() -> str | None:
    """The torch version installed in this container, read without importing torch."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


def wait_for_store(host: str, port: int, timeout: float = RDZV_WAIT_S, interval: float = HOST_RESOLVE_INTERVAL_S,
                   log_every: float = RDZV_LOG_EVERY_S) -> None:
    """Block until algo-1's rendezvous store accepts connections, saying so while it waits.

    The first tries come quickly (STORE_FIRST_TRY_S, doubling up to `interval`): algo-1's torchrun opens its
    store a second or two after the hosts start, and a refused connection costs nothing. A fixed 2 s pause
    after the first refusal was most of local mode's start-up gap between hosts (strace of a 2-host job,
    2026-11-29: algo-2 asked at +0.16 s, was refused, slept 2.0 s; algo-1's store was up at +0.3 s)."""
    start = time.monotonic()
    last_log = start
    pause = min(STORE_FIRST_TRY_S, interval)
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(interval, 5.0)):
                return
        except OSError as exc:
            waited = time.monotonic() - start
            if waited >= timeout:
                raise ContainerStartError(f"the rendezvous store on {host}:{port} did not accept connections in "
                                    f"{timeout:.0f} s ({exc}); did the first host start?") from None
            if time.monotonic() - last_log >= log_every:
                last_log = time.monotonic()
                _log.info("waiting for the rendezvous store on %s:%d (the first host): %.0f s of %.0f s", host, port,
                          waited, timeout)
            time.sleep(pause)
            pause = min(pause * 2, interval)


def wait_for_host(host: str, timeout: float = HOST_RESOLVE_TIMEOUT_S) -> None:
    """Block until `host` resolves: SageMaker hosts may not be resolvable at start."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.getaddrinfo(host, None)
            return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise ContainerStartError(f"rendezvous host {host!r} did not resolve in {timeout:.0f} s: {exc}") from None
            _log.info("waiting for %s to resolve (%s)", host, exc)
            time.sleep(HOST_RESOLVE_INTERVAL_S)
