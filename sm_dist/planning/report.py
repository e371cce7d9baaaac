"""Plain-text rendering of a plan (what `sm-dist fit --dry-run` and `print(plan)` show)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sm_dist.jobspec import JobSpec
from sm_dist.planning.channels import SourceKind

if TYPE_CHECKING:
    from sm_dist.planning.plan import Plan

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
        *(["local        runs on this machine (sm_dist.local): region, role and S3 URIs below only label "
           "the request"] if plan.local else []),
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
        f"output       {req['OutputDataConfig']['S3OutputPath']}  ({_compression(req['OutputDataConfig'])})",
        f"checkpoints  {spec.checkpoint.mode}: {spec.checkpoint.uri or spec.checkpoint.local_path or '-'}",
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
        lines.append(f"debug        sm-dist debug {plan.job_name} [--host algo-N]: a shell in the emulated host here "
                     f"(in the cloud, remote debug: {ssm})" if plan.local else
                     f"debug        remote debug (SSM): sm-dist debug {plan.job_name} [--host algo-N], i.e. {ssm}")
    if (req.get("InfraCheckConfig") or {}).get("EnableInfraCheck"):
        lines.append(f"infra check  SageMaker checks the hardware and the cluster network before the script: "
                     f"+{INFRA_CHECK_SECONDS / 60:.0f} min of start-up in the estimate (assumed)"
                     + ("; local mode runs no check" if plan.local else ""))
    return lines


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
        where = "copied to every host here" if plan.local else f"uploaded to {upload.s3_uri} unless already there"
        lines.append(f"data         {name}: {channel.source} ({size}; {where}; {how})")
    return lines


def _tensorboard_lines(plan: Plan) -> list[str]:
    """Where the job's TensorBoard folder goes (TensorBoardOutputConfig, docs/PLATFORM.md §1.14)."""
    uri = plan.tensorboard_uri
    if uri is None:
        return []
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
    where = ("local mode logs to a file store under the run's folder instead" if plan.local
             else "MLFLOW_TRACKING_URI for the script (needs the sagemaker-mlflow package); rank 0 logs the metric lines")
    return [f"mlflow       {config['MlflowResourceArn']}  ({names}; {where})"]


def _compression(output: dict[str, str]) -> str:
    """How the model reaches S3 (OutputDataConfig.CompressionType, docs/PLATFORM.md §1.1)."""
    if output.get("CompressionType", "GZIP") == "NONE":
        return "model/ uploaded as it is, uncompressed"
    return "model/ as model.tar.gz, gzip"


def _requirements_lines(plan: Plan) -> list[str]:
    found = plan.bundle.requirements
    if found is None:
        return []
    where = f"from the bundle's {plan.bundle.wheels} wheels (no index)" if plan.bundle.wheels else "from the package index"
    return [f"requirements requirements.txt: pip-installed on every host at job start, {where}"
            + ("; local mode checks this environment instead" if plan.local else "")]


__all__ = ["render_plan"]
