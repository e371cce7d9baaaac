"""`run(plan, options)`: the local backend — a planned SageMaker job on this machine.

`sm_dist.fit(..., local=True)` and `sm-dist fit --local` hand it a plan made with `local=True`
(`sm_dist.plan(..., local=True)`) and the `LocalOptions`; it imports the plan layer, never the
facade (`sm_dist.launch`) nor the cloud backend. The job runs as
`plan.instance_count` emulated hosts, each running the plan's container command (sm_dist's
PID 1, which starts torchrun) in a folder laid out like /opt/ml; S3 is moto's server on
127.0.0.1, started here when the job needs one, so no AWS account is involved. One run (the endpoint,
the runner, its record) is `sm_dist.local.one_run`'s; this module decides which runs a job makes.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from sm_dist.contract.container import INSTALL_REQUIREMENTS_ENV, NPROC_ENV
from sm_dist.errors import ConfigError
from sm_dist.local import clean, from_plan, kept_job, mountns, verify, warm_pool
from sm_dist.local.chain import LinkRecord, local_policy, run_chain
from sm_dist.local.chaos import Fault
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.job import LocalJob, chain_record
from sm_dist.local.one_run import Endpoint, JobParts, needs_s3, one_run
from sm_dist.local.options import LocalOptions
from sm_dist.local.run_records import RunRecord, print_line
from sm_dist.local.verify import Verification
from sm_dist.notebook.live import in_notebook
from sm_dist.planning import requirements_check
from sm_dist.planning.profile import without_missing_profile

if TYPE_CHECKING:
    from sm_dist.planning.plan import Plan

_log = logging.getLogger(__name__)


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


def run(plan: Plan, options: LocalOptions | Mapping[str, object] | None = None) -> LocalJob:
    """Run `plan` (from `sm_dist.plan(..., local=True)`) on this machine; return the finished `LocalJob`.

    `options`: `LocalOptions` (or a dict of its fields): chaos, verify, root, checkpoint_uri,
    grace_seconds, max_runtime_s, echo/view and where they go.
    """
    opts = check_options(options, chain=plan.chain is not None, spot=bool(plan.request.get("EnableManagedSpotTraining")))
    base = Path(opts.root).resolve() if opts.root is not None else Path(tempfile.gettempdir()) / "sm-dist-local" / plan.job_name
    _check_root(base)
    _check_requirements(plan)
    mountns.probe_early()  # a process: it runs while the endpoint and the bundle are made here
    # the hosts run in this environment: checked above, never pip-installed into
    env = {INSTALL_REQUIREMENTS_ENV: "0"}
    if opts.nproc_per_node:
        env[NPROC_ENV] = str(opts.nproc_per_node)
    echo, view = _echo_or_view(opts)
    channels = from_plan.local_channels(plan, opts.data, opts.s3_data, base / "s3-data")
    job = JobParts(plan=plan, options=opts, faults=opts.faults(), bundle=from_plan.write_code(plan, base / "bundle"),
               channels=channels,
               env=env, echo=_echo(echo and not view, opts.echo_stream), view=view)
    clean.mark_running(base, True)  # `sm-dist local clean` leaves it alone while this runs, not after
    try:
        with without_missing_profile():  # moto's in-process server makes boto3 Sessions
            local, local_start = warm_pool.run_on_pool(base.parent / warm_pool.POOLS_FOLDER, plan.request,
                                                       plan.job_name, lambda pool: _run_job(replace(job, pool=pool), base))
    finally:
        clean.mark_running(base, False)
    local.warm_pool = local_start
    kept_job.keep_record(base, local)  # `sm-dist status NAME` and the rest, from another process
    return local


def check_options(options: LocalOptions | Mapping[str, object] | None, *, chain: bool, spot: bool) -> LocalOptions:
    """The refusals that need no plan (`sm_dist.fit` asks before it builds one, `run` again): chaos a
    job without a chain cannot rehearse, a given root that is not empty. Returns the options."""
    opts = LocalOptions.coerce(options)
    capacity = [str(f) for f in opts.faults() if f.kind == "capacity"]
    if capacity and not chain:
        raise ConfigError("chaos", capacity[0], "rehearses a chain's wait for capacity: add chain=True (--chain)")
    max_wait = [str(f) for f in opts.faults() if f.kind == "max-wait"]
    if max_wait and not (chain and spot):
        raise ConfigError("chaos", max_wait[0], "rehearses a spot job's MaxWait in a chain: add chain=True and "
                          "spot=True (--chain --spot)")
    if opts.root is not None:
        _check_root(Path(opts.root).resolve())
    return opts


def _check_root(base: Path) -> None:
    if base.exists() and any(base.iterdir()):
        raise ConfigError("root", str(base), "expected a new or empty folder")


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


def _run_job(job: JobParts, base: Path) -> LocalJob:
    """The run (and the verify run) against the local S3 endpoint when the job needs one."""
    plan, checkpoint_uri = job.plan, job.options.checkpoint_uri
    uri = from_plan.sync_uri(plan, checkpoint_uri, "run")
    endpoint = None
    if needs_s3(plan, [uri, plan.job_spec.checkpoint.uri, plan.tensorboard_uri], job.faults):
        endpoint = Endpoint(plan.region or "us-east-1", faults=any(f.kind == "s3-faults" for f in job.faults))
    links: list[LinkRecord] = []
    try:
        if plan.chain is not None:
            record, config, listed_uri, links = _chain(job, base, endpoint, checkpoint_uri)
        else:
            record, config, listed_uri = one_run(job, base / "run", "run", job.faults, endpoint, checkpoint_uri)
        checked, verification = _verify(job, base, endpoint, record, config.hosts, chained=bool(links)) \
            if job.options.verify else (None, None)
    finally:
        if endpoint is not None:
            stats = endpoint.server.plan.stats()
            endpoint.server.stop()
    return LocalJob(config=config, run=record, chaos=tuple(str(f) for f in job.faults), verify_run=checked,
                    processes_per_host=job.nproc, estimate_usd=plan.sizing.expected_usd(),
                    checkpoint_uri=listed_uri, verification=verification,
                    s3_requests=stats["requests"] if endpoint else None,
                    s3_faults_injected=stats["injected"] if endpoint else None, links=tuple(links), run_name=plan.run)


def _verify(job: JobParts, base: Path, endpoint: Endpoint | None, record: RunRecord, hosts: Iterable[str], *,
            chained: bool) -> tuple[RunRecord | None, Verification | None]:
    """--verify: the uninterrupted run and what comparing the final models found. A run that did not
    complete (it failed, a chain stopped) left no final model: no second run, and the answer says why."""
    if record.outcome.status != "Completed":
        _log.warning("--verify: the run ended %s: no final model to compare, so no uninterrupted run was made",
                     record.outcome.status)
        return None, Verification(result=verify.CANNOT, detail=f"the run ended {record.outcome.status}: no final "
                                                               "model to compare, so no uninterrupted run was made")
    checkpoint_uri = job.options.checkpoint_uri
    verify_uri = None if checkpoint_uri is None else f"{checkpoint_uri.rstrip('/')}-verify"
    # a chain's final model is checked against one unchained run, as long as it takes
    checked, _, _ = one_run(job, base / "verify", "verify", (), endpoint, verify_uri,
                             max_runtime_s=None if chained else "job")
    verification = _verification(record, checked, hosts)
    again = None
    if verification is not None and verification.result == verify.DIFFERS and record.fired:
        # the resume, or the script? a second uninterrupted run says which
        again_uri = None if checkpoint_uri is None else f"{checkpoint_uri.rstrip('/')}-verify-again"
        rerun, _, _ = one_run(job, base / "verify-again", "verify-again", (), endpoint, again_uri)
        again = _verification(checked, rerun, hosts)
    return checked, verification and verify.explain(verification, bool(record.fired), again)


def _chain(job: JobParts, base: Path, endpoint: Endpoint | None,
           checkpoint_uri: str | None) -> tuple[RunRecord, LocalJobConfig, str | None, list[LinkRecord]]:
    """The plan's run as a chain of local jobs on one checkpoint URI (sm_dist.local.chain)."""
    plan = job.plan
    assert plan.chain is not None and plan.run is not None
    uri = from_plan.sync_uri(plan, checkpoint_uri, "run")  # every link syncs with the run's URI
    last: list[tuple[LocalJobConfig, str | None]] = []

    def start(name: str, number: int, runtime: float, faults: tuple[Fault, ...]) -> RunRecord:
        limit = runtime if job.options.max_runtime_s is None else job.options.max_runtime_s
        record, config, listed = one_run(job, base / "run" / f"link-{number}", "run", faults, endpoint, uri,
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

