"""The frozen `Plan`: everything `fit` will do, as a value, made by `sm_dist.plan(...)`.

The plan holds the exact CreateTrainingJob request, the code bundle's manifest, the job spec,
the cost limits and estimate, and every warning. `fit` submits exactly this request; a dry run
prints it (`str(plan)`: `render_plan` below, plain text; `plan.to_dict()`: `--json`).

It is built from a LaunchConfig in `sm_dist.planning.build` (`make_plan`), the part that needs no
AWS (strategy, job spec, bundle) in `sm_dist.planning.code_plan`. Making a plan reads local files
and, only for what was not given explicitly (role, infra stack outputs), makes read-only AWS calls
— never an upload or a create. A local plan (`local=True`, for `sm_dist.local.run`) makes no AWS
call at all: what it does not need is filled once, with labels (`LOCAL_DEFAULTS`,
`locations.local_locations`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sm_dist.contract.chain import ChainPolicy
from sm_dist.jobspec import JobSpec
from sm_dist.planning import bundle as bundle_mod
from sm_dist.planning import request as request_mod
from sm_dist.planning.budget import Limits
from sm_dist.planning.channel_data import DataUpload
from sm_dist.planning.channels import Channel, SourceKind
from sm_dist.planning.sizing import Sizing
from sm_dist.planning.warm_pool import PoolReuse
from sm_dist.vocab import Strategy

if TYPE_CHECKING:
    from IPython.lib.pretty import RepresentationPrinter

#: What a local plan needs and its user need not give: labels, never sent to AWS (the region's
#: catalog prices price the run; "on SageMaker $x" is for this instance type). The role label
#: and the output bucket come from `locations.local_locations`.
LOCAL_DEFAULTS: Mapping[str, str] = MappingProxyType({"region": "us-east-1", "instance_type": "ml.g5.xlarge"})


@dataclass(frozen=True)
class Backend:
    """Where a plan runs when neither the cloud nor local mode runs it (a Slurm cluster): named in the plan's
    rendering in place of local mode's line, with the rates its price line used."""

    name: str
    """The backend's word, e.g. "slurm"."""
    where: str
    """One line: where it runs and where its code and checkpoints go."""
    price_basis: str
    """Which rates priced the plan (one line)."""
    says: tuple[tuple[str, str], ...] = ()
    """The backend's own words for the plan's lines it honours otherwise than local mode, by the line's label
    ("output", "checkpoints", "tensorboard", "debug", "infra check", "mlflow", "requirements"; "data": how a
    channel's folder arrives)."""

    def word(self, label: str) -> str | None:
        """What the backend says of the line `label` (None: it has no word of its own)."""
        return dict(self.says).get(label)

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "where": self.where, "price_basis": self.price_basis, "says": dict(self.says)}


@dataclass(frozen=True, repr=False)
class Plan:
    """Everything `fit` will do, as a value. Build it with `sm_dist.plan(...)`."""

    job_name: str
    region: str
    request_json: str
    """The CreateTrainingJob parameters (JSON; see `request`)."""
    job_spec: JobSpec
    bundle: bundle_mod.Bundle
    code_s3_uri: str
    role_arn: str
    instance_type: str
    instance_count: int
    checkpoint_uri: str | None
    checkpoint_local_path: str
    limits: Limits
    sizing: Sizing
    default_bucket: str | None
    """The SDK default bucket fit creates if missing (None: an explicit or infra bucket)."""
    container_command: tuple[str, ...] = request_mod.PID1_COMMAND
    environment: Mapping[str, str] = field(default_factory=dict)
    hyperparameters: Mapping[str, str] = field(default_factory=dict)
    channels: Mapping[str, Channel] = field(default_factory=dict)
    """Data channels as the user gave them (a local folder stays a folder), without the code channel."""
    uploads: tuple[DataUpload, ...] = ()
    """Local channels the cloud backend uploads before CreateTrainingJob (to the prefixes the request names)."""
    warnings: tuple[str, ...] = ()
    local: bool = False
    """A plan for local mode: region, role and S3 URIs only label the request."""
    run: str | None = None
    """A chain's run name (`chain=True`): `job_name` is its first link, `<run>-1` (contract.chain)."""
    chain: ChainPolicy | None = None
    """A chain's policy: links, each link's MaxRuntime cap, the run's budget."""
    backend: Backend | None = None
    """The backend that runs a `local` plan when it is not local mode (a Slurm cluster); None: the cloud or local
    mode, as `local` says."""
    warm_pool: PoolReuse | None = None
    """The last warm pool of this base job name and whether this job starts on it (set by the cloud
    backend's read-only checks when keep_alive_s is set; planning.warm_pool)."""

    @property
    def request(self) -> dict[str, Any]:
        """A fresh copy of the CreateTrainingJob parameters."""
        request: dict[str, Any] = json.loads(self.request_json)
        return request

    @property
    def tensorboard_uri(self) -> str | None:
        """TensorBoardOutputConfig.S3OutputPath (None: tensorboard off): `tensorboard --logdir` it."""
        config = self.request.get("TensorBoardOutputConfig") or {}
        return str(config["S3OutputPath"]) if config.get("S3OutputPath") else None

    @property
    def strategy(self) -> Strategy:
        return self.job_spec.strategy

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what `sm-dist fit --dry-run --json` prints)."""
        return {
            "job_name": self.job_name, "region": self.region, "request": self.request,
            "container_command": list(self.container_command), "environment": dict(self.environment),
            "job_spec": self.job_spec.to_dict(), "code_s3_uri": self.code_s3_uri,
            "bundle": {"files": self.bundle.manifest(), "total_bytes": self.bundle.total_bytes},
            "cost": {**self.limits.to_dict(), "estimate": None if self.sizing.row is None else self.sizing.row.to_dict(),
                     "strategy_reason": self.sizing.reason},
            "channels": {name: c.to_dict() for name, c in self.channels.items()},
            "uploads": [u.to_dict() for u in self.uploads],
            "default_bucket": self.default_bucket, "warnings": list(self.warnings), "local": self.local,
            "chain": None if self.chain is None else {"run": self.run, **dataclasses.asdict(self.chain)},
            "warm_pool": None if self.warm_pool is None else self.warm_pool.to_dict(),
            "backend": None if self.backend is None else self.backend.to_dict(),
        }

    def __str__(self) -> str:
        return render_plan(self)

    def __repr__(self) -> str:
        return (f"Plan({self.job_name!r}, {self.instance_count} × {self.instance_type}, "
                f"strategy={self.strategy.value!r}, {len(self.bundle.files)} files, {len(self.warnings)} warnings)")

    def _repr_pretty_(self, printer: RepresentationPrinter, cycle: bool) -> None:
        """IPython/Jupyter: show the rendered plan, not the field dump."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        """Jupyter: the rendered plan as a table, the exact request one click away."""
        from sm_dist.markup import details, text_table

        return text_table(str(self), title=False,
                          extra=details("CreateTrainingJob request", json.dumps(self.request, indent=2)))


def tensorboard_uri(output_s3_uri: str, name: str) -> str:
    """Where SageMaker syncs a job's TensorBoard folder: `<output>/<job>/tensorboard` (a chain's jobs
    share the run's, `<output>/<run>/tensorboard`, so one TensorBoard shows the whole run)."""
    return request_mod.s3_join(output_s3_uri, name, "tensorboard")


# The plain-text rendering of a plan (what `sm-dist fit --dry-run` and `print(plan)` show).

_MIB = 2**20


def _origin_sizes(plan: Plan) -> str:
    sizes: dict[str, list[int]] = {}
    for item in plan.bundle.files:
        entry = sizes.setdefault(item.origin, [0, 0])
        entry[0] += 1
        entry[1] += item.size
    return ", ".join(f"{origin} {n} files {size / 1024:.0f} KiB" for origin, (n, size) in sizes.items())


def _cost_lines(plan: Plan) -> list[str]:
    limits = plan.limits
    lines = [f"  MaxRuntime   {limits.max_runtime_s} s ({limits.max_runtime_s / 3600:.2f} h) — {limits.basis}"]
    if limits.max_wait_s is not None:
        lines.append(f"  MaxWait      {limits.max_wait_s} s (spot: capacity wait + run)")
    if limits.usd_per_hour is not None:
        lines.append(f"  price        ${limits.usd_per_hour:.2f}/h for {plan.instance_count} × {plan.instance_type} "
                     f"on-demand; at most ${limits.max_cost_usd:,.2f}")
    if plan.backend is not None:
        lines.append(f"  basis        {plan.backend.price_basis}")
    chain = plan.chain
    if chain is not None:
        budget = f"${chain.budget_usd:,.2f} for the whole run" if chain.budget_usd is not None else "no budget"
        spot = f"; on demand after {chain.on_demand_after} spot interruptions" if chain.on_demand_after else ""
        lines.append(f"  chain        run {plan.run}: jobs {plan.run}-1 ... at most {chain.max_links} that run, each "
                     f"resuming from the checkpoints; {budget}, each job's MaxRuntime what is left of it (≤ "
                     f"{chain.link_runtime_s} s){spot}")
        if chain.types:
            how = ("the next job after a capacity error uses the next" if plan.request.get("EnableManagedSpotTraining")
                   else "each job asks for them in order (InstancePreferences: the quota of every one must "
                   "cover the job)")
            lines.append(f"  fallbacks    {' then '.join(chain.instance_types())}: {how}; each checked as instance_type")
    row = plan.sizing.row
    if row is not None and row.cost is not None and row.hours is not None:
        cost = row.cost
        lines.append(f"  estimate     {row.hours:.2f} h, ${cost.sagemaker:,.2f} on-demand, ${cost.spot:,.2f} spot "
                     f"(ec2 ${cost.ec2:,.2f})")
    if row is not None and row.memory is not None:
        lines.append(f"  memory       {row.memory.total / 2**30:.1f} GiB per GPU of {row.usable_bytes / 2**30:.1f} GiB usable")
    return lines


def script_command(spec: JobSpec) -> str:
    """The entry and exactly the arguments the script will get, shell-quoted."""
    import shlex

    return shlex.join([spec.entry, *spec.script_args()])


def _precision(plan: Plan) -> str:
    """The job's precision; where the plan's memory check used it and `sm-dist estimate-cost` assumes another
    by default, that one too, so the two commands' figures are read for what they are."""
    from sm_dist.estimator.api import DEFAULT_PRECISION

    words = plan.job_spec.precision.value
    if plan.sizing.row is None or plan.job_spec.precision is DEFAULT_PRECISION:
        return words
    return (f"{words} (the memory check's too; sm-dist estimate-cost assumes {DEFAULT_PRECISION.value} unless "
            f"--precision {words})")


def render_plan(plan: Plan) -> str:
    """A human summary of the plan, request JSON excluded (use --json for everything)."""
    req = plan.request
    algo, res = req["AlgorithmSpecification"], req["ResourceConfig"]
    spec = plan.job_spec
    lines = [
        f"job          {plan.job_name}  ({plan.region})",
        *_backend_lines(plan),
        f"instances    {res['InstanceCount']} × {plan.instance_type}{'  (spot)' if req.get('EnableManagedSpotTraining') else ''}",
        f"strategy     {spec.strategy.value} ({plan.sizing.reason}), precision {_precision(plan)}, "
        f"max_restarts {spec.max_restarts}",
        f"entry        {script_command(spec)}",
        f"image        {algo['TrainingImage']}",
        f"PID 1        {' '.join(algo['ContainerEntrypoint'])}",
        f"role         {plan.role_arn}",
        f"code         {plan.code_s3_uri}  ({len(plan.bundle.files)} files, {plan.bundle.total_bytes / _MIB:.2f} MiB: "
        f"{_origin_sizes(plan)})",
        *_requirements_lines(plan),
        *_data_lines(plan),
        f"output       {_word(plan, 'output') or _output(req['OutputDataConfig'])}",
        f"checkpoints  {_word(plan, 'checkpoints') or f'{spec.checkpoint.mode}: ' + (spec.checkpoint.uri or spec.checkpoint.local_path or '-')}",
        *_interval_lines(plan),
        *_tensorboard_lines(plan),
        *_debug_lines(plan),
        *_mlflow_lines(plan),
        "cost",
        *_cost_lines(plan),
    ]
    lines += _warm_pool_lines(plan)
    if plan.default_bucket:
        lines.append(f"note         fit creates the SageMaker default bucket {plan.default_bucket} if it is missing")
    lines += [f"warning      {w}" for w in plan.warnings]
    return "\n".join(lines)


def _backend_lines(plan: Plan) -> list[str]:
    """Which backend runs a plan made without AWS: local mode, or the one it names (a Slurm cluster)."""
    if plan.backend is not None:
        return [f"{plan.backend.name:<12} {plan.backend.where}; region, role and S3 URIs below only label the request"]
    return (["local        runs on this machine (sm_dist.local): region, role and S3 URIs below only label the "
             "request"] if plan.local else [])


def _interval_lines(plan: Plan) -> list[str]:
    """The checkpoint interval sm_dist chose when none was given (estimator/goodput.py), and why."""
    row = plan.sizing.row
    if not plan.sizing.interval_defaulted or row is None or row.goodput is None or row.step is None:
        return []
    g = row.goodput
    return [f"  interval   every {plan.job_spec.checkpoint.interval_steps:,} steps (~{g.checkpoint_interval_s / 60:,.1f} min): "
            f"none given, so the estimate's Young/Daly interval sqrt(2 × {g.checkpoint_save_s:,.1f} s save × "
            f"{g.mtbf_hours:,.0f} h MTBF); goodput {g.goodput:.3f}; checkpoint_interval_steps= to choose"]


def _debug_lines(plan: Plan) -> list[str]:
    """Remote debug and the infra check, when on (docs/PLATFORM.md §1.16)."""
    import shlex

    from sm_dist.contract.sagemaker import ssm_command
    from sm_dist.estimator.cost import INFRA_CHECK_SECONDS

    req, lines = plan.request, []
    ssm = shlex.join(ssm_command(plan.job_name))
    if (req.get("RemoteDebugConfig") or {}).get("EnableRemoteDebug"):
        lines.append(f"debug        {said}" if (said := _word(plan, "debug")) else
                     f"debug        sm-dist debug {plan.job_name} [--host algo-N]: a shell in the emulated host here "
                     f"(in the cloud, remote debug: {ssm})" if plan.local else
                     f"debug        remote debug (SSM): sm-dist debug {plan.job_name} [--host algo-N], i.e. {ssm}")
    if (req.get("InfraCheckConfig") or {}).get("EnableInfraCheck"):
        lines.append(f"infra check  SageMaker checks the hardware and the cluster network before the script: "
                     f"+{INFRA_CHECK_SECONDS / 60:.0f} min of start-up in the estimate (assumed)"
                     + (f"; {said}" if (said := _word(plan, "infra check")) else
                        "; local mode runs no check" if plan.local else ""))
    return lines


def _word(plan: Plan, label: str) -> str | None:
    """The backend's own word for a line (`Backend.says`), if the plan names a backend that has one."""
    return plan.backend.word(label) if plan.backend is not None else None


def _warm_pool_lines(plan: Plan) -> list[str]:
    """The pool this job keeps, and whether it starts on the last one (docs/PLATFORM.md §1.13)."""
    from sm_dist.planning.warm_pool import keep_alive_line

    kept = keep_alive_line(plan.request, plan.job_name, plan.limits.usd_per_hour)
    lines = [f"warm pool    {kept}"] if kept else []
    if plan.warm_pool is not None:
        lines.append(f"warm pool    {plan.warm_pool.line()}")
    return lines


def _data_lines(plan: Plan) -> list[str]:
    """One line per data channel: where it comes from, how it arrives, and what would be uploaded."""
    uploads = {u.channel: u for u in plan.uploads}
    lines = []
    for name, channel in plan.channels.items():
        how = f"{channel.mode.value}, {channel.distribution.value}"
        upload = uploads.get(name)
        if upload is None:
            source = channel.s3_uri if channel.kind is SourceKind.S3 else channel.source  # as the request names it
            lines.append(f"data         {name}: {source} ({how})")
            continue
        size = f"{len(upload.data.files):,} files, {upload.data.total_bytes / _MIB:,.1f} MiB"
        where = (_word(plan, "data") or "copied to every host here" if plan.local else
                 f"uploaded to {upload.s3_uri} unless already there")
        lines.append(f"data         {name}: {channel.source} ({size}; {where}; {how})")
    return lines


def _tensorboard_lines(plan: Plan) -> list[str]:
    """Where the job's TensorBoard folder goes (TensorBoardOutputConfig, docs/PLATFORM.md §1.14)."""
    uri = plan.tensorboard_uri
    if uri is None:
        return []
    if said := _word(plan, "tensorboard"):
        return [f"tensorboard  {said}"]
    how = ("local mode syncs it to its own S3 endpoint while the job runs, then to the run's folder; "
           "job.tensorboard() shows it" if plan.local else
           f"synced while the job runs; tensorboard --logdir {uri} (or sm-dist tensorboard {plan.job_name})")
    return [f"tensorboard  /opt/ml/output/tensorboard ($SM_TENSORBOARD_DIR) -> {uri}: {how}"]
def _mlflow_lines(plan: Plan) -> list[str]:
    """MlflowConfig: where the run goes, and where a local run's really goes (a file store)."""
    config = plan.request.get("MlflowConfig")
    if not config:
        return []
    names = f"experiment {config.get('MlflowExperimentName', '-')}, run {config.get('MlflowRunName', '-')}"
    where = _word(plan, "mlflow") or ("local mode logs to a file store under the run's folder instead" if plan.local
             else "MLFLOW_TRACKING_URI for the script (needs the sagemaker-mlflow package); rank 0 logs the metric lines")
    return [f"mlflow       {config['MlflowResourceArn']}  ({names}; {where})"]


def _output(output: dict[str, str]) -> str:
    """Where the model goes and how it reaches S3 (OutputDataConfig.CompressionType, docs/PLATFORM.md §1.1)."""
    if output.get("CompressionType", "GZIP") == "NONE":
        return f"{output['S3OutputPath']}  (model/ uploaded as it is, uncompressed)"
    return f"{output['S3OutputPath']}  (model/ as model.tar.gz, gzip)"


def _requirements_lines(plan: Plan) -> list[str]:
    found = plan.bundle.requirements
    if found is None:
        return []
    where = f"from the bundle's {plan.bundle.wheels} wheels (no index)" if plan.bundle.wheels else "from the package index"
    if said := _word(plan, "requirements"):
        return [f"requirements requirements.txt: {said}"]
    return [f"requirements requirements.txt: pip-installed on every host at job start, {where}"
            + ("; local mode checks this environment instead" if plan.local else "")]


__all__ = ["LOCAL_DEFAULTS", "Backend", "Plan", "render_plan", "tensorboard_uri"]
