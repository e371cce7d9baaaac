"""The human-readable summary `sm-dist fit --local` prints after a run.

What local mode cannot know (a script that prints no step, no model hash) reads "unknown",
never a made-up figure.
"""

from __future__ import annotations

from typing import Any

UNKNOWN = "unknown"


def _money(value: float | None) -> str:
    return "unknown (instance type not in the catalog)" if value is None else f"${value:,.4f}"


def _verified(s: dict[str, Any]) -> str:
    result = s.get("verify_result")
    detail = f" ({s['verify_detail']})" if s.get("verify_detail") and result != "identical" else ""
    if result == "identical":
        return "yes — identical to the uninterrupted run"
    if result == "differs":
        return f"NO — differs from the uninterrupted run{detail}"
    if result == "cannot compare":
        return f"cannot compare{detail}"
    return "not checked (use --verify)"


def _resumed(s: dict[str, Any]) -> str:
    if s["resumed_from"]:
        return ", ".join(f"step {n}" for n in s["resumed_from"])
    back = s.get("steps_went_back") or []
    if back:
        return ", ".join(f"steps went back on {b['host']}: {b['from']} → {b['to']}" for b in back[:3])
    if s["steps"] is None and s["restarts"]:
        return UNKNOWN + " (no step lines in the logs)"
    return "-"


def _chaos(s: dict[str, Any]) -> list[str]:
    missed = s.get("chaos_missed", [c for c in s["chaos"] if c not in s["chaos_fired"]])
    line = (f"  chaos           {', '.join(s['chaos']) or 'none'}"
            + (f"  (fired: {', '.join(s['chaos_fired'])})" if s["chaos_fired"] else ""))
    lines = [line, *(f"    {event}" for event in s.get("chaos_events", []))]
    if missed:
        lines.append(f"    NEVER FIRED: {', '.join(missed)} — the job ended first; this run proves nothing about it")
    return lines


def _failure(s: dict[str, Any]) -> list[str]:
    if s["status"] == "Completed":
        return []
    if s.get("error"):
        lines = [f"  error           {s['error']}"]
    else:
        lines = [f"  failure {host}: {text.strip().splitlines()[-1] if text.strip() else '(empty)'}"
                 for host, text in sorted(s["failures"].items())]
    if s.get("logs"):
        lines.append(f"  logs            {s['logs']}")
    return lines


def render_summary(s: dict[str, Any]) -> str:
    """Lines describing a LocalJob.summary() for a person."""
    cost = s["cost"]
    procs = s["processes_per_host"] or "?"
    steps = UNKNOWN + " (no step lines in the logs)" if s["steps"] is None else s["steps"]
    lines = [
        f"local job {s['job_name']}: {s['status']}  ({s['hosts']} hosts × {procs} processes, {s['wall_seconds']} s)",
        *_failure(s),
        f"  steps           {steps}",
        *_chaos(s),
        f"  restarts        {s['restarts']}  (in-job torchrun: {s['in_job_restarts']}, whole-job: {s['job_restarts']})",
        f"  resumed from    {_resumed(s)}",
        f"  model sha256    {s['model_sha256'] or UNKNOWN}",
        f"  verified        {_verified(s)}",
        f"  checkpoints     {s['checkpoint_uri'] or 'off'}",
        f"  cost here       ${cost['local_usd']:.2f}",
        f"  on SageMaker    {_money(cost['sagemaker_usd'])} for the same {s['wall_seconds']} s on "
        f"{cost['instance_count']} × {cost['instance_type']}"
        + (f" (${cost['usd_per_hour']}/h, prices of {cost['price_date']})" if cost["usd_per_hour"] else ""),
    ]
    if s.get("estimate_usd") is not None:
        lines.append(f"  plan estimate   {_money(s['estimate_usd'])} for the job on SageMaker (sm-dist estimate-cost)")
    lines.extend(f"  WARNING         {warning}" for warning in s.get("warnings", []))
    return "\n".join(lines)
