"""`LocalJob`: the handle of a finished local run, shaped like a cloud job's handle.

status / logs / checkpoints / cost answer the same questions as for a SageMaker job; summary()
is what `sm-dist fit --local` prints (and, with --json, one JSON object).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sm_dist.local.config import LocalJobConfig
from sm_dist.local.cost import LocalCost, local_cost
from sm_dist.local.progress import Progress
from sm_dist.local.runner import Outcome


@dataclass
class RunRecord:
    """Everything one run (the chaos run or the verify run) left behind."""

    outcome: Outcome
    progress: Progress
    in_job_restarts: int
    fired: list[str]
    root: Path
    checkpoint_keys: list[str] = field(default_factory=list)
    """Files at the checkpoint URI when the run ended (the local endpoint stops with the run)."""

    @property
    def seconds(self) -> float:
        return (self.outcome.ended or self.outcome.started) - self.outcome.started


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
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.config.job_name

    @property
    def status(self) -> str:
        """Completed, Failed or Stopped (SageMaker's TrainingJobStatus values)."""
        return self.run.outcome.status

    @property
    def root(self) -> Path:
        return self.run.root

    def model_dir(self, host: str = "algo-1") -> Path:
        """The model/ folder of a host (what SageMaker would tar into model.tar.gz)."""
        return self.run.root / "hosts" / host / "model"

    def logs(self, host: str | None = None) -> str:
        """All hosts' logs, each line prefixed with its host (or one host's, unprefixed)."""
        log_dir = self.run.root / "logs"
        if host is not None:
            return (log_dir / f"{host}.log").read_text(encoding="utf-8", errors="replace")
        lines = []
        for path in sorted(log_dir.glob("*.log")):
            lines += [f"[{path.stem}] {line}" for line in path.read_text(errors="replace").splitlines()]
        return "\n".join(lines)

    def checkpoints(self) -> list[str]:
        """Files at the checkpoint URI when the job ended (keys relative to the URI), sorted."""
        return list(self.run.checkpoint_keys)

    def cost(self) -> LocalCost:
        """0 $ here, and the same wall-clock time priced on the chosen SageMaker instances."""
        return local_cost(self.config.instance_type, self.config.instance_count, self.run.seconds)

    @property
    def verified(self) -> bool | None:
        """Whether the final model equals the chaos-free run's (None: not verified)."""
        if self.verify_run is None:
            return None
        sha = self.run.progress.model_sha256
        return sha is not None and sha == self.verify_run.progress.model_sha256

    @property
    def exit_code(self) -> int:
        """0 when the job completed (and, if verified, matched the chaos-free run), else 1."""
        return 0 if self.status == "Completed" and self.verified is not False else 1

    def __str__(self) -> str:
        from sm_dist.local.summary import render_summary

        return render_summary(self.summary())

    def summary(self) -> dict[str, Any]:
        """One JSON-able object: steps, restarts, resumed_from, model_sha256, verified, cost."""
        run, progress = self.run, self.run.progress
        return {
            "job_name": self.name,
            "status": self.status,
            "hosts": self.config.instance_count,
            "processes_per_host": self.processes_per_host,
            "steps": progress.final_step if progress.final_step is not None else progress.max_step,
            "restarts": run.outcome.job_restarts + run.in_job_restarts,
            "job_restarts": run.outcome.job_restarts,
            "in_job_restarts": run.in_job_restarts,
            "resumed_from": list(progress.resumed_from),
            "model_sha256": progress.model_sha256,
            "verified": self.verified,
            "verify_model_sha256": self.verify_run.progress.model_sha256 if self.verify_run else None,
            "chaos": list(self.chaos),
            "chaos_fired": run.fired,
            "checkpoint_uri": self.checkpoint_uri,
            "checkpoint_files": len(run.checkpoint_keys),
            "wall_seconds": round(run.seconds, 1),
            "failures": dict(run.outcome.failures),
            "stopped_reason": run.outcome.stopped_reason,
            "root": str(run.root),
            "cost": self.cost().to_dict(),
            "estimate_usd": self.estimate_usd,
            **self.extra,
        }
