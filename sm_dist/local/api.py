"""`run(plan, options)` (alias `run_local`): the local backend — a planned SageMaker job on this machine.

`sm_dist.fit(..., local=True)` and `sm-dist fit --local` hand it a plan made with `local=True`
(`sm_dist.plan(..., local=True)`) and the `LocalOptions`; it imports the plan layer, never the
facade (`sm_dist.launch`) nor the cloud backend. The job runs as
`plan.instance_count` emulated hosts, each running the plan's container command (sm_dist's
launcher, which starts torchrun) in a folder laid out like /opt/ml; S3 is moto's server on
127.0.0.1, started here when the job needs one, so no AWS account is involved.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

from sm_dist.contract.container import INSTALL_REQUIREMENTS_ENV, NPROC_ENV, nproc_per_node
from sm_dist.errors import ConfigError
from sm_dist.local import from_plan, mountns, requirements_check, tb_sync, verify, warm_pool
from sm_dist.local.chain import LinkRecord, local_policy, run_chain
from sm_dist.local.chaos import Fault
from sm_dist.local.config import LocalChannel, LocalJobConfig
from sm_dist.local.job import LocalJob, RunRecord, chain_record, store_manifests
from sm_dist.local.options import LocalOptions
from sm_dist.local.run_records import Outcome, RunSettings, print_line
from sm_dist.local.runner import LocalRunner
from sm_dist.local.stores import Store, open_store, written_since
from sm_dist.local.verify import Verification
from sm_dist.local.view import ProgressView
from sm_dist.notebook.live import in_notebook
from sm_dist.planning.profile import without_missing_profile

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from sm_dist.planning.plan import Plan

_log = logging.getLogger(__name__)
#: Fake credentials for the local endpoint (moto accepts any); never real ones.
_LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "sm-dist-local", "AWS_SECRET_ACCESS_KEY": "sm-dist-local"}
#: The error s3-faults injects: S3's own "retry later" answer to overload.
S3_FAULT_KIND = "503"


class _Endpoint:
    """The local S3 endpoint with the environment that points clients at it."""

    def __init__(self, region: str, faults: bool) -> None:
        from sm_dist.local.s3_endpoint import S3Endpoint

        # moto's server logs every request at INFO through werkzeug; the CLI logs at INFO
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self.server = S3Endpoint(faults=faults).start()
        self.env = {"AWS_ENDPOINT_URL_S3": self.server.url, "AWS_DEFAULT_REGION": region, "AWS_REGION": region,
                    **_LOCAL_CREDENTIALS}

    def store(self, uri: str) -> Store:
        """A store for `uri` on this endpoint, its bucket created."""
        from sm_dist.local.stores import S3Store

        store = S3Store(uri, None, client=self.client())
        try:
            store.client.create_bucket(Bucket=store.bucket)
        except store.client.exceptions.BucketAlreadyOwnedByYou:
            pass
        return store

    def client(self) -> S3Client:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.server.url, region_name=self.env["AWS_REGION"],
            aws_access_key_id=_LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=_LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            # one attempt: the sync loop retries on its next pass, and s3-faults must be seen
            config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=60),
        )

    def fail_for(self, seconds: float) -> None:
        self.server.set_faults(S3_FAULT_KIND, seconds=seconds)


def _needs_s3(plan: Plan, uris: list[str | None], faults: tuple[Fault, ...]) -> bool:
    uses_s3 = any(u and u.startswith("s3://") for u in uris) or plan.job_spec.checkpoint.mode == "s3"
    if any(f.kind == "s3-faults" for f in faults) and not uses_s3:
        raise ConfigError("chaos", "s3-faults", "this job uses no S3 (checkpoint URI is a local folder or off)")
    return uses_s3


@dataclass(frozen=True)
class _Job:
    """What every run of one local job shares: the plan, its options and its code on disk."""

    plan: Plan
    options: LocalOptions
    faults: tuple[Fault, ...]
    bundle: Path
    channels: Mapping[str, LocalChannel]
    """The data channels' folders (sources, stand-ins or downloads), laid out on every host per run."""
    env: Mapping[str, str]
    """Variables every host gets besides the plan's (the endpoint's, the process count)."""
    echo: Callable[[str, str], None]
    view: bool
    """Show the live view (a line, or a notebook's display) instead of echoing the hosts' lines."""
    pool: Path | None = None
    """The warm pool the job's runs (not --verify's) start on (`sm_dist.local.warm_pool`)."""

    @property
    def nproc(self) -> int:
        return nproc_per_node(self.env, self.plan.job_spec.nproc_per_node)

    @property
    def max_runtime_s(self) -> float | None:
        if self.options.max_runtime_s is not None:
            return self.options.max_runtime_s
        return float(self.plan.limits.max_runtime_s) if self.plan.limits.max_runtime_s else None


def _one_run(job: _Job, root: Path, label: str, faults: tuple[Fault, ...], endpoint: _Endpoint | None,
             uri_override: str | None, *, name: str | None = None, display: str | None = None,
             max_runtime_s: float | None | Literal["job"] = "job") -> tuple[RunRecord, LocalJobConfig, str | None]:
    """One local job (`name`: a chain's link; `display`: its label in the echo and the view)."""
    plan, options = job.plan, job.options
    uri = from_plan.sync_uri(plan, uri_override, label)
    code_dir = from_plan.code_for_run(job.bundle, root / "code", from_plan.local_spec(plan, uri, label))
    tb_uri = tb_sync.tensorboard_uri(plan, label)
    config = from_plan.config_from_plan(plan, code_dir, uri, name or plan.job_name, job.channels, tb_uri, root)
    config = replace(config, warm_pool=job.pool) if label == "run" else config
    listed_uri = uri or from_plan.runtime_s3_uri(plan, label)  # what checkpoints() lists
    label = display or label
    store = None
    if listed_uri is not None:
        store = endpoint.store(listed_uri) if listed_uri.startswith("s3://") and endpoint else open_store(listed_uri)
    tb_store = (endpoint.store(tb_uri) if endpoint else open_store(tb_uri)) if tb_uri is not None else None
    settings = RunSettings(
        job_root=root, store=store if uri is not None else None, faults=faults, tensorboard_store=tb_store,
        grace_seconds=options.grace_seconds, sync_interval=options.sync_interval,
        extra_env={**(endpoint.env if endpoint else {}), **job.env},
        on_line=(lambda h, line: job.echo(f"{label} {h}" if label != "run" else h, line)),
        max_job_restarts=options.max_job_restarts,
        max_runtime_s=job.max_runtime_s if max_runtime_s == "job" else max_runtime_s,
        nproc_per_host=plan.job_spec.nproc_per_node,
        s3_fault_switch=endpoint.fail_for if endpoint is not None and endpoint.server.url != endpoint.server.moto_url else None,
    )
    view = None
    if job.view:
        view = ProgressView(options.echo_stream, "" if label == "run" else label, hosts=config.instance_count,
                            logs=root / "logs")
        settings = replace(settings, on_tick=view.tick)
        view.start()
    runner = LocalRunner(config, settings)
    outcome = runner.run()
    if view is not None:
        view.tick(runner, final=True)
    record = RunRecord(outcome, runner.progress, runner.chaos.in_job_restarts, runner.chaos.fired, root,
                       events=runner.chaos.events, checkpoint_keys=store_keys(store),
                       checkpoint_manifests=store_manifests(store),
                       checkpoint_written=written_since(store, outcome.started),
                       warnings=runner.chaos.group.warnings() + _opt_ml_warnings(outcome),
                       tensorboard_uri=tb_uri,
                       tensorboard_keys=tb_sync.download(tb_store, root / tb_sync.FOLDER) if tb_store else {})
    return record, config, listed_uri


def _opt_ml_warnings(outcome: Outcome) -> list[str]:
    if not outcome.shared_opt_ml:
        return []
    return ["this machine gives no host a private /opt/ml (no `unshare --mount`): a script's hard-coded "
            "/opt/ml paths are shared by every host and not synced; SM_MODEL_DIR and SM_CHECKPOINT_DIR are right"]


def _echo_or_view(opts: LocalOptions) -> tuple[bool, bool]:
    """(echo, view) as asked, and where not asked: in a notebook the view and no echo (the logs
    stay one argument away: echo=True), elsewhere the echo."""
    notebook = opts.echo_stream is None and in_notebook()
    echo = opts.echo if opts.echo is not None else not notebook
    return echo, opts.view if opts.view is not None else notebook and not echo


def _echo(echo: bool, stream: TextIO | None) -> Callable[[str, str], None]:
    if not echo:
        return lambda host, line: None
    return lambda host, line: print_line(host, line, stream or sys.stdout)


def store_keys(store: Store | None) -> dict[str, int]:
    """Keys at the checkpoint URI now -> size (the endpoint stops with the run; keep the listing)."""
    if store is None:
        return {}
    try:
        return store.list()
    except Exception as exc:  # a listing failure must not hide the run's result
        _log.warning("cannot list %s: %s", store.uri, exc)
        return {}


def run(plan: Plan, options: LocalOptions | Mapping[str, object] | None = None) -> LocalJob:
    """Run `plan` (from `sm_dist.plan(..., local=True)`) on this machine; return the finished `LocalJob`.

    `options`: `LocalOptions` (or a dict of its fields): chaos, verify, root, checkpoint_uri,
    grace_seconds, max_runtime_s, echo/view and where they go.
    """
    opts = LocalOptions.coerce(options)
    capacity = [str(f) for f in opts.faults() if f.kind == "capacity"]
    if capacity and plan.chain is None:
        raise ConfigError("chaos", capacity[0], "rehearses a chain's wait for capacity: add chain=True (--chain)")
    max_wait = [str(f) for f in opts.faults() if f.kind == "max-wait"]
    if max_wait and (plan.chain is None or not plan.request.get("EnableManagedSpotTraining")):
        raise ConfigError("chaos", max_wait[0], "rehearses a spot job's MaxWait in a chain: add chain=True and "
                          "spot=True (--chain --spot)")
    base = Path(opts.root).resolve() if opts.root is not None else Path(tempfile.gettempdir()) / "sm-dist-local" / plan.job_name
    if base.exists() and any(base.iterdir()):
        raise ConfigError("root", str(base), "expected a new or empty folder")
    _check_requirements(plan)
    mountns.probe_early()  # a process: it runs while the endpoint and the bundle are made here
    # the hosts run in this environment: checked above, never pip-installed into
    env = {INSTALL_REQUIREMENTS_ENV: "0"}
    if opts.nproc_per_node:
        env[NPROC_ENV] = str(opts.nproc_per_node)
    echo, view = _echo_or_view(opts)
    channels = from_plan.local_channels(plan, opts.data, opts.s3_data, base / "s3-data")
    job = _Job(plan=plan, options=opts, faults=opts.faults(), bundle=from_plan.write_code(plan, base / "bundle"),
               channels=channels,
               env=env, echo=_echo(echo and not view, opts.echo_stream), view=view)
    with without_missing_profile():  # moto's in-process server makes boto3 Sessions
        local, local_start = warm_pool.run_on_pool(base.parent / warm_pool.POOLS_FOLDER, plan.request, plan.job_name,
                                                   lambda pool: _run_job(replace(job, pool=pool), base))
    local.warm_pool = local_start
    return local


def _check_requirements(plan: Plan) -> None:
    """Refuse to start when this environment lacks what the source dir's requirements.txt names."""
    found = plan.bundle.requirements
    if found is None or found.source is None:
        return
    missing, unchecked = requirements_check.unmet(Path(found.source))
    if unchecked:
        _log.info("requirements.txt: not checked here: %s", "; ".join(unchecked))
    if missing:
        raise ConfigError("requirements.txt", ", ".join(missing),
                          f"the local hosts run in this Python environment; pip install -r {found.source}")


def _run_job(job: _Job, base: Path) -> LocalJob:
    """The run (and the verify run) against the local S3 endpoint when the job needs one."""
    plan, checkpoint_uri = job.plan, job.options.checkpoint_uri
    uri = from_plan.sync_uri(plan, checkpoint_uri, "run")
    endpoint = None
    if _needs_s3(plan, [uri, plan.job_spec.checkpoint.uri, plan.tensorboard_uri], job.faults):
        endpoint = _Endpoint(plan.region or "us-east-1", faults=any(f.kind == "s3-faults" for f in job.faults))
    links: list[LinkRecord] = []
    try:
        if plan.chain is not None:
            record, config, listed_uri, links = _chain(job, base, endpoint, checkpoint_uri)
        else:
            record, config, listed_uri = _one_run(job, base / "run", "run", job.faults, endpoint, checkpoint_uri)
        checked = verification = None
        if job.options.verify:
            verify_uri = None if checkpoint_uri is None else f"{checkpoint_uri.rstrip('/')}-verify"
            # a chain's final model is checked against one unchained run, as long as it takes
            checked, _, _ = _one_run(job, base / "verify", "verify", (), endpoint, verify_uri,
                                     max_runtime_s=None if links else "job")
            verification = _verification(record, checked, config.hosts)
            again = None
            if verification is not None and verification.result == verify.DIFFERS and record.fired:
                # the resume, or the script? a second uninterrupted run says which
                again_uri = None if checkpoint_uri is None else f"{checkpoint_uri.rstrip('/')}-verify-again"
                rerun, _, _ = _one_run(job, base / "verify-again", "verify-again", (), endpoint, again_uri)
                again = _verification(checked, rerun, config.hosts)
            verification = verification and verify.explain(verification, bool(record.fired), again)
    finally:
        if endpoint is not None:
            stats = endpoint.server.plan.stats()
            endpoint.server.stop()
    return LocalJob(config=config, run=record, chaos=tuple(str(f) for f in job.faults), verify_run=checked,
                    processes_per_host=job.nproc, estimate_usd=plan.sizing.expected_usd(),
                    checkpoint_uri=listed_uri, verification=verification,
                    s3_requests=stats["requests"] if endpoint else None,
                    s3_faults_injected=stats["injected"] if endpoint else None, links=tuple(links), run_name=plan.run)


def _chain(job: _Job, base: Path, endpoint: _Endpoint | None,
           checkpoint_uri: str | None) -> tuple[RunRecord, LocalJobConfig, str | None, list[LinkRecord]]:
    """The plan's run as a chain of local jobs on one checkpoint URI (sm_dist.local.chain)."""
    plan = job.plan
    assert plan.chain is not None and plan.run is not None
    uri = from_plan.sync_uri(plan, checkpoint_uri, "run")  # every link syncs with the run's URI
    last: list[tuple[LocalJobConfig, str | None]] = []

    def start(name: str, number: int, runtime: float, faults: tuple[Fault, ...]) -> RunRecord:
        limit = runtime if job.options.max_runtime_s is None else job.options.max_runtime_s
        record, config, listed = _one_run(job, base / "run" / f"link-{number}", "run", faults, endpoint, uri,
                                          name=name, display=f"link-{number}", max_runtime_s=limit)
        last.append((config, listed))
        return record

    links = run_chain(plan.run, local_policy(plan.chain), start, job.faults)
    config, listed_uri = last[-1]
    return chain_record(links, [str(f) for f in job.faults if f.kind == "capacity"]), config, listed_uri, links


def _verification(record: RunRecord, checked: RunRecord | None, hosts: Iterable[str]) -> Verification | None:
    """sm_dist's model hashes when both runs printed one, else the weight files in the model folders."""
    if checked is None:
        return None
    if checked.outcome.status != "Completed":
        return Verification(result=verify.CANNOT, detail=f"the uninterrupted run ended {checked.outcome.status}; "
                                                         f"its logs: {checked.root / 'logs'}")
    return (verify.by_hash(record.progress.model_sha256, checked.progress.model_sha256)
            or verify.compare_hosts(record.root / "hosts", checked.root / "hosts", list(hosts)))


#: The name `sm_dist.local.run_local` had before the backends became peers.
run_local = run
