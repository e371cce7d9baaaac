"""`Job`: a handle on a SageMaker training job — status, wait, logs, stop, checkpoints, cost, metrics.

`sm_dist.fit(...)` returns one; `Job.attach(name)` makes one for any existing job. Clients come
from the given boto3 session (None → a default one, created on first use). sm_dist records the
pre-launch estimate and the checkpoint URI as job tags (`sm-dist:*`), so `cost()` and
`checkpoints()` work from any process, not only the one that launched the job.
Reading DescribeTrainingJob's answer (status, the wait's lines, `CloudSummary`) is
`sm_dist.cloud.job_status`'s (import it from there).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeAlias, overload

from sm_dist.cloud.checkpoints import list_checkpoints
from sm_dist.cloud.cost import JobCost, job_cost
from sm_dist.cloud.job_status import CloudSummary, job_status, status_html, status_line, training_phase_seconds
from sm_dist.cloud.logs import FOLLOW_POLL_S, iter_log_lines
from sm_dist.contract.chain import TAG_CHECKPOINT
from sm_dist.contract.job import CheckpointList, JobStatus, Released, tensorboard_command
from sm_dist.errors import ConfigError, LaunchError
from sm_dist.estimator.calibration import Calibration, from_job
from sm_dist.notebook.live import LiveDisplay
from sm_dist.notebook.metrics import Metrics, read_metrics
from sm_dist.planning.tags import TAG_FLOPS_PARAMS, TAG_TOKENS

if TYPE_CHECKING:
    from boto3.session import Session
    from matplotlib.axes import Axes
    from mypy_boto3_logs import CloudWatchLogsClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker.type_defs import DescribeTrainingJobResponseTypeDef

    from sm_dist.notebook.plot import StrPath

    #: A client Job uses: SageMaker (status, stop, tags), CloudWatch Logs, S3 (checkpoints).
    AwsClient: TypeAlias = SageMakerClient | CloudWatchLogsClient | S3Client
    from sm_dist.planning.plan import Plan

#: Seconds between DescribeTrainingJob calls while waiting (the SDK's own waiter uses 30 s).
WAIT_POLL_S = 30.0


class Job:
    """A SageMaker training job launched by (or attached to) sm_dist."""

    def __init__(self, name: str, *, session: Session | None = None, region: str | None = None,
                 plan: Plan | None = None, clients: Mapping[str, AwsClient] | None = None) -> None:
        """`clients`: ready boto3 clients by service name ("sagemaker", "logs", "s3"), else made
        from `session` on first use."""
        self.name = name
        self.plan = plan
        self._session = session
        self._region = region or (plan.region if plan is not None else None)
        self._clients: dict[str, AwsClient] = dict(clients or {})

    @classmethod
    def attach(cls, name: str, session: Session | None = None, region: str | None = None,
               clients: Mapping[str, AwsClient] | None = None) -> Job:
        """A handle on an existing job (checked to exist)."""
        job = cls(name, session=session, region=region, clients=clients)
        job.describe()
        return job

    def __repr__(self) -> str:
        return f"Job({self.name!r})"

    @overload
    def client(self, service: Literal["sagemaker"]) -> SageMakerClient: ...
    @overload
    def client(self, service: Literal["logs"]) -> CloudWatchLogsClient: ...
    @overload
    def client(self, service: Literal["s3"]) -> S3Client: ...
    def client(self, service: Literal["sagemaker", "logs", "s3"]) -> AwsClient:
        """The boto3 client of `service` for this job's region (given, or made from the session)."""
        if service not in self._clients:
            if self._session is None:
                import boto3

                from sm_dist.provision.aws import session_or_default

                self._session = boto3.Session(region_name=self._region) if self._region else session_or_default()
            self._clients[service] = self._session.client(service, region_name=self._region)
        return self._clients[service]

    def describe(self) -> DescribeTrainingJobResponseTypeDef:
        """The raw DescribeTrainingJob response."""
        from botocore.exceptions import ClientError

        try:
            return self.client("sagemaker").describe_training_job(TrainingJobName=self.name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ValidationException":
                raise ConfigError("job", self.name, f"no such training job in this region ({exc.response['Error'].get('Message')})") from None
            raise LaunchError(f"DescribeTrainingJob {self.name}: {exc}") from None

    def status(self) -> JobStatus:
        """Primary and secondary status, with the latest status message."""
        return job_status(self.name, self.describe())

    def wait(self, *, poll_s: float = WAIT_POLL_S, timeout_s: float | None = None, progress: bool = True,
             out: TextIO | None = None, logs: bool = False, sleep: Callable[[float], None] = time.sleep) -> JobStatus:
        """Block until the job ends, showing SageMaker's status and secondary status as they change:
        in a notebook one display updated in place, elsewhere a line per change on `out` (default
        stdout). `logs=True` streams every host's log lines (CloudWatch) as they arrive instead."""
        if logs:
            for line in self.logs(follow=True, poll_s=min(poll_s, FOLLOW_POLL_S), sleep=sleep):
                print(line, file=out or sys.stdout, flush=True)
        display = LiveDisplay(out, tty=False, every=None) if progress else None
        start = time.monotonic()
        while True:
            current = self.status()
            if display is not None:
                display.show(f"[{time.strftime('%H:%M:%S')}] {self.name} {status_line(current)}",
                             key=status_line(current), html=status_html(current, time.monotonic() - start),
                             final=current.done)
            if current.done:
                return current
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                raise LaunchError(f"{self.name} still {current.status} after {timeout_s:.0f} s")
            sleep(poll_s)

    def logs(self, follow: bool = False, *, poll_s: float = 5.0, sleep: Callable[[float], None] = time.sleep) -> Iterator[str]:
        """Log lines of all hosts, "[algo-N] message", interleaved by time; `follow` until the job ends."""
        return iter_log_lines(self.client("logs"), self.name, follow=follow, is_done=lambda: self.status().done,
                              poll_s=poll_s, sleep=sleep)

    def stop(self) -> JobStatus:
        """StopTrainingJob: SageMaker sends SIGTERM; sm_dist's PID 1 relays it to the workers,
        which commit a checkpoint within the 120 s grace. A job already finished is left alone."""
        from botocore.exceptions import ClientError

        try:
            self.client("sagemaker").stop_training_job(TrainingJobName=self.name)
        except ClientError as exc:
            current = self.status()
            if current.done:
                return current
            raise LaunchError(f"StopTrainingJob {self.name}: {exc}") from None
        return self.status()

    def tags(self) -> dict[str, str]:
        """The job's tags (sm_dist's `sm-dist:*` ones carry the estimate and checkpoint URI)."""
        arn = self.describe()["TrainingJobArn"]
        response = self.client("sagemaker").list_tags(ResourceArn=arn)
        return {t["Key"]: t["Value"] for t in response.get("Tags", [])}

    def checkpoint_uri(self) -> str | None:
        """The job's checkpoint URI: from its plan, else its CheckpointConfig, else its sm-dist:checkpoint-uri tag."""
        if self.plan is not None:
            return self.plan.checkpoint_uri
        desc = self.describe()
        return (desc.get("CheckpointConfig") or {}).get("S3Uri") or self.tags().get(TAG_CHECKPOINT)

    def tensorboard_uri(self) -> str | None:
        """TensorBoardOutputConfig.S3OutputPath: from its plan, else DescribeTrainingJob (None: tensorboard off)."""
        if self.plan is not None:
            return self.plan.tensorboard_uri
        return (self.describe().get("TensorBoardOutputConfig") or {}).get("S3OutputPath")

    def tensorboard(self, start: bool = False, port: int = 6006) -> str:
        """`tensorboard --logdir s3://...`: the folder SageMaker syncs while the job runs (TensorBoard reads S3
        with your AWS configuration); `start=True` starts it here and returns its address."""
        uri = self.tensorboard_uri()
        if not uri:
            raise ConfigError("job", self.name, "has no TensorBoardOutputConfig (launched without tensorboard=True, "
                              "--tensorboard)")
        return tensorboard_command(uri, start=start, port=port)

    def checkpoints(self) -> CheckpointList:
        """Checkpoints under the job's checkpoint URI, newest first (committed = has a manifest)."""
        uri = self.checkpoint_uri()
        if not uri:
            raise ConfigError("job", self.name, "has no S3 checkpoint URI (launched without checkpoint_s3_uri)")
        return list_checkpoints(self.client("s3"), uri)

    def cost(self) -> JobCost:
        """Billable seconds × instances × catalog price, the spot saving, and the pre-launch estimate."""
        return job_cost(self.name, self.describe(), self.tags(), self._region)

    def release(self) -> int | None:
        """End the warm pool this job keeps (UpdateTrainingJob, keep-alive 0; docs/PLATFORM.md §1.13); its
        retained billable seconds so far. A job with no Available pool: a ConfigError saying its state."""
        from sm_dist.cloud.warm_pool import release

        desc: Any = self.describe()
        return release(self.client("sagemaker"), self.name, desc)

    def release_pool(self) -> Released:
        """`release()`, and what the pool was billed for so far: the line `sm-dist release JOB` prints."""
        cost = self.cost()
        retained = self.release()
        usd = cost.retained_usd if retained == cost.retained_s else None
        billed = "" if retained is None else f"; kept {retained} s × {cost.instance_count} instances" + (
            f" ≈ ${usd:,.2f}" if usd is not None else "")
        return Released(cost.name, retained, usd, f"released the warm pool of {cost.name} (KeepAlivePeriodInSeconds 0: "
                        f"SageMaker ends it now){billed}")

    def debug(self, host: str = "algo-1", command: str | None = None, start: bool = False) -> int:
        """The SSM session into `host` of a job launched with remote_debug: printed, or opened with `start`
        (`sm_dist.cloud.debug`). A command runs only in a local job's host: here, type it in the session."""
        from sm_dist.cloud import debug

        if command is not None:
            raise ConfigError("--command", command, "runs in a local job's host (a run on this machine: its name or "
                              "folder); in a SageMaker job, type it in the SSM session (--run opens it)")
        return debug.debug(self.describe(), host, start)

    def stacks(self) -> int:
        """How to see every rank's stack of the running job: the SSM route (`sm_dist.cloud.debug.stacks`)."""
        from sm_dist.cloud import debug

        return debug.stacks(self.describe())

    def calibration(self) -> Calibration:
        """What this finished job measured, as `estimate-cost --calibration` takes it: the tokens its
        plan was sized for (tags `sm-dist:tokens`, `sm-dist:flops-params`) over the time SageMaker
        spent in its Training phase, on its instances (`sm_dist.estimator.calibration.from_job`)."""
        desc, tags = self.describe(), self.tags()
        if desc.get("TrainingJobStatus") != "Completed":
            raise ConfigError("job", self.name, f"is {desc.get('TrainingJobStatus')}: only a completed job trained the "
                              "tokens its plan names; calibrate from a completed one")
        tokens, params = tags.get(TAG_TOKENS), tags.get(TAG_FLOPS_PARAMS)
        if tokens is None or params is None:
            raise ConfigError("job", self.name, "has no sm-dist:tokens tag: launch with tokens= and the model size "
                              "(params=, model= or hf_config=) for sm-dist cost to measure its throughput")
        seconds = training_phase_seconds(desc) or desc.get("TrainingTimeInSeconds")
        if not seconds:
            raise ConfigError("job", self.name, "reports no training time yet; try again once DescribeTrainingJob has it")
        resources = desc["ResourceConfig"]
        kind = resources.get("SelectedInstanceType") or resources["InstanceType"]  # Selected*: InstancePreferences
        return from_job(tokens=float(tokens), training_seconds=float(seconds), instance_type=kind,
                        instance_count=int(resources.get("InstanceCount", 1)), params=int(params), model=self.name)

    def metrics(self) -> Metrics:
        """The job's logged metrics (step, loss, learning rate, ...) as a table, read from its
        CloudWatch logs: the metric lines SageMaker's metric definitions scrape, or Hugging Face
        Trainer's log dicts (`sm_dist.notebook.metrics`)."""
        return read_metrics(self.logs())

    def plot(self, *names: str, path: StrPath | None = None, ax: Axes | None = None) -> Axes:
        """The loss curve (and learning rate, throughput) of the job so far, resumes marked; inline
        in a notebook (matplotlib: pip install 'sm_dist[plot]')."""
        return self.metrics().plot(*names, path=path, ax=ax)

    def _repr_html_(self) -> str:
        """A notebook shows the summary (DescribeTrainingJob and the tags, asked now)."""
        from sm_dist.markup import escape

        try:
            return self.summary()._repr_html_()
        except Exception as exc:  # noqa: BLE001 - showing a job must not raise; say why it shows less
            return f"<p>{escape(repr(self))}: status unavailable ({escape(exc)})</p>"

    def summary(self) -> CloudSummary:
        """Status, cost next to the estimate, where the checkpoints and logs are: one record."""
        desc = self.describe()
        tags = self.tags()
        uri = self.plan.checkpoint_uri if self.plan is not None else None
        uri = uri or (desc.get("CheckpointConfig") or {}).get("S3Uri") or tags.get(TAG_CHECKPOINT)
        return CloudSummary(status=job_status(self.name, desc), cost=job_cost(self.name, desc, tags, self._region),
                            checkpoint_uri=uri, region=self._region,
                            tensorboard_uri=(desc.get("TensorBoardOutputConfig") or {}).get("S3OutputPath"))


__all__ = ["Job"]
