"""One run of a local job: what every run of the job shares (`JobParts`), the local S3 endpoint
(`Endpoint`: moto's server on 127.0.0.1, when the job needs S3) and `one_run`, which lays one run out
from the plan, runs it (`sm_dist.local.runner`) and keeps its record. `sm_dist.local.api.run` decides
which runs a job makes (the run, a chain's links, --verify's)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sm_dist.contract.container import nproc_per_node
from sm_dist.errors import ConfigError
from sm_dist.local import from_plan, tb_sync
from sm_dist.local.chaos import Fault
from sm_dist.local.config import LocalChannel, LocalJobConfig
from sm_dist.local.job import store_manifests
from sm_dist.local.options import LocalOptions
from sm_dist.local.run_records import Outcome, RunRecord, RunSettings
from sm_dist.local.runner import LocalRunner
from sm_dist.local.stores import Store, open_store, written_since
from sm_dist.local.view import ProgressView

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from sm_dist.planning.plan import Plan

_log = logging.getLogger(__name__)
#: Fake credentials for the local endpoint (moto accepts any); never real ones.
_LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "sm-dist-local", "AWS_SECRET_ACCESS_KEY": "sm-dist-local"}
#: The error s3-faults injects: S3's own "retry later" answer to overload.
S3_FAULT_KIND = "503"


class Endpoint:
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


def needs_s3(plan: Plan, uris: list[str | None], faults: tuple[Fault, ...]) -> bool:
    uses_s3 = any(u and u.startswith("s3://") for u in uris) or plan.job_spec.checkpoint.mode == "s3"
    if any(f.kind == "s3-faults" for f in faults) and not uses_s3:
        raise ConfigError("chaos", "s3-faults", "this job uses no S3 (checkpoint URI is a local folder or off)")
    return uses_s3


@dataclass(frozen=True)
class JobParts:
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


def one_run(job: JobParts, root: Path, label: str, faults: tuple[Fault, ...], endpoint: Endpoint | None,
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


def store_keys(store: Store | None) -> dict[str, int]:
    """Keys at the checkpoint URI now -> size (the endpoint stops with the run; keep the listing)."""
    if store is None:
        return {}
    try:
        return store.list()
    except Exception as exc:  # a listing failure must not hide the run's result
        _log.warning("cannot list %s: %s", store.uri, exc)
        return {}
