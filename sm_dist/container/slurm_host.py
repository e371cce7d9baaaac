"""One Slurm node's start: lay out its /opt/ml folder, then become PID 1, as a SageMaker instance would.

The Slurm backend's batch script (`sm_dist.slurm.script`) runs, once per node (`srun
--ntasks-per-node=1`):

    python3 -m sm_dist.container.slurm_host JOB_DIR -- python3 -m sm_dist.container.pid1

JOB_DIR is the job's folder on the cluster's shared file system, staged by the submitting
machine and laid out as `sm_dist.contract.slurm_layout` says.
This module, standard library only, then

1. makes `JOB_DIR/hosts/<node>` afresh (a requeued job is a new instance) laid out like /opt/ml:
   input/config/resourceconfig.json with the job's nodes (`SLURM_JOB_NODELIST`, expanded by
   `slurm_nodes`) as its hosts and this node (`SLURMD_NODENAME`) as the current one, the other
   config files, input/data/code (a link to the shared bundle), model/, output/, checkpoints/;
2. sets what local mode sets for an emulated host (`sm_dist.contract.container`'s stand-ins):
   SM_DIST_OPT_ML (that folder), SM_DIST_RDZV_HOST (the address of the first host of the node
   list: torchrun's c10d store), SM_DIST_RDZV_PORT and SM_DIST_MASTER_PORT (from the job id,
   Lightning's rule, docs/PLATFORM.md §2.4: every node computes the same port without talking),
   SM_DIST_LOCAL_ADDR (this node's address) and TRAINING_JOB_NAME;
3. execs the command after `--` (the plan's container command: sm_dist's PID 1).

A node name that does not resolve (a cluster without DNS for its nodes, or the test suite's
cluster) is looked up in Slurm's own table (`scontrol show node NAME`: its NodeAddr).

`python3 -m sm_dist.container.slurm_host --kill-rank JOB_ID` is the other use, for `--chaos kill`:
run on a node (`srun --overlap`), it SIGKILLs one worker rank of that Slurm job there.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from sm_dist.container import slurm_nodes
from sm_dist.container.env import SLURM_DEFAULT_PORT, SLURM_PORT_BASE
from sm_dist.contract.container import (
    CHECKPOINT_CONFIG,
    CODE_CHANNEL,
    HYPERPARAMETERS,
    INPUT_DATA_CONFIG,
    LOCAL_ADDR_ENV,
    LOCAL_LOG_ENV,
    MASTER_PORT_ENV,
    OPT_ML_ENV,
    RDZV_HOST_ENV,
    RDZV_PORT_ENV,
    RESOURCE_CONFIG,
    TENSORBOARD_CONFIG,
    remap,
)
from sm_dist.contract.slurm_layout import CODE_FOLDER, CONFIG_FOLDER, HOSTS_FOLDER, JOB_FILE, LOGS_FOLDER
from sm_dist.errors import RuntimeEnvError

#: The master port sits this far above the rendezvous port (both from the job id).
MASTER_PORT_OFFSET = 10000
#: The instance group name SageMaker writes for a homogeneous cluster (resourceconfig.json).
GROUP = "homogeneousCluster"


def job_ports(job_id: str) -> tuple[int, int]:
    """(rendezvous port, master port) of a Slurm job: 15000 + the id's last 4 digits (Lightning's rule)."""
    tail = job_id[-4:]
    port = SLURM_PORT_BASE + int(tail) if tail.isdigit() else SLURM_DEFAULT_PORT
    return port, port + MASTER_PORT_OFFSET


def node_address(name: str, run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> str:
    """How the other nodes reach node `name`: the name itself when it resolves, else its NodeAddr in
    Slurm's table; RuntimeEnvError when neither answers."""
    try:
        socket.getaddrinfo(name, None)
        return name
    except OSError:
        pass
    try:
        out = run(["scontrol", "show", "node", name, "-o"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeEnvError(f"node {name!r} does not resolve and scontrol cannot say its address: {exc}") from None
    for field in out.split():
        key, _, value = field.partition("=")
        if key == "NodeAddr" and value:
            return value
    raise RuntimeEnvError(f"node {name!r} does not resolve and `scontrol show node {name}` names no NodeAddr")


def lay_out(job_dir: Path, node: str, hosts: list[str]) -> Path:
    """This node's /opt/ml folder under JOB_DIR/hosts, made afresh; returns it."""
    job = json.loads((job_dir / CONFIG_FOLDER / JOB_FILE).read_text(encoding="utf-8"))
    root = job_dir / HOSTS_FOLDER / node
    if root.exists():
        shutil.rmtree(root)
    config = root / "input" / "config"
    config.mkdir(parents=True)
    for sub in ("model", "output/data", "output/tensorboard", "checkpoints", "input/data"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "input" / "data" / CODE_CHANNEL).symlink_to(job_dir / CODE_FOLDER, target_is_directory=True)
    for name, folder in job.get("channels", {}).items():  # shared folders: every node reads the same files
        (root / "input" / "data" / name).symlink_to(folder, target_is_directory=True)
    for name in (HYPERPARAMETERS, INPUT_DATA_CONFIG, CHECKPOINT_CONFIG, TENSORBOARD_CONFIG):
        source = job_dir / CONFIG_FOLDER / name
        if source.is_file():
            shutil.copyfile(source, config / name)
    resource = {"current_host": node, "hosts": sorted(hosts), "current_group_name": GROUP,
                "instance_groups": [{"instance_group_name": GROUP, "instance_type": job.get("instance_type"),
                                     "hosts": sorted(hosts)}]}
    if job.get("instance_type"):
        resource["current_instance_type"] = job["instance_type"]
    (config / RESOURCE_CONFIG).write_text(json.dumps(resource, indent=2) + "\n", encoding="utf-8")
    return root


def host_env(job_dir: Path, root: Path, env: Mapping[str, str], hosts: list[str], node: str) -> dict[str, str]:
    """The environment PID 1 starts with on this node."""
    job = json.loads((job_dir / CONFIG_FOLDER / JOB_FILE).read_text(encoding="utf-8"))
    out = dict(env)
    out.update({key: remap(value, root) for key, value in job.get("environment", {}).items()})
    rdzv_port, master_port = job_ports(env.get("SLURM_JOB_ID", ""))
    first = sorted(hosts)[0]  # SageMaker's order (host_order): the first host hosts the store
    out.update({
        OPT_ML_ENV: str(root), RDZV_HOST_ENV: node_address(first), RDZV_PORT_ENV: str(rdzv_port),
        MASTER_PORT_ENV: str(master_port), LOCAL_ADDR_ENV: node_address(node),
        LOCAL_LOG_ENV: str(job_dir / LOGS_FOLDER / f"{node}.log"),
        "TRAINING_JOB_NAME": str(job["job_name"]),
    })
    return out


def start(job_dir: Path, command: list[str], env: Mapping[str, str]) -> None:
    """Lay this node out and exec `command` (PID 1)."""
    node = env.get("SLURMD_NODENAME") or socket.gethostname()
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or node
    hosts = slurm_nodes.expand(nodelist)
    root = lay_out(job_dir, node, hosts)
    child = host_env(job_dir, root, env, hosts, node)
    os.chdir(root / "input" / "data" / CODE_CHANNEL)
    os.execvpe(command[0], command, child)


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def workers(job_id: str, node: str) -> list[int]:
    """PIDs of this Slurm job's worker ranks on `node` (torchrun's children: they have LOCAL_RANK and
    TORCHELASTIC_RUN_ID; torchrun itself has neither)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        env = _environ(int(entry.name))
        if (env.get("SLURM_JOB_ID") == job_id and env.get("SLURMD_NODENAME", node) == node
                and "LOCAL_RANK" in env and "TORCHELASTIC_RUN_ID" in env):
            found.append(int(entry.name))
    return sorted(found)


def kill_rank(job_id: str, node: str) -> int:
    """SIGKILL one random worker rank of Slurm job `job_id` on this node; 0 when one was killed, 1 if none runs."""
    pids = workers(job_id, node)
    if not pids:
        print(f"[sm_dist] chaos: no worker of job {job_id} runs on {node}", file=sys.stderr)
        return 1
    pid = random.choice(pids)
    os.kill(pid, signal.SIGKILL)
    print(f"[sm_dist] chaos: SIGKILL worker pid {pid} of job {job_id} on {node}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--kill-rank":
        return kill_rank(args[1], os.environ.get("SLURMD_NODENAME") or socket.gethostname())
    if len(args) < 3 or args[1] != "--":
        print("usage: python3 -m sm_dist.container.slurm_host JOB_DIR -- COMMAND...", file=sys.stderr)
        return 2
    try:
        start(Path(args[0]), args[2:], os.environ)
    except (OSError, ValueError, RuntimeEnvError) as exc:
        print(f"[sm_dist launcher] cannot start this node: {exc}", file=sys.stderr)
        return 2
    return 0  # not reached: exec


if __name__ == "__main__":
    sys.exit(main())
