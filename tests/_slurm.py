"""A real two-node Slurm cluster on this machine, for the Slurm backend's tests (tests/slurm/).

`SlurmCluster(root).start()` writes a slurm.conf into `root` (free ports; one partition `debug` of
two nodes, `sm-n1` and `sm-n2`, each with its own loopback address), starts a munged with its own
key and socket, one slurmctld and one `slurmd -N <node>` per node, each daemon in its own UTS
namespace (`unshare --uts` + `hostname`) so that each believes it is its node, and waits until both
nodes are idle. Its timers are short (docs/PLATFORM.md §12): a requeued job waits the job credential's lifetime
(`cred_expire`, 5 s: Slurm's least) and then the next pass of the scheduler (`sched_interval=2,bf_interval=1`; the
defaults, 60 s and 30 s, made each requeue of the tests wait ~27 s, now ~11 s). `stop()` cancels what is still queued, then ends every daemon it started, by PID.

Debian's `slurm-wlm` (22.05) and `munge` packages provide the daemons (`.ci/run` installs them).
Where they are missing a test skips, except in CI (`CI=true`), where it fails: a Slurm test that
skips in CI would be a pass that tested nothing.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from pathlib import Path

from _harness import free_port

#: The daemons and clients the cluster needs (Debian packages slurm-wlm, munge; util-linux's unshare).
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo", "unshare")
NODES = ("sm-n1", "sm-n2")
PARTITION = "debug"
#: Guards against a cluster that never comes up; a healthy one is idle in a few seconds.
START_TIMEOUT_S = 60


def missing_programs() -> list[str]:
    return [name for name in PROGRAMS if shutil.which(name) is None]


def _conf(root: Path, ctl_port: int, node_ports: dict[str, int], addrs: dict[str, str]) -> str:
    nodes = "\n".join(f"NodeName={n} NodeAddr={addrs[n]} Port={node_ports[n]} CPUs=2 RealMemory=2000 State=UNKNOWN"
                      for n in NODES)
    return f"""\
ClusterName=smdist
SlurmctldHost=sm-ctl(127.0.0.1)
SlurmctldPort={ctl_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.sock,cred_expire=5
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/linear
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=600
KillWait=5
{nodes}
PartitionName={PARTITION} Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    """munged, slurmctld and two slurmd daemons under `root`; `conf` is the SLURM_CONF to use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.procs: list[subprocess.Popen[bytes]] = []
        # distinct loopback addresses, in the nodes' order, random so two sessions on one machine differ
        base = f"127.{random.randint(2, 250)}.{random.randint(2, 250)}"
        self.addrs = {node: f"{base}.{i}" for i, node in enumerate(NODES, start=1)}

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def _start(self, name: str, argv: list[str], hostname: str | None = None) -> None:
        if hostname is not None:  # its own UTS namespace: `hostname` there is the node's name
            argv = ["unshare", "--uts", "sh", "-c", f'hostname {hostname} && exec "$@"', "sh", *argv]
        out = (self.root / f"{name}.out").open("wb")
        self.procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env(),
                                           stdin=subprocess.DEVNULL))
        out.close()

    def start(self) -> SlurmCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)  # munged refuses a key in a folder others may write
        (self.root / "state").mkdir()
        (self.root / "spool").mkdir()
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        ports = {n: free_port() for n in NODES}
        self.conf.write_text(_conf(self.root, free_port(), ports, self.addrs), encoding="utf-8")
        r = self.root
        self._start("munged", ["munged", "-F", "-f", f"--socket={r}/munge.sock", f"--key-file={key}",
                               f"--pid-file={r}/munged.pid", f"--log-file={r}/munged.log",
                               f"--seed-file={r}/munged.seed"])
        self._wait(lambda: (r / "munge.sock").exists(), "munged's socket")
        self._start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)], hostname="sm-ctl")
        for node in NODES:
            self._start(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)], hostname=node)
        self._wait(self.idle, "both nodes idle")
        return self

    def scontrol(self, *args: str) -> str:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, env=self.env(),
                              timeout=30).stdout

    def idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                             env=self.env(), timeout=30).stdout.split()
        return out.count("idle") == len(NODES)

    def queue(self) -> list[str]:
        """Job ids squeue still lists."""
        return subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=self.env(),
                              timeout=30).stdout.split()

    def resume_nodes(self) -> None:
        """Every node back to service (after a test set one DOWN)."""
        self.scontrol("update", f"NodeName={','.join(NODES)}", "State=RESUME")

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():  # type: ignore[operator]
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
                                 for p in sorted(self.root.glob("*.out")) + sorted(self.root.glob("*.log")))
                self.stop()
                raise RuntimeError(f"the test Slurm cluster did not reach '{what}' "
                                   f"({'exited: ' + str(dead) if dead else 'timed out'})\n{logs}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Cancel what is queued, wait for it to end, then end each daemon this object started."""
        try:
            if self.queue_alive():
                subprocess.run(["scancel", "--full", "--user", str(os.getuid())], env=self.env(), timeout=30,
                               capture_output=True)
                deadline = time.monotonic() + 30
                while self.queue() and time.monotonic() < deadline:
                    time.sleep(0.2)
        except (OSError, subprocess.SubprocessError):
            pass  # the controller does not answer: its daemons are ended below all the same
        for proc in reversed(self.procs):  # the daemons before munged, which they authenticate through
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=15)
        self.procs.clear()

    def queue_alive(self) -> bool:
        return any(p.poll() is None for p in self.procs[1:2])  # slurmctld answers
