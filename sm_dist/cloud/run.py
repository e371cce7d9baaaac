"""`Run`: the handle of a chained run (`sm_dist.fit(..., chain=True)`): its jobs, each one's status,
spot interruptions, cost and what the supervisor decided after it, and the sums.

A run's jobs are `<run>-1`, `<run>-2`, ... (contract.chain); the chain stack's supervisor creates
each next one and tags the ended one with its decision (`sm-dist:chain-decision`). `Run` is a
`JobHandle` (`sm_dist.contract.job`) that holds its jobs (each a `Job`), named as the run: status, wait,
logs, stop, checkpoints, cost, summary and metrics cover the whole run (`sm-dist status RUN` prints the
summary); tensorboard, debug, stacks and release act on its current job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TextIO, overload

from sm_dist.cloud.cost import JobCost, job_cost
from sm_dist.cloud.job import WAIT_POLL_S, Job
from sm_dist.contract.chain import TAG_DECISION, LinkOutcome, link_name
from sm_dist.contract.job import CheckpointList, JobStatus, Released
from sm_dist.errors import ConfigError, LaunchError
from sm_dist.markup import text_table

if TYPE_CHECKING:
    from collections.abc import Mapping

    from boto3.session import Session
    from matplotlib.axes import Axes
    from mypy_boto3_logs import CloudWatchLogsClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker.type_defs import DescribeTrainingJobResponseTypeDef

    from sm_dist.cloud.job import AwsClient
    from sm_dist.estimator.calibration import Calibration
    from sm_dist.notebook.metrics import Metrics
    from sm_dist.notebook.plot import StrPath
    from sm_dist.planning.plan import Plan

#: Jobs a run may have (max_links ≤ 99, plus those refused capacity).
MAX_JOBS = 200


@dataclass(frozen=True)
class LinkInfo:
    """One job of a run."""

    name: str
    status: str
    secondary: str
    interruptions: int
    cost: JobCost
    decision: str | None
    """What the supervisor decided after it (None: running, or not decided yet)."""
    failure_reason: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status, "secondary": self.secondary,
                "interruptions": self.interruptions, "usd": self.cost.usd, "decision": self.decision,
                "failure_reason": self.failure_reason}


@dataclass(frozen=True)
class RunSummary:
    """A run: its status, one row per job, and the sums (what `sm-dist status RUN` prints)."""

    status: JobStatus
    links: tuple[LinkInfo, ...]

    @property
    def usd(self) -> float | None:
        costs = [link.cost.usd for link in self.links]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def restarts(self) -> int:
        return sum(link.interruptions for link in self.links)

    def to_dict(self) -> dict[str, object]:
        return {**self.status.to_dict(), "jobs": [link.to_dict() for link in self.links], "usd": self.usd,
                "spot_interruptions": self.restarts}

    def __str__(self) -> str:
        s = self.status
        lines = [f"run {s.name}: {s.status} / {s.secondary}" + (f" — {s.message}" if s.message else "")]
        for link in self.links:
            usd = "-" if link.cost.usd is None else f"${link.cost.usd:,.2f}"
            lines.append(f"  {link.name:<40} {link.status + ' / ' + link.secondary:<32} interruptions "
                         f"{link.interruptions}  {usd:>10}  {link.decision or '-'}")
        total = "unknown (a job reports no billed seconds yet, or its type no price)" if self.usd is None else f"${self.usd:,.2f}"
        lines.append(f"  total           {len(self.links)} jobs, {self.restarts} spot interruptions, {total}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return text_table(str(self))


class Run:
    """A chained run on SageMaker, by its name: a `JobHandle` over its jobs `<name>-1`, `<name>-2`, ..."""

    def __init__(self, name: str, *, session: Session | None = None, region: str | None = None,
                 plan: Plan | None = None, clients: Mapping[str, AwsClient] | None = None) -> None:
        """`session`, `region`, `clients`: as `Job`'s, shared by every job of the run."""
        self.name = name
        self.plan = plan
        # the run's first job lends its clients (made on first use) to every other
        self._first = Job(link_name(name, 1), session=session, region=region, plan=plan, clients=clients)

    @property
    def _region(self) -> str | None:
        return self._first._region

    @property
    def _session(self) -> Session | None:
        return self._first._session

    @overload
    def client(self, service: Literal["sagemaker"]) -> SageMakerClient: ...
    @overload
    def client(self, service: Literal["logs"]) -> CloudWatchLogsClient: ...
    @overload
    def client(self, service: Literal["s3"]) -> S3Client: ...
    def client(self, service: Literal["sagemaker", "logs", "s3"]) -> AwsClient:
        """The boto3 client of `service` that the run's jobs share (`Job.client`)."""
        return self._first.client(service)

    def jobs(self) -> list[Job]:
        """The run's jobs that exist, in order."""
        found = []
        for number in range(1, MAX_JOBS + 1):
            job = self._first if number == 1 else Job(link_name(self.name, number), region=self._region, plan=self.plan, clients={
                "sagemaker": self.client("sagemaker"), "logs": self.client("logs"), "s3": self.client("s3")})
            try:
                job.describe()
            except ConfigError:
                break
            found.append(job)
        if not found:
            raise ConfigError("run", self.name, f"no training job {link_name(self.name, 1)} in this region")
        return found

    def current(self) -> Job:
        """The run's newest job."""
        return self.jobs()[-1]

    def describe(self) -> DescribeTrainingJobResponseTypeDef:
        """The current job's DescribeTrainingJob."""
        return self.current().describe()

    def links(self) -> list[LinkInfo]:
        """Each job of the run, oldest first: its status, spot interruptions, cost and what followed it."""
        out = []
        for job in self.jobs():
            desc, tags = job.describe(), job.tags()
            outcome = LinkOutcome.from_description(desc)
            out.append(LinkInfo(job.name, outcome.status, outcome.secondary, outcome.interruptions,
                                job_cost(job.name, desc, tags, self._region), tags.get(TAG_DECISION),
                                desc.get("FailureReason")))
        return out

    def status(self) -> JobStatus:
        """The run's status: its newest job's while that runs; after it, what the supervisor decided."""
        links = self.links()
        return _run_status(self.name, links, self._failed_event(links[-1]))

    def summary(self) -> RunSummary:
        """The run's status and its jobs."""
        links = self.links()
        return RunSummary(_run_status(self.name, links, self._failed_event(links[-1])), tuple(links))

    def _failed_event(self, last: LinkInfo) -> str | None:
        """Why the supervisor decided nothing on the ended `last` job, when its stack kept the event it failed
        on (sm_dist.cloud.supervision); looked up only through a session (given, or made for the clients)."""
        region = self._region or (self._session.region_name if self._session is not None else None)
        if last.decision or last.status in ("InProgress", "Stopping") or self._session is None or not region:
            return None
        from sm_dist.cloud.supervision import failed_event

        return failed_event(self._session, region, last.name)

    def wait(self, *, poll_s: float = WAIT_POLL_S, timeout_s: float | None = None, progress: bool = True,
             out: TextIO | None = None, logs: bool = False, sleep: Callable[[float], None] = time.sleep) -> JobStatus:
        """Block until the run ends (its last job ended and the supervisor decided so)."""
        start = time.monotonic()
        seen = None
        while True:
            current = self.status()
            line = f"{current.status} / {current.secondary}: {current.message}"
            if progress and line != seen:
                print(f"[{time.strftime('%H:%M:%S')}] {self.name} {line}", file=out, flush=True)
                seen = line
            if current.done:
                return current
            if timeout_s is not None and time.monotonic() - start > timeout_s:
                raise LaunchError(f"run {self.name} still {current.status} after {timeout_s:.0f} s")
            sleep(poll_s)

    def logs(self, follow: bool = False, *, poll_s: float = 5.0, sleep: Callable[[float], None] = time.sleep) -> Iterator[str]:
        """Every job's log lines in turn ("[algo-N] message"); `follow` the current one."""
        jobs = self.jobs()
        for job in jobs:
            yield from job.logs(follow=follow and job is jobs[-1], poll_s=poll_s, sleep=sleep)

    def stop(self) -> JobStatus:
        """Stop the current job: a job stopped by StopTrainingJob ends the run (contract.chain)."""
        self.current().stop()
        return self.status()

    def checkpoints(self) -> CheckpointList:
        """The run's checkpoints (every job resumes from the same URI)."""
        return self.current().checkpoints()

    def cost(self) -> RunCost:
        """The sum of its jobs' costs."""
        return RunCost(tuple(link.cost for link in self.links()))

    def calibration(self) -> Calibration:
        """Refused for a run: calibrate from one of its completed jobs (the error says how)."""
        raise ConfigError("run", self.name, "calibrate from one of its completed jobs: sm-dist cost "
                          f"{link_name(self.name, 1)} --calibration-out FILE")

    def release(self) -> int | None:
        """End the warm pool of the run's current job (`Job.release`)."""
        return self.current().release()

    def release_pool(self) -> Released:
        """End the warm pool of the run's current job (`Job.release_pool`)."""
        return self.current().release_pool()

    def tensorboard(self, start: bool = False, port: int = 6006) -> str:
        """`tensorboard --logdir s3://...` of the current job (`Job.tensorboard`)."""
        return self.current().tensorboard(start=start, port=port)

    def debug(self, host: str = "algo-1", command: str | None = None, start: bool = False) -> int:
        """The SSM session into `host` of the current job (`Job.debug`)."""
        return self.current().debug(host, command, start)

    def stacks(self) -> int:
        """How to see every rank's stack of the current job (`Job.stacks`)."""
        return self.current().stacks()

    def metrics(self) -> Metrics:
        """The run's logged metrics, every job's in turn (`Job.metrics`)."""
        from sm_dist.notebook.metrics import read_metrics

        return read_metrics(self.logs())

    def plot(self, *names: str, path: StrPath | None = None, ax: Axes | None = None) -> Axes:
        """The run's loss curve (and learning rate, throughput) so far, resumes marked (`Job.plot`)."""
        return self.metrics().plot(*names, path=path, ax=ax)

    def _repr_html_(self) -> str:
        """A notebook shows the run's summary: its jobs and the sums (asked now)."""
        from sm_dist.markup import escape

        try:
            return self.summary()._repr_html_()
        except Exception as exc:  # noqa: BLE001 - showing a run must not raise; say why it shows less
            return f"<p>{escape(repr(self))}: status unavailable ({escape(exc)})</p>"

    def __repr__(self) -> str:
        return f"Run({self.name!r})"


@dataclass(frozen=True)
class RunCost:
    """Each job's cost, and their sum (`usd`)."""

    jobs: tuple[JobCost, ...]

    @property
    def usd(self) -> float | None:
        costs = [c.usd for c in self.jobs]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    @property
    def retained_usd(self) -> float:
        """The jobs' warm pools' retained time, priced (part of `usd`)."""
        return sum(c.retained_usd or 0.0 for c in self.jobs)

    def to_dict(self) -> dict[str, object]:
        return {"usd": self.usd, "retained_usd": self.retained_usd, "jobs": [c.to_dict() for c in self.jobs]}

    def __str__(self) -> str:
        total = "unknown" if self.usd is None else f"${self.usd:,.2f}"
        pool = f" (warm pools ${self.retained_usd:,.2f})" if any(c.retained_s is not None for c in self.jobs) else ""
        return "\n".join([*(str(c) for c in self.jobs), f"run total    {total} for {len(self.jobs)} jobs{pool}"])


def find(name: str, region: str | None) -> Job | Run | str:
    """The SageMaker training job `name`, else the chained run `name` (its jobs `<name>-1`, ...), in `region`
    (None: your AWS configuration's); else where it looked ("in us-east-1"). `sm_dist.launch.jobs.attach` asks it
    last: it alone needs AWS."""
    from botocore.exceptions import NoRegionError

    job = Job(name, region=region)
    try:
        job.describe()
        return job
    except ConfigError:
        pass
    except NoRegionError:
        return "in no AWS region (region=None: set AWS_REGION, or give --region)"
    run = Run(name, session=job._session, region=region, clients={"sagemaker": job.client("sagemaker")})
    try:
        run.jobs()
    except ConfigError:
        return f"in {job.client('sagemaker').meta.region_name} (a training job, or a chained run's {link_name(name, 1)})"
    return run


def _run_status(name: str, links: list[LinkInfo], failed: str | None = None) -> JobStatus:
    """The run's status: its current job's while it runs; after it, what the supervisor decided (`failed`:
    why it decided nothing, from the events its stack kept)."""
    last = links[-1]
    where = f"job {len(links)}: {last.name}"
    if last.status in ("InProgress", "Stopping"):
        return JobStatus(name, "InProgress", last.secondary, where)
    decision = last.decision or ""
    if decision.startswith("done"):
        return JobStatus(name, "Completed", "Completed", f"{where}; {decision}")
    if decision.startswith("stop"):
        status = "Failed" if last.status in ("Failed", "Completed") else "Stopped"
        return JobStatus(name, status, last.secondary, f"{where}; {decision}", last.failure_reason)
    if decision:
        return JobStatus(name, "InProgress", "Starting", f"{where}; {decision}")
    if failed:
        return JobStatus(name, "Failed", "Failed", f"{where} ended {last.status} / {last.secondary}; no decision on it: "
                         f"{failed}", failed)
    return JobStatus(name, "InProgress", "Deciding", f"{where} ended {last.status} / {last.secondary}; no decision "
                     "on it yet (the chain stack's supervisor takes it within minutes of the event; none after that: "
                     "is the chain stack deployed in this region? sm-dist infra deploy --template sm-dist-chain.yaml)")


__all__ = ["LinkInfo", "Run", "RunCost", "RunSummary", "find"]
