"""What a cloud job reports: its `JobStatus` read from DescribeTrainingJob, the lines and the notebook
view a wait shows, the time it spent training, and `CloudSummary`, the record `sm-dist fit --wait`
prints at the end. `sm_dist.cloud.job.Job` asks SageMaker; this module only reads its answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sm_dist.cloud.cost import JobCost
from sm_dist.cloud.logs import LOG_GROUP
from sm_dist.contract.job import JobStatus
from sm_dist.markup import text_table

if TYPE_CHECKING:
    from mypy_boto3_sagemaker.type_defs import DescribeTrainingJobResponseTypeDef


def training_phase_seconds(desc: DescribeTrainingJobResponseTypeDef) -> float | None:
    """Seconds the job spent in SecondaryStatus "Training" (every spell, for a spot job resumed after
    an interruption): its throughput's denominator, without start-up, data download and upload."""
    spells = [t for t in desc.get("SecondaryStatusTransitions") or [] if t.get("Status") == "Training"]
    total = sum((t["EndTime"] - t["StartTime"]).total_seconds() for t in spells if t.get("EndTime"))
    return total or None


def status_line(status: JobStatus) -> str:
    return f"{status.status} / {status.secondary}" + (f": {status.message}" if status.message else "")


def status_html(status: JobStatus, elapsed: float) -> str:
    """The notebook's view of a wait: the job, its status and secondary status, the latest message."""
    lines = [status.name, f"status      {status.status}", f"secondary   {status.secondary}",
             f"message     {status.message or '-'}", f"waited      {elapsed:.0f} s"]
    if status.failure_reason:
        lines.append(f"failure     {status.failure_reason}")
    return text_table("\n".join(lines))


def job_status(name: str, desc: DescribeTrainingJobResponseTypeDef) -> JobStatus:
    transitions = desc.get("SecondaryStatusTransitions") or []
    return JobStatus(
        name=name, status=desc.get("TrainingJobStatus", "?"), secondary=desc.get("SecondaryStatus", "?"),
        message=transitions[-1].get("StatusMessage", "") if transitions else "",
        failure_reason=desc.get("FailureReason"),
    )


@dataclass(frozen=True)
class CloudSummary:
    """What `sm-dist fit --wait` prints at the end of a cloud job (and `--json` as one object)."""

    status: JobStatus
    cost: JobCost
    checkpoint_uri: str | None
    region: str | None
    tensorboard_uri: str | None = None
    """TensorBoardOutputConfig.S3OutputPath (None: launched without tensorboard=True)."""

    @property
    def logs(self) -> str:
        """Where the hosts' logs are (CloudWatch, one stream per host)."""
        return f"CloudWatch {LOG_GROUP} {self.status.name}/algo-N (sm-dist logs {self.status.name})"

    def to_dict(self) -> dict[str, object]:
        return {"job_name": self.status.name, **self.status.to_dict(), "cost": self.cost.to_dict(),
                "checkpoint_uri": self.checkpoint_uri, "region": self.region, "logs": self.logs,
                "tensorboard_uri": self.tensorboard_uri}

    def __str__(self) -> str:
        s = self.status
        lines = [f"job {s.name}: {s.status} / {s.secondary}" + (f" — {s.message}" if s.message else "")]
        if s.failure_reason:
            lines.append(f"  failure         {s.failure_reason}")
        lines += [f"  checkpoints     {self.checkpoint_uri or 'none'}", f"  logs            {self.logs}",
                  *([f"  tensorboard     {self.tensorboard_uri} (sm-dist tensorboard {s.name})"]
                    if self.tensorboard_uri else []),
                  *(f"  {line}" for line in str(self.cost).splitlines())]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"CloudSummary({self.status.name!r}, {self.status.status} / {self.status.secondary}, usd={self.cost.usd})"

    def _repr_html_(self) -> str:
        """The printed summary, line for line, as a table."""
        return text_table(str(self))
