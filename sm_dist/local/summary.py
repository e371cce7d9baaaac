"""`LocalSummary`: what a local run showed, as one record — printed by `sm-dist fit --local`.

`str()` is the human summary, `to_dict()` the `--json` object. What local mode cannot know (a
script that prints no step, no model hash) is None and reads "unknown", never a made-up figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from sm_dist.contract.checkpoint_names import save_number
from sm_dist.local.cost import LocalCost

UNKNOWN = "unknown"
#: How a script that sm_dist did not write shows its steps (sm_dist.contract.log_lines, third_party_lines).
STEP_HINT = 'print "[sm_dist] step=N" on rank 0, or draw a tqdm bar'


@dataclass(frozen=True)
class StepsWentBack:
    """A host whose step counter went down without a `resumed` line (it restarted from a checkpoint)."""

    host: str
    from_step: int
    to_step: int

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "from": self.from_step, "to": self.to_step}


@dataclass(frozen=True, kw_only=True)
class LocalSummary:
    """One local job: the run, its chaos, its restarts and resumes, verification and cost."""

    job_name: str
    status: str
    """Completed, Failed or Stopped (as TrainingJobStatus)."""
    hosts: int
    processes_per_host: int | None
    wall_seconds: float
    cost: LocalCost
    steps: int | None = None
    """The last step the logs showed (None: the script prints none)."""
    restarts: int = 0
    job_restarts: int = 0
    in_job_restarts: int = 0
    resumed_from: tuple[int, ...] = ()
    """Steps resumed from: the runtime's `resumed` lines, else the steps of the checkpoints restored."""
    resumed_checkpoints: tuple[str, ...] = ()
    """The checkpoint each restore of the checkpoint folder gave the script (`[sm_dist] restored` lines)."""
    steps_went_back: tuple[StepsWentBack, ...] = ()
    model_sha256: str | None = None
    verified: bool | None = None
    verify_result: str | None = None
    verify_detail: str | None = None
    verify_cause: str | None = None
    """Why the run differs: "resume" or "not reproducible" (two uninterrupted runs differ); None: unknown."""
    verify_cause_detail: str | None = None
    verify_model_sha256: str | None = None
    chaos: tuple[str, ...] = ()
    chaos_fired: tuple[str, ...] = ()
    chaos_events: tuple[str, ...] = ()
    checkpoint_uri: str | None = None
    checkpoint_files: int = 0
    checkpoints_committed: tuple[int, ...] = ()
    failures: Mapping[str, str] = field(default_factory=dict)
    """Each failed host's `output/failure`."""
    error: str | None = None
    """The failing worker's own error line: type, message, the user's file:line, host and rank."""
    error_detail: Mapping[str, object] | None = None
    """That error's fields: type, message, file, line, function, code, host, rank, text, not_restarted."""
    host_outcomes: Mapping[str, str] = field(default_factory=dict)
    """Each host's own outcome when the job failed: "exit 1: <its error>", "stopped after algo-2 failed", "done"."""
    exit_codes: Mapping[str, int] = field(default_factory=dict)
    """Each host's exit code (the last attempt's)."""
    restart_causes: tuple[str, ...] = ()
    """Each in-job restart's cause, "restart N: HOST CAUSE" (the hosts' `[sm_dist] restart` lines)."""
    logs: str | None = None
    warnings: tuple[str, ...] = ()
    stopped_reason: str | None = None
    root: str | None = None
    estimate_usd: float | None = None
    s3_requests: int | None = None
    s3_faults_injected: int | None = None
    run_name: str | None = None
    """A chain's run (`--chain`): its links are `links`, one line each."""
    links: tuple[str, ...] = ()
    tensorboard: str | None = None
    """With tensorboard=True: the S3 prefix synced, how many files and how many uploads while the job ran,
    and the folder they were downloaded to."""
    warm_pool: str | None = None
    """"warm: ..." or "cold: ..." when the job keeps or found a warm pool (`sm_dist.local.warm_pool`)."""
    mlflow_uri: str | None = None
    """`mlflow=`: the tracking URI the job logged to (local mode's file store under the run's folder)."""

    @property
    def chaos_missed(self) -> tuple[str, ...]:
        """Chaos specs given that never fired: the run proved nothing about them."""
        return tuple(c for c in self.chaos if c not in self.chaos_fired)

    def to_dict(self) -> dict[str, object]:
        """The `--json` object (lists for tuples, the cost as a dict)."""
        out: dict[str, object] = {}
        for name, value in asdict(self).items():
            out[name] = list(value) if isinstance(value, tuple) else value
        out["steps_went_back"] = [b.to_dict() for b in self.steps_went_back]
        out["failures"] = dict(self.failures)
        out["error_detail"] = dict(self.error_detail) if self.error_detail is not None else None
        out["host_outcomes"] = dict(self.host_outcomes)
        out["exit_codes"] = dict(self.exit_codes)
        out["chaos_missed"] = list(self.chaos_missed)
        return out

    def __str__(self) -> str:
        return render_summary(self)

    def __repr__(self) -> str:
        return (f"LocalSummary({self.job_name!r}, {self.status}, steps={self.steps}, restarts={self.restarts}, "
                f"verified={self.verified})")

    def _repr_html_(self) -> str:
        """A notebook shows the printed summary, line for line, as a table."""
        from sm_dist.markup import text_table

        return text_table(render_summary(self))


def _money(value: float | None) -> str:
    return "unknown (instance type not in the catalog)" if value is None else f"${value:,.4f}"


def _verified(s: LocalSummary) -> str:
    result = s.verify_result
    detail = f" ({s.verify_detail})" if s.verify_detail and result != "identical" else ""
    if result == "identical":
        return "yes — identical to the uninterrupted run"
    if result == "differs" and s.verify_cause == "not reproducible":
        return (f"NO — the script is not reproducible: {s.verify_cause_detail}{detail}; no resume can match it. Seed "
                "every generator before building the model (torch.manual_seed, random, numpy), then compare again")
    if result == "differs" and s.verify_cause == "resume":
        return f"NO — the resume changed the result{detail}; {s.verify_cause_detail}"
    if result == "differs":
        return f"NO — differs from the uninterrupted run{detail}"
    if result == "cannot compare":
        return f"cannot compare{detail}"
    return "not checked (use --verify)"


def _resumed(s: LocalSummary) -> str:
    where = f"  ({s.resumed_checkpoints[-1]})" if s.resumed_checkpoints else ""
    if s.resumed_from:
        return ", ".join(f"step {n}" for n in s.resumed_from) + where
    if s.resumed_checkpoints:
        save = save_number(s.resumed_checkpoints[-1].rsplit("/", 1)[-1])
        if save is not None:  # Accelerate's checkpoint_N counts saves (from 0), not steps
            return f"save {save}, its step unknown (Accelerate numbers its saves from 0){where}"
        return f"{s.resumed_checkpoints[-1]}  (its step unknown: neither its name nor its metadata holds one)"
    if s.steps_went_back:
        return ", ".join(f"steps went back on {b.host}: {b.from_step} → {b.to_step}" for b in s.steps_went_back[:3])
    if s.steps is None and s.restarts:
        return UNKNOWN + " (no step lines in the logs)"
    return "-"


def _chaos(s: LocalSummary) -> list[str]:
    line = (f"  chaos           {', '.join(s.chaos) or 'none'}"
            + (f"  (fired: {', '.join(s.chaos_fired)})" if s.chaos_fired else ""))
    lines = [line, *(f"    {event}" for event in s.chaos_events)]
    if s.chaos_missed:
        lines.append(f"    NEVER FIRED: {', '.join(s.chaos_missed)} — the job ended first; this run proves nothing about it")
    return lines


#: The code line shown under the error is cut here.
_CODE_CHARS = 100
_INDENT = " " * 18


def _error_lines(d: Mapping[str, object]) -> list[str]:
    """The error, then where in the user's code (file:line, function, the line itself), then host and
    rank and why it was not restarted."""
    lines = [f"  error           {d.get('text')}"]
    if d.get("file"):
        code = str(d.get("code") or "")
        code = code if len(code) <= _CODE_CHARS else code[:_CODE_CHARS - 1] + "…"
        lines.append(f"{_INDENT}at {d['file']}:{d.get('line')}" + (f" in {d['function']}" if d.get("function") else "")
                     + (f": {code}" if code else ""))
    rank = f", rank {d['rank']}" if d.get("rank") is not None else ""
    lines.append(f"{_INDENT}on {d.get('host')}{rank}" + (f"; {d['not_restarted']}" if d.get("not_restarted") else ""))
    return lines


def _failure(s: LocalSummary) -> list[str]:
    if s.status == "Completed":
        return []
    if s.error_detail:
        lines = _error_lines(s.error_detail)
    elif s.error:
        lines = [f"  error           {s.error}"]
    else:
        lines = [f"  failure {host}: {text.strip().splitlines()[0] if text.strip() else '(empty)'}"
                 for host, text in sorted(s.failures.items())]
    for index, (host, text) in enumerate(s.host_outcomes.items()):
        lines.append(f"  {'hosts' if index == 0 else '':<16}{host} {text}")
    if s.logs:
        lines.append(f"  logs            {s.logs}")
    return lines


def _links(s: LocalSummary) -> list[str]:
    if not s.links:
        return []
    return [f"  links           {len(s.links)} jobs of run {s.run_name}, one checkpoint URI", *(f"    {line}" for line in s.links)]


def _mlflow(s: LocalSummary) -> list[str]:
    if s.mlflow_uri is None:
        return []
    if not s.mlflow_uri.startswith("file:"):
        return [f"  mlflow          {s.mlflow_uri}"]
    return [f"  mlflow          {s.mlflow_uri}  (see it: MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri "
            f"{s.mlflow_uri})"]


def render_summary(s: LocalSummary) -> str:
    """Lines describing a local job for a person."""
    cost = s.cost
    procs = s.processes_per_host or "?"
    steps = UNKNOWN + f" (no step lines in the logs: {STEP_HINT})" if s.steps is None else s.steps
    lines = [
        f"local job {s.job_name}: {s.status}  ({s.hosts} hosts × {procs} processes, {s.wall_seconds} s)",
        *_failure(s),
        *_links(s),
        *([f"  warm pool       {s.warm_pool}"] if s.warm_pool else []),
        f"  steps           {steps}",
        *_chaos(s),
        f"  restarts        {s.restarts}  (in-job torchrun: {s.in_job_restarts}, whole-job: {s.job_restarts})",
        *(f"    {cause}" for cause in s.restart_causes),
        f"  resumed from    {_resumed(s)}",
        f"  model sha256    {s.model_sha256 or UNKNOWN}",
        f"  verified        {_verified(s)}",
        f"  checkpoints     {s.checkpoint_uri or 'off'}",
        *([f"  tensorboard     {s.tensorboard}"] if s.tensorboard else []),
        *_mlflow(s),
        f"  cost here       ${cost.local_usd:.2f}",
        f"  on SageMaker    {_money(cost.sagemaker_usd)} for the same {s.wall_seconds} s on "
        f"{cost.instance_count} × {cost.instance_type}"
        + (f" (${cost.usd_per_hour}/h, prices of {cost.price_date})" if cost.usd_per_hour else ""),
    ]
    if s.estimate_usd is not None:
        lines.append(f"  plan estimate   {_money(s.estimate_usd)} for the job on SageMaker (sm-dist estimate-cost)")
    lines.extend(f"  WARNING         {warning}" for warning in s.warnings)
    return "\n".join(lines)


__all__ = ["LocalSummary", "StepsWentBack", "render_summary"]
