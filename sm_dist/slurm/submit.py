"""`run(plan, options)`: the Slurm backend — a plan submitted with sbatch, each node running sm_dist's PID 1.

`sm_dist.fit(..., slurm=...)` and `sm-dist fit --slurm` hand it a plan made without AWS
(`sm_dist.plan(..., local=True)`: the Slurm job needs no account) and the `SlurmOptions`. Before
anything is written or submitted it checks what the cluster says (`cluster.check_fits`: sbatch on
PATH, the partition, its nodes and time limit). Then it stages the job in its folder on the shared
file system (`sm_dist.contract.slurm_layout`): the plan's bundle, its job spec with the checkpoints
in a shared folder (or the plan's s3:// URI), the config files SageMaker would write, the batch
script (`script.batch_script`); submits it; and, asked to wait, follows the nodes' logs, injects
`kill:STEP`, and with `verify` runs the job again without chaos and compares the final models.
It imports the plan layer, never the facade nor another backend.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from sm_dist.contract import log_lines
from sm_dist.contract.chain import ChainPolicy
from sm_dist.contract.checkpoint import CheckpointMode
from sm_dist.contract.container import (
    CHECKPOINT_CONFIG,
    CODE_CHANNEL,
    HYPERPARAMETERS,
    INPUT_DATA_CONFIG,
    NPROC_ENV,
    TENSORBOARD_CONFIG,
    TENSORBOARD_LOCAL_PATH,
    WEIGHT_SUFFIXES,
)
from sm_dist.contract.faults import Fault
from sm_dist.contract.slurm_layout import (
    CHAIN_POLICY_FILE,
    CHECKPOINTS_FOLDER,
    CODE_FOLDER,
    CONFIG_FOLDER,
    HOSTS_FOLDER,
    JOB_FILE,
    LOGS_FOLDER,
    SCRIPT_FILE,
    policy_record,
)
from sm_dist.errors import ConfigError
from sm_dist.jobspec import JOB_SPEC_FILENAME, JobSpec
from sm_dist.notebook.live import in_notebook
from sm_dist.planning.budget import DEFAULT_MAX_RUNTIME_S
from sm_dist.planning.channels import SourceKind
from sm_dist.slurm import cluster, debug
from sm_dist.slurm.job import SlurmJob
from sm_dist.slurm.options import SlurmOptions
from sm_dist.slurm.script import batch_script, time_limit
from sm_dist.slurm.view import SlurmView

if TYPE_CHECKING:
    from sm_dist.planning.plan import Plan

#: The line each node's PID 1 prints as it starts torchrun: the clock of a timed kill starts with the first one.
STARTED_MARK = "[sm_dist launcher] host "
#: The tools-world module that compares two model folders' tensors (run as a process: it imports torch).
COMPARE_MODULE = "sm_dist.tools.weights_compare"
#: What SageMaker writes per channel in File mode (inputdataconfig.json, docs/PLATFORM.md §1.1).
_CHANNEL_CONFIG = {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}


def shared_checkpoint_args(spec: JobSpec, local_path: str, folder: Path) -> JobSpec:
    """The spec with the checkpoint folder's container path (CheckpointConfig.LocalPath, /opt/ml/checkpoints) in
    the script's arguments and hyperparameters replaced by the shared `folder`: what SageMaker syncs to one
    prefix is one folder here, and each job (a --verify run too) has its own."""
    def moved(value: str) -> str:
        if value == local_path or value.startswith(local_path.rstrip("/") + "/"):
            return str(folder) + value[len(local_path.rstrip("/")):]
        return value

    return dataclasses.replace(spec, args=tuple(moved(a) for a in spec.args),
                               hyperparameters={k: moved(v) for k, v in spec.hyperparameters.items()})


def job_name(plan: Plan) -> str:
    """The Slurm job's name: the plan's, or a chain's run name (`<run>-1` is the cloud's first link; on Slurm the
    links are the attempts of one job, named by its run: `chain=True`)."""
    return plan.run or plan.job_name


def checkpoint_folder(opts: SlurmOptions, job_dir: Path) -> Path:
    """The shared checkpoint folder: the option's, else the job folder's `checkpoints`."""
    return Path(opts.checkpoint_dir).expanduser().resolve() if opts.checkpoint_dir else job_dir / CHECKPOINTS_FOLDER


def with_backend(plan: Plan, opts: SlurmOptions, gpus: int) -> Plan:
    """The plan naming the Slurm backend (its rendering's line, `backend` in --json): the partition, the nodes, the
    time limit and the signal before it, where the code and the checkpoints go, and which rates priced it."""
    from sm_dist.estimator.cost import SLURM_PRICE_BASIS
    from sm_dist.planning.build import LOCAL_NO_CHECKPOINT_URI
    from sm_dist.planning.plan import Backend

    job_dir = opts.job_root(job_name(plan))
    _spec, uri = checkpoint_spec(plan, checkpoint_folder(opts, job_dir))
    where = "the cluster's default partition" if opts.partition is None else f"partition {opts.partition}"
    where += f" (account {opts.account})" if opts.account else ""
    nodes = f"{plan.instance_count} node{'s' if plan.instance_count > 1 else ''}, one task each"
    nodes += f", {gpus} GPUs each" if gpus else ""
    limit = f"--time {time_limit(plan.limits.max_runtime_s)}"
    if runtime_by_default(plan):
        limit += " or the partition's MaxTime when shorter"
    policy = chain_policy(plan, opts)
    links = f"at most {policy.max_links}" + (f", within ${policy.budget_usd:g} in all" if policy.budget_usd else "")
    line = (f"sbatch to {where}: {nodes}; {limit}, SIGTERM {opts.signal_s} s before it (saved, then requeued as the "
            f"next link, {links}); code and each node's /opt/ml in {job_dir}; checkpoints "
            f"{'off' if uri is None else ('in ' + uri)}")
    warnings = tuple(w for w in plan.warnings if w != LOCAL_NO_CHECKPOINT_URI)  # local mode's: the line says where
    _channels(plan)  # an s3:// channel: refused here, before a dry run prints a plan the cluster would not run
    backend = Backend(name="slurm", where=line, price_basis=SLURM_PRICE_BASIS, says=slurm_words(plan, job_dir, uri))
    return dataclasses.replace(plan, backend=backend, warnings=warnings)


def slurm_words(plan: Plan, job_dir: Path, checkpoint_uri: str | None) -> tuple[tuple[str, str], ...]:
    """What a Slurm node does with the plan's settings that local mode and SageMaker do otherwise: the plan's lines
    in the cluster's words (`Backend.says`); `checkpoint_uri`: where the job's checkpoints go (`checkpoint_spec`)."""
    name = job_name(plan)
    shared = checkpoint_uri is not None and "://" not in checkpoint_uri
    return (
        ("output", f"each node's model/ stays in {job_dir / HOSTS_FOLDER}/<node>/model, in the shared folder; nothing "
                   "is uploaded"),
        *([("checkpoints", f"shared folder {checkpoint_uri}: every node's $SM_CHECKPOINT_DIR, rank 0 commits each "
                           "checkpoint")] if shared else []),
        ("tensorboard", f"$SM_TENSORBOARD_DIR on each node is {job_dir / HOSTS_FOLDER}/<node>/output/tensorboard, in "
                        f"the shared folder, not synced to S3; sm-dist tensorboard {name} shows every node's"),
        ("debug", "SageMaker's remote debug (SSM) is not on a Slurm cluster: a shell on a node of the running job, its "
                  f"/opt/ml folder and the script's variables, is sm-dist debug {name} --host NODE (srun --overlap "
                  f"beside the job); every rank's stack: sm-dist stacks {name}"),
        ("infra check", "a Slurm job runs no such check"),
        ("mlflow", "MLFLOW_TRACKING_URI for every node's script: this Python environment, the nodes', needs mlflow "
                   "and sagemaker-mlflow, and the nodes AWS credentials (on HyperPod, the instance group's role); "
                   "rank 0 logs the metric lines, or warns once and trains on"),
        ("requirements", f"the nodes run this Python environment ({sys.executable}) and install nothing: it is "
                         "checked against it before the job is submitted"),
        ("data", "read in place: every node's /opt/ml/input/data/<channel> links to the folder, which every node "
                 "must see"),
    )


def checkpoint_spec(plan: Plan, folder: Path) -> tuple[JobSpec, str | None]:
    """The job spec as the cluster runs it, and where its checkpoints go: the plan's s3:// URI as is
    (mode "s3"), none for mode "off", else the shared `folder` (mode "local": every node writes its
    shards there and rank 0 commits, as on one machine)."""
    spec, ckpt = plan.job_spec, plan.job_spec.checkpoint
    if ckpt.mode in (CheckpointMode.S3, CheckpointMode.OFF):
        return spec, ckpt.uri
    local = dataclasses.replace(ckpt, mode=CheckpointMode.LOCAL, uri=None, local_path=str(folder))
    spec = shared_checkpoint_args(spec, plan.checkpoint_local_path, folder)
    return dataclasses.replace(spec, checkpoint=local), str(folder)


def _channels(plan: Plan) -> dict[str, str]:
    """Channel name -> a folder every node reads; a source a cluster node cannot read is refused. An s3:// channel
    is refused with the way a HyperPod cluster reads a bucket: its FSx for Lustre linked to it (a data repository
    association, docs/PLATFORM.md §12), read in place by every node, or a copy in a shared folder. Not downloaded
    here: SageMaker's File mode would copy the whole channel onto every node at every start (each requeue, each
    link), and a node's start is the standard library's (no S3 client, no credentials asked)."""
    out = {}
    for name, channel in plan.channels.items():
        if channel.kind is SourceKind.S3:
            raise ConfigError(f"inputs.{name}", channel.source, "a Slurm job reads its data from a shared folder every "
                              f"node sees: link the bucket to the cluster's FSx for Lustre (a data repository "
                              f"association) and give its folder ({name}=/fsx/...), or copy it into one (aws s3 sync "
                              f"{channel.source} /fsx/data/{name})")
        if channel.kind is not SourceKind.LOCAL:
            raise ConfigError(f"inputs.{name}", channel.source, "a Slurm job reads its data from a shared folder: "
                              f"give one every node sees ({name}=/fsx/data/...)")
        out[name] = str(channel.local_path)
    return out


def script_for(plan: Plan, opts: SlurmOptions, job_dir: Path, gpus: int, name: str | None = None) -> str:
    """The batch script of `plan` staged at `job_dir` (what --dry-run prints)."""
    return batch_script(job_name=name or job_name(plan), nodes=plan.instance_count, job_dir=job_dir,
                        python=sys.executable, container_command=plan.container_command,
                        partition=opts.partition, account=opts.account, qos=opts.qos,
                        constraint=opts.constraint, gpus_per_node=gpus, max_runtime_s=plan.limits.max_runtime_s,
                        signal_s=opts.signal_s, extra=opts.sbatch_args)


def check(plan: Plan, opts: SlurmOptions, instance_type: str | None = None) -> cluster.Partition:
    """Everything refused before anything is written or submitted (one ConfigError line each); `instance_type`:
    the one the user gave (a HyperPod cluster's groups are matched against it). The partition the job goes to."""
    cluster.sbatch_path()
    check_requirements(plan)  # before the cluster is asked: this machine alone answers these two
    _channels(plan)
    if opts.hyperpod_cluster:
        from sm_dist.slurm import hyperpod

        hyperpod.check_fits(opts.hyperpod_cluster, instance_type, plan.instance_count)
    limit = None if runtime_by_default(plan) else time_limit(plan.limits.max_runtime_s)
    minutes = None if limit is None else int(limit.split("-")[0]) * 1440 + int(limit[-8:-6]) * 60 + int(limit[-5:-3])
    return cluster.check_fits(cluster.partitions(), opts.partition, plan.instance_count, minutes)


def check_requirements(plan: Plan) -> None:
    """Refuse a job whose source dir's requirements.txt this environment does not meet: every node runs this
    Python (sys.executable, a shared environment) and none pip-installs (SM_DIST_INSTALL_REQUIREMENTS=0)."""
    from sm_dist.planning import requirements_check

    found = plan.bundle.requirements
    if found is None or found.source is None:
        return
    missing, _unchecked = requirements_check.unmet(Path(found.source))
    if missing:
        raise ConfigError("requirements.txt", ", ".join(missing),
                          f"the Slurm nodes run this Python environment ({sys.executable}) and install nothing; "
                          f"pip install -r {found.source} into it")


def runtime_by_default(plan: Plan) -> bool:
    """True when nobody asked for the plan's MaxRuntime (no max_runtime_s, no budget: the planner's 24 h)."""
    return plan.limits.max_runtime_s == DEFAULT_MAX_RUNTIME_S and plan.limits.basis.startswith("default")


def fit_to_partition(plan: Plan, partition: cluster.Partition) -> Plan:
    """The plan with the partition's MaxTime as its run time when the run time is the planner's default and the
    partition allows less (most clusters set a MaxTime: a 24 h default would be refused by sbatch). A run time
    the user asked for is never changed (`check` refuses one that does not fit)."""
    most = partition.max_time_min
    if most is None or not runtime_by_default(plan) or most * 60 >= plan.limits.max_runtime_s:
        return plan
    limits = dataclasses.replace(plan.limits, max_runtime_s=most * 60,
                                 basis=f"partition {partition.name}'s MaxTime ({most} min; no max_runtime_s given)")
    return dataclasses.replace(plan, limits=limits)


def chain_policy(plan: Plan, opts: SlurmOptions) -> ChainPolicy:
    """The policy the batch script's decision after each attempt follows (`sm_dist.container.slurm_chain`): the
    plan's chain (`chain=True`: its max_links and budget) or `max_requeues` + 1 links within the plan's max_cost_usd
    (a budget counts over every attempt: requeues never multiply it); each link the job's time limit; billed seconds
    counted at the plan's price (SageMaker's rate for its instance type, a stand-in)."""
    base = plan.chain or ChainPolicy(max_links=opts.max_requeues + 1, budget_usd=plan.limits.budget_usd)
    return dataclasses.replace(base, link_runtime_s=plan.limits.max_runtime_s,
                               usd_per_hour=base.usd_per_hour or plan.limits.usd_per_hour)


def stage(plan: Plan, opts: SlurmOptions, job_dir: Path, gpus: int, name: str) -> tuple[Path, str | None]:
    """Write the job's folder (the bundle, the config files, the batch script); (script path, checkpoint URI)."""
    from sm_dist.planning.bundle import write_bundle

    if job_dir.exists() and any(job_dir.iterdir()):
        raise ConfigError("job_name", name, f"{job_dir} exists: pick another name (or remove the folder)")
    folder = checkpoint_folder(opts, job_dir)
    spec, checkpoint_uri = checkpoint_spec(plan, folder)
    code = write_bundle(plan.bundle, job_dir / CODE_FOLDER)
    (code / JOB_SPEC_FILENAME).write_text(dataclasses.replace(spec, job_name=name).to_json(), encoding="utf-8")
    config = job_dir / CONFIG_FOLDER
    config.mkdir()
    channels = _channels(plan)
    hyperparameters = {k: spec.hyperparameters.get(k, v) for k, v in plan.hyperparameters.items()}
    (config / HYPERPARAMETERS).write_text(json.dumps(hyperparameters, indent=2), encoding="utf-8")
    data_config = {n: dict(_CHANNEL_CONFIG) for n in [CODE_CHANNEL, *channels]}
    (config / INPUT_DATA_CONFIG).write_text(json.dumps(data_config, indent=2), encoding="utf-8")
    environment = dict(plan.environment)
    # the nodes run in the submitting Python environment (a shared one): its packages, never pip-installed
    environment.setdefault("SM_DIST_INSTALL_REQUIREMENTS", "0")
    if opts.nproc_per_node:
        environment[NPROC_ENV] = str(opts.nproc_per_node)
    job = {"job_name": name, "instance_type": plan.instance_type, "environment": environment, "channels": channels}
    (config / JOB_FILE).write_text(json.dumps(job, indent=2), encoding="utf-8")
    (job_dir / LOGS_FOLDER).mkdir()
    if plan.tensorboard_uri is not None:  # SM_TENSORBOARD_DIR on every node: its own output/tensorboard, nothing synced
        (config / TENSORBOARD_CONFIG).write_text(json.dumps({"LocalPath": TENSORBOARD_LOCAL_PATH}, indent=2),
                                                 encoding="utf-8")
    if checkpoint_uri == str(folder):
        folder.mkdir(parents=True, exist_ok=True)
        # every node's checkpoint folder (SM_CHECKPOINT_DIR, the runtime's) is the one shared folder: each rank's
        # shards land beside the others', as SageMaker's sync to one S3 prefix puts them
        (config / CHECKPOINT_CONFIG).write_text(json.dumps({"LocalPath": str(folder)}, indent=2), encoding="utf-8")
    record = policy_record(name, chain_policy(plan, opts).to_tag(), checkpoint_uri)
    (config / CHAIN_POLICY_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    script = job_dir / SCRIPT_FILE
    script.write_text(script_for(plan, opts, job_dir, gpus, name), encoding="utf-8")
    return script, checkpoint_uri


def submit(plan: Plan, opts: SlurmOptions, gpus: int, name: str | None = None) -> SlurmJob:
    """Stage and sbatch one job (`name`: the plan's job name unless given); its handle."""
    name = name or job_name(plan)
    job_dir = opts.job_root(name)
    script, checkpoint_uri = stage(plan, opts, job_dir, gpus, name)
    job = SlurmJob(name, job_dir, cluster.submit(script), nodes=plan.instance_count, checkpoint_uri=checkpoint_uri)
    job.save()
    return job


class Chaos:
    """One kill on a running Slurm job: `kill:STEP` once a node's log shows step >= STEP, `kill:SECONDSs` that long
    after the first node's PID 1 started torchrun (any script: no step lines needed). It SIGKILLs one worker rank
    on a random node (`srun --overlap` runs sm_dist.container.slurm_host's --kill-rank there). Fires once."""

    def __init__(self, job: SlurmJob, fault: Fault, out: TextIO | None) -> None:
        self.job, self.fault, self.out = job, fault, out
        self.fired = False
        self.started: float | None = None

    def on_line(self, node: str, line: str) -> None:
        if self.started is None and STARTED_MARK in line:
            self.started = time.monotonic()
        parsed = log_lines.read_line(line)
        if not self.fault.timed and isinstance(parsed, log_lines.StepLine) and parsed.step >= self.fault.step:
            self.fire(node)

    def on_tick(self) -> None:
        at = self.fault.at_seconds
        if at is not None and self.started is not None and time.monotonic() - self.started >= at:
            self.fire(None)

    def fire(self, node: str | None) -> None:
        if self.fired:
            return
        self.fired = True
        nodes = [n for n in (p.stem for p in (self.job.job_dir / LOGS_FOLDER).glob("*.log")) if n != "batch"]
        target = random.choice(sorted(nodes) or [node or ""])
        argv = debug.beside(self.job, target, [sys.executable, "-m", "sm_dist.container.slurm_host", "--kill-rank",
                                               self.job.job_id])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=debug.step_env(self.job))
        if self.out is not None:
            print(f"[sm_dist] chaos {self.fault} on {target}: {(done.stderr or done.stdout).strip()}",
                  file=self.out, flush=True)


def run(plan: Plan, options: SlurmOptions | Mapping[str, object] | bool | None = None, *,
        gpus: int | None = None, instance_type: str | None = None, out: TextIO | None = None) -> SlurmJob:
    """Submit `plan` to the Slurm cluster sbatch reaches; return its handle (finished when `wait`).

    `gpus`: GPUs per node when the caller knows them (the facade: from an instance type the user gave);
    `instance_type`: the type the user gave, if any (checked against a HyperPod cluster's groups).
    `out`: where a waiting run echoes the nodes' lines (default stdout; in a notebook, none: the live view,
    `sm_dist.slurm.view`, shows the job and `job.logs()` reads the lines)."""
    opts = SlurmOptions.coerce(options)
    gpus = opts.gpus_per_node if opts.gpus_per_node is not None else gpus or 0
    plan = with_backend(fit_to_partition(plan, check(plan, opts, instance_type)), opts, gpus)
    notebook = out is None and in_notebook()
    echo = None if notebook else out if out is not None else sys.stdout
    job = submit(plan, opts, gpus)
    if not opts.wait:
        return job
    faults = opts.faults()
    chaos = Chaos(job, faults[0], echo) if faults else None
    job.wait(out=echo, on_line=chaos.on_line if chaos else None, on_tick=chaos.on_tick if chaos else None,
             view=live_view(job) if notebook else None)
    job.chaos = tuple(str(f) for f in faults)
    if opts.verify:
        _verify(plan, opts, gpus, job, echo)
    return job


def live_view(job: SlurmJob) -> SlurmView:
    """The notebook's live view of `job` (its shared checkpoint folder's steps shown when it has one)."""
    uri = job.checkpoint_uri
    return SlurmView(job.name, job.job_id, job.job_dir, nodes=job.nodes,
                     checkpoint_dir=Path(uri) if uri and "://" not in uri else None, notebook=True)


def _verify(plan: Plan, opts: SlurmOptions, gpus: int, job: SlurmJob, echo: TextIO | None) -> None:
    """Run the plan again, uninterrupted, as `<job>-verify`, and compare the two final models: sm_dist's model
    hash when both runs printed one, else the weight files each node left in its model folder, tensor by tensor
    (`sm_dist.tools.weights_compare`, run as a process: this world never imports torch)."""
    first = job.summary()
    if first.status != "Completed":
        job.verified, job.verification = None, f"cannot verify: the job ended {first.status}"
        return
    checked = submit(plan, dataclasses.replace(opts, checkpoint_dir=None), gpus, name=f"{job.name}-verify")
    checked.wait(out=echo, view=live_view(checked) if echo is None else None)
    second = checked.summary()
    if second.status != "Completed":
        job.verified, job.verification = None, f"cannot verify: the uninterrupted run {checked.name} ended " \
                                               f"{second.status}"
        return
    if first.model_sha256 and second.model_sha256:
        job.verified = first.model_sha256 == second.model_sha256
        job.verification = (f"identical: model_sha256 {first.model_sha256[:12]}... in both runs" if job.verified
                            else f"differs: {first.model_sha256[:12]}... vs {second.model_sha256[:12]}... "
                                 f"({checked.name})")
        return
    job.verified, job.verification = compare_models(job, checked)


def compare_models(job: SlurmJob, checked: SlurmJob) -> tuple[bool | None, str]:
    """Each node's model folder of both runs through `python -m sm_dist.tools.weights_compare` (its JSON answer)."""
    answers = []
    for folder in sorted((job.job_dir / HOSTS_FOLDER).glob("*/model")):
        other = checked.job_dir / HOSTS_FOLDER / folder.parent.name / "model"
        if not any(p.suffix in WEIGHT_SUFFIXES for p in [*folder.rglob("*"), *other.rglob("*")] if p.is_file()):
            continue
        done = subprocess.run([sys.executable, "-m", COMPARE_MODULE, str(folder), str(other)], capture_output=True,
                              text=True, check=False)
        try:
            answer = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            return None, f"cannot verify: the weight comparison failed: {(done.stderr.strip() or 'no output')[-300:]}"
        if answer.get("result") != "identical":
            return ({"differs": False}.get(answer.get("result")),
                    f"{answer.get('result')}: {folder.parent.name}: {answer.get('detail')}")
        answers.append(f"{folder.parent.name}: {answer.get('detail')}")
    if not answers:
        return None, "cannot verify: no sm_dist model hash and no weight file in any node's model folder"
    return True, "identical: " + "; ".join(answers)


__all__ = ["chain_policy", "check", "check_requirements", "checkpoint_folder", "checkpoint_spec", "fit_to_partition",
           "job_name", "live_view", "run", "runtime_by_default", "script_for", "slurm_words", "stage", "submit", "with_backend"]
