"""`SlurmOptions`: where and how a plan runs on a Slurm cluster, as one record.

`sm_dist.fit(..., slurm=SlurmOptions(...))` (or `slurm=True`, or a dict of its fields) and
`sm-dist fit --slurm [--partition P --account A ...]` hand it to `sm_dist.slurm.run(plan, options)`.
The job itself (script, settings, instance count, runtime) is the plan; these are what only a
Slurm cluster asks for: its partition and account, the shared folder, chaos and --verify.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from sm_dist.contract.faults import Fault, parse_fault
from sm_dist.contract.sagemaker import STOP_GRACE_SECONDS
from sm_dist.errors import ConfigError, check_int
from sm_dist.vocab import did_you_mean

#: Where jobs are staged when neither `root` nor this variable says: `./sm-dist-slurm` (the submit
#: directory, which Slurm itself expects every node to see: its default output file goes there).
ROOT_ENV = "SM_DIST_SLURM_ROOT"
DEFAULT_ROOT = "sm-dist-slurm"
#: The chaos kinds a Slurm job takes (`sm_dist.slurm.follow`): a worker SIGKILLed on a node.
SLURM_CHAOS_KINDS = ("kill",)


@dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    """How to run a plan on the Slurm cluster `sbatch` reaches (every field has a default)."""

    partition: str | None = None
    """sbatch --partition (default: the cluster's default partition)."""
    account: str | None = None
    """sbatch --account."""
    qos: str | None = None
    """sbatch --qos."""
    constraint: str | None = None
    """sbatch --constraint (node features)."""
    gpus_per_node: int | None = None
    """sbatch --gpus-per-node (default: the instance type's GPUs when one was given, else none asked)."""
    root: str | Path | None = None
    """The shared folder the job is staged in (code, each node's /opt/ml folder, logs, checkpoints):
    default $SM_DIST_SLURM_ROOT, else ./sm-dist-slurm. Every node must see it at the same path."""
    checkpoint_dir: str | Path | None = None
    """A shared folder for checkpoints (default: <root>/<job>/checkpoints; an s3:// checkpoint URI in
    the plan is used as is)."""
    signal_s: int = STOP_GRACE_SECONDS
    """sbatch --signal=TERM@SECONDS: how long before the time limit every node's PID 1 gets SIGTERM
    (the ranks save a checkpoint; the job is requeued and resumes). SageMaker's grace: 120 s."""
    max_requeues: int = 3
    """How many times a job stopped at its time limit after saving is requeued to continue (the run's links are
    at most this + 1, unless the plan is a chain: its max_links). Each requeue is the cloud chain's decision
    (`sm_dist.contract.chain.decide`): it also needs progress since the last link, and the budget not spent."""
    nproc_per_node: int | None = None
    """Worker processes per node (default: the plan's, else one per GPU, else 1)."""
    chaos: Iterable[str | Fault] = ()
    """Faults to inject while waiting: "kill:STEP" SIGKILLs one worker rank on a node once a step line shows STEP,
    "kill:SECONDSs" that long after the first node started torchrun (torchrun restarts the workers, which resume
    from the checkpoint)."""
    verify: bool = False
    """Run the job again without chaos and compare the final models (implies waiting)."""
    wait: bool = True
    """Wait for the job to end, echoing its nodes' lines (False: return once submitted)."""
    sbatch_args: tuple[str, ...] = ()
    """More sbatch options, verbatim (e.g. "--reservation=R")."""
    hyperpod_cluster: str | None = None
    """A SageMaker HyperPod cluster's name: read it (DescribeCluster, ListClusterNodes) and refuse a job its
    running nodes cannot take, before anything is submitted (`sm_dist.slurm.hyperpod`)."""

    def __post_init__(self) -> None:
        if isinstance(self.chaos, (str, Fault)):
            object.__setattr__(self, "chaos", (self.chaos,))
        object.__setattr__(self, "chaos", tuple(self.chaos))
        object.__setattr__(self, "sbatch_args", tuple(self.sbatch_args))
        self.faults()
        check_int("gpus_per_node", self.gpus_per_node, 0, "use a whole number >= 0", optional=True)
        check_int("nproc_per_node", self.nproc_per_node, 1, "use a whole number >= 1", optional=True)
        check_int("signal_s", self.signal_s, 1, f"use a whole number of seconds >= 1 (SageMaker's grace: "
                  f"{STOP_GRACE_SECONDS})")
        check_int("max_requeues", self.max_requeues, 0, "use a whole number >= 0")
        for name in ("partition", "account", "qos", "constraint", "hyperpod_cluster"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value or any(c.isspace() for c in value)):
                raise ConfigError(name, value, "expected a Slurm name without spaces")
        if self.verify and not self.wait:
            raise ConfigError("verify", True, "compares two finished runs: leave wait=True")
        if self.faults() and not self.wait:
            raise ConfigError("chaos", [str(f) for f in self.faults()], "is injected while waiting: leave wait=True")

    def faults(self) -> tuple[Fault, ...]:
        faults = tuple(s if isinstance(s, Fault) else parse_fault(s) for s in self.chaos)
        for fault in faults:
            if fault.kind not in SLURM_CHAOS_KINDS:
                raise ConfigError("chaos", str(fault), "a Slurm job takes kill:STEP or kill:SECONDSs (local mode, "
                                  "--local, rehearses the other kinds)")
        if len(faults) > 1:
            raise ConfigError("chaos", [str(f) for f in faults], "give one kill:STEP or kill:SECONDSs")
        return faults

    def job_root(self, job_name: str) -> Path:
        """The job's folder on the shared file system."""
        base = self.root if self.root is not None else os.environ.get(ROOT_ENV) or DEFAULT_ROOT
        return Path(base).expanduser().resolve() / job_name

    @classmethod
    def coerce(cls, value: SlurmOptions | Mapping[str, object] | bool | None) -> SlurmOptions:
        """`value` as SlurmOptions: a record as is, True/None the defaults, a mapping checked key by key."""
        if value is None or value is True:
            return cls()
        if isinstance(value, SlurmOptions):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError("slurm", value, "expected True, sm_dist.slurm.SlurmOptions or a dict of its fields")
        names = [f.name for f in fields(cls)]
        for key in value:
            if key not in names:
                raise ConfigError(f"slurm.{key}", value[key], f"not an option{did_you_mean(str(key), names)}; "
                                  f"options: {', '.join(names)}")
        return cls(**dict(value))  # type: ignore[arg-type]  # a dict is untyped; __post_init__ checks the values


__all__ = ["DEFAULT_ROOT", "ROOT_ENV", "SlurmOptions"]
