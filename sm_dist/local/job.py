"""`LocalJob`: the handle of a finished local run — the job-handle contract, as the cloud `Job`.

It implements `sm_dist.contract.job.JobHandle`: status() and checkpoints() return the same records
as the cloud job's (JobStatus, CheckpointInfo), logs() the same "[algo-N] " lines, cost() a record
with `.usd`, and summary() the `LocalSummary` that `sm-dist fit --local` prints (`--json`: its
`to_dict()`). The run is over when the handle is returned, so wait() and stop() return the status.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sm_dist.contract.chain import Action
from sm_dist.contract.checkpoint import MANIFEST_NAME, committed_manifest, parse_step
from sm_dist.contract.job import CheckpointList, JobStatus, checkpoint_info, tensorboard_command
from sm_dist.errors import ConfigError
from sm_dist.local import tb_sync
from sm_dist.local.chain import LinkRecord
from sm_dist.local.clean import pile_up
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.cost import LocalCost, local_cost
from sm_dist.local.run_records import RunRecord
from sm_dist.local.stores import Store
from sm_dist.local.summary import LocalSummary, StepsWentBack
from sm_dist.local.verify import Verification
from sm_dist.notebook.metrics import Metrics, read_metrics

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from sm_dist.notebook.plot import StrPath

_log = logging.getLogger(__name__)


@dataclass
class LocalJob:
    """A local job: the run, and optionally its chaos-free verification run."""

    config: LocalJobConfig
    run: RunRecord
    chaos: tuple[str, ...] = ()
    verify_run: RunRecord | None = None
    processes_per_host: int | None = None
    estimate_usd: float | None = None
    checkpoint_uri: str | None = None
    verification: Verification | None = None
    s3_requests: int | None = None
    """Requests the local S3 endpoint served (None: the job used no S3)."""
    s3_faults_injected: int | None = None
    links: tuple[LinkRecord, ...] = ()
    """A chain's links in order (`run` then sums them up and holds the last that ran)."""
    run_name: str | None = None
    """A chain's run name (its links are `<run>-1`, ...)."""
    warm_pool: str | None = None
    """Whether the job started on a kept warm pool or cold, and why (`sm_dist.local.warm_pool`)."""

    @property
    def name(self) -> str:
        """The local job's name (a chain's run name)."""
        return self.run_name or self.config.job_name

    def status(self) -> JobStatus:
        """A `JobStatus`, as the cloud `Job.status()` returns: Completed, Failed or Stopped."""
        out = self.run.outcome
        restarts = out.job_restarts + self.run.in_job_restarts
        message = f"local: {self.config.instance_count} hosts, {restarts} restart(s)"
        failure = out.error or "; ".join(f"{h}: {t.strip()}" for h, t in sorted(out.failures.items())) or None
        return JobStatus(self.name, out.status, out.stopped_reason or out.status, message, failure)

    @property
    def root(self) -> Path:
        """The folder the run kept on this machine: hosts, logs, models, checkpoints."""
        return self.run.root

    @property
    def mlflow_uri(self) -> str | None:
        """Where this job's MLflow runs went (`mlflow=`: a file store under the run's folder, unless the user's
        environment= named another MLFLOW_TRACKING_URI); None without `mlflow=`."""
        env = self.config.environment
        return env.get("MLFLOW_TRACKING_URI") if env.get("SM_DIST_MLFLOW") == "1" else None

    def model_dir(self, host: str = "algo-1") -> Path:
        """The model/ folder of a host (what SageMaker would tar into model.tar.gz)."""
        return self.run.root / "hosts" / host / "model"

    def logs(self, follow: bool = False, host: str | None = None) -> Iterator[str]:
        """Every host's log lines prefixed "[algo-N] ", like the cloud `Job.logs()` (one host's,
        unprefixed, with `host=`). The run is over, so `follow` changes nothing."""
        roots = [link.record.root for link in self.links if link.record is not None] or [self.run.root]
        paths = [p for root in roots for p in ([root / "logs" / f"{host}.log"] if host is not None
                                              else sorted((root / "logs").glob("*.log")))]
        for path in paths:
            prefix = "" if host is not None else f"[{path.stem}] "
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                yield prefix + line

    def wait(self) -> JobStatus:
        """The job ended before its handle was returned: its status."""
        return self.status()

    def stop(self) -> JobStatus:
        """Nothing left to stop: the status of the finished job."""
        return self.status()

    def checkpoints(self) -> CheckpointList:
        """Step folders at the checkpoint URI when the job ended, newest first, as the cloud
        `Job.checkpoints()` lists them (`CheckpointInfo`; committed = its manifest is there and parses)."""
        return list_checkpoints(self.checkpoint_uri or "", self.run.checkpoint_keys, self.run.checkpoint_manifests)

    def tensorboard(self, start: bool = False, port: int = 6006) -> str:
        """`tensorboard --logdir <run>/tensorboard`: the event files the job synced to its S3 TensorBoard
        prefix, downloaded when it ended (a chain's: every job's). `start=True` starts TensorBoard on them
        and returns its address."""
        if self.run.tensorboard_uri is None:
            raise ConfigError("job", self.name, "ran without tensorboard=True (--tensorboard): no TensorBoard folder")
        return tensorboard_command(str(self.run.root / tb_sync.FOLDER), start=start, port=port)

    def release(self) -> int:
        """End the warm pool this job kept (keep_alive_s), as the cloud `Job.release()` does: its hosts' caches
        go; the seconds they were kept. None kept now: a ConfigError saying why (`sm-dist release JOB`)."""
        from sm_dist.local.warm_pool import end

        return round(time.time() - end(self.run.root, self.name).available_at)

    def cost(self) -> LocalCost:
        """0 $ here, and the same wall-clock time priced on the chosen SageMaker instances."""
        return local_cost(self.config.instance_type, self.config.instance_count, self.run.seconds)

    @property
    def verified(self) -> bool | None:
        """Whether the final model equals the chaos-free run's (None: not verified, or nothing to compare)."""
        return None if self.verification is None else self.verification.verified

    @property
    def chaos_missed(self) -> tuple[str, ...]:
        """Chaos specs given that never fired: the run proved nothing about them."""
        return tuple(c for c in self.chaos if c not in self.run.fired)

    @property
    def exit_code(self) -> int:
        """0 when the job completed, every chaos fault fired and, with --verify, the final model
        matched the chaos-free run's; else 1."""
        if self.run.outcome.status != "Completed" or self.chaos_missed:
            return 1
        return 0 if self.verify_run is None or self.verified is True else 1

    def __str__(self) -> str:
        return str(self.summary())

    def __repr__(self) -> str:
        out = self.run.outcome
        return (f"LocalJob({self.name!r}, {out.status}, {self.config.instance_count} hosts, "
                f"steps={self.run.progress.steps}, restarts={out.job_restarts + self.run.in_job_restarts}, "
                f"verified={self.verified})")

    def _repr_html_(self) -> str:
        """The summary as a table, and where to look next."""
        from sm_dist.markup import escape, text_table

        more = (f'<p style="font-size:0.9em;opacity:0.75">logs in {escape(self.run.root / "logs")}: '
                "<code>job.logs()</code> · metrics: <code>job.metrics()</code>, <code>job.plot()</code> · "
                "<code>job.checkpoints()</code></p>")
        return text_table(str(self.summary()), extra=more)

    def metrics(self) -> Metrics:
        """The run's logged metrics (step, loss, learning rate, ...), read from the hosts' logs:
        sm_dist's metric lines or Hugging Face Trainer's log dicts. A table in a notebook."""
        return read_metrics(self.logs())

    def plot(self, *names: str, path: StrPath | None = None, ax: Axes | None = None) -> Axes:
        """The loss curve (and learning rate, throughput) of the run, resumes marked; `names`
        picks the metrics. Inline in a notebook (matplotlib: pip install 'sm_dist[plot]')."""
        return self.metrics().plot(*names, path=path, ax=ax)

    def summary(self) -> LocalSummary:
        """Steps, restarts, resumes, chaos, verification, checkpoints and cost, as one record."""
        run, progress, check = self.run, self.run.progress, self.verification
        restores = progress.restores  # a script that prints no resumed line: the restored checkpoint's step
        return LocalSummary(
            job_name=self.name, status=run.outcome.status, hosts=self.config.instance_count,
            processes_per_host=self.processes_per_host, wall_seconds=round(run.seconds, 1), cost=self.cost(),
            steps=progress.steps, restarts=run.outcome.job_restarts + run.in_job_restarts,
            job_restarts=run.outcome.job_restarts, in_job_restarts=run.in_job_restarts,
            resumed_from=tuple(progress.resumed_from) or tuple(s for _, s in restores if s is not None),
            resumed_checkpoints=tuple(path for path, _ in restores),
            steps_went_back=tuple(StepsWentBack(h, a, b) for h, a, b in progress.went_back),
            model_sha256=progress.model_sha256, verified=self.verified,
            restart_causes=tuple(run.outcome.restart_causes),
            verify_result=check.result if check else None, verify_detail=check.detail if check else None,
            verify_cause=check.cause if check else None, verify_cause_detail=check.cause_detail if check else None,
            verify_model_sha256=self.verify_run.progress.model_sha256 if self.verify_run else None,
            chaos=self.chaos, chaos_fired=tuple(run.fired), chaos_events=tuple(run.events),
            checkpoint_uri=self.checkpoint_uri, checkpoint_files=len(run.checkpoint_keys),
            checkpoints_committed=tuple(c.step for c in self.checkpoints() if c.committed),
            failures=dict(run.outcome.failures), error=run.outcome.error, logs=str(run.root / "logs"),
            error_detail=run.outcome.error_detail, host_outcomes=dict(run.outcome.host_outcomes),
            exit_codes=dict(run.outcome.exit_codes[-1]) if run.outcome.exit_codes else {},
            warnings=tuple(run.warnings) + tuple(run.outcome.warnings) + tuple(pile_up(run.root)), stopped_reason=run.outcome.stopped_reason,
            root=str(run.root), run_name=self.run_name, links=tuple(link.line() for link in self.links),
            estimate_usd=self.estimate_usd, s3_requests=self.s3_requests, s3_faults_injected=self.s3_faults_injected,
            tensorboard=self._tensorboard_line(),
            warm_pool=self.warm_pool,
            mlflow_uri=self.mlflow_uri,
        )

    def _tensorboard_line(self) -> str | None:
        run = self.run
        if run.tensorboard_uri is None:
            return None
        files, uploads = len(run.tensorboard_keys), run.outcome.tensorboard_uploads_running
        return (f"{run.tensorboard_uri}: {files} file{'' if files == 1 else 's'}, {uploads} upload"
                f"{'' if uploads == 1 else 's'} while it ran; tensorboard --logdir {run.root / tb_sync.FOLDER}")


def chain_record(links: Sequence[LinkRecord], capacity_specs: Sequence[str] = ()) -> RunRecord:
    """A chain's links as one run: the last link that ran (its progress, model, checkpoints) with
    every link's restarts, chaos and warnings; a run the decision stopped says why in its error."""
    ran = [link.record for link in links if link.record is not None]
    last, final = ran[-1], links[-1]
    outcome = replace(
        last.outcome, job_restarts=sum(r.outcome.job_restarts for r in ran), started=ran[0].outcome.started,
        ended=time.time() if final.record is None else last.outcome.ended,
        warnings=list(dict.fromkeys(w for r in ran for w in r.outcome.warnings)))
    if final.decision.action is Action.STOP and outcome.status != "Failed":
        outcome.error = final.decision.reason
        outcome.status = "Failed" if final.record is None else outcome.status
    refused = any(link.record is None for link in links)
    return RunRecord(outcome, last.progress, sum(r.in_job_restarts for r in ran),
                     [f for r in ran for f in r.fired] + (list(capacity_specs) if refused else []), last.root,
                     events=[e for r in ran for e in r.events], checkpoint_keys=last.checkpoint_keys,
                     checkpoint_manifests=last.checkpoint_manifests,
                     warnings=list(dict.fromkeys(w for r in ran for w in r.warnings)),
                     tensorboard_uri=last.tensorboard_uri, tensorboard_keys=last.tensorboard_keys)


def list_checkpoints(uri: str, keys: Mapping[str, int], manifests: Mapping[str, bytes]) -> CheckpointList:
    """Step folders among `keys` (relative key -> size), newest first, with the contract's "committed"
    (`committed_manifest`: the manifest is there and parses), as the cloud listing reports them."""
    steps: dict[tuple[int, str], list[int]] = {}
    for key, size in keys.items():
        folder, _, rest = key.partition("/")
        step = parse_step(folder)
        if step is not None and rest:
            steps.setdefault((step, folder), []).append(size)
    base = uri.rstrip("/")
    infos = [
        checkpoint_info(step, f"{base}/{folder}/",
                        committed_manifest(manifests.get(folder), where=f"{base}/{folder}/{MANIFEST_NAME}"),
                        total_bytes=sum(sizes), files=len(sizes))
        for (step, folder), sizes in steps.items()
    ]
    return CheckpointList(sorted(infos, key=lambda info: info.step, reverse=True))


def store_manifests(store: Store | None) -> dict[str, bytes]:
    """Step folder -> manifest bytes of every step at the store (read before its endpoint stops)."""
    if store is None:
        return {}
    out: dict[str, bytes] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="sm-dist-manifests-") as tmp:
            for key in store.list():
                folder, _, rest = key.partition("/")
                if rest == MANIFEST_NAME and parse_step(folder) is not None:
                    dest = Path(tmp) / folder
                    store.get(key, dest)
                    out[folder] = dest.read_bytes()
    except Exception as exc:  # noqa: BLE001 - a listing failure must not hide the run's result
        _log.warning("cannot read the manifests at %s: %s", store.uri, exc)
    return out
