"""The human-readable summary `sm-dist fit --local` prints after a run."""

from __future__ import annotations

from typing import Any


def _money(value: float | None) -> str:
    return "unknown (instance type not in the catalog)" if value is None else f"${value:,.4f}"


def render_summary(s: dict[str, Any]) -> str:
    """Lines describing a LocalJob.summary() for a person."""
    verified = {True: "yes — identical to the uninterrupted run", False: "NO — differs from the uninterrupted run",
                None: "not checked (use --verify)"}[s["verified"]]
    cost = s["cost"]
    procs = s["processes_per_host"] or "?"
    lines = [
        f"local job {s['job_name']}: {s['status']}  ({s['hosts']} hosts × {procs} processes, {s['wall_seconds']} s)",
        f"  steps           {s['steps']}",
        f"  chaos           {', '.join(s['chaos']) or 'none'}"
        + (f"  (fired: {', '.join(s['chaos_fired'])})" if s["chaos_fired"] else "")
        + (f"  (never fired: {', '.join(missed)})" if (missed := [c for c in s["chaos"] if c not in s["chaos_fired"]])
           else ""),
        *(f"    {event}" for event in s.get("chaos_events", [])),
        f"  restarts        {s['restarts']}  (in-job torchrun: {s['in_job_restarts']}, whole-job: {s['job_restarts']})",
        f"  resumed from    {', '.join(f'step {n}' for n in s['resumed_from']) or '-'}",
        f"  model sha256    {s['model_sha256'] or '-'}",
        f"  verified        {verified}",
        f"  checkpoints     {s['checkpoint_uri'] or 'off'}",
        f"  cost here       ${cost['local_usd']:.2f}",
        f"  on SageMaker    {_money(cost['sagemaker_usd'])} for the same {s['wall_seconds']} s on "
        f"{cost['instance_count']} × {cost['instance_type']}"
        + (f" (${cost['usd_per_hour']}/h, prices of {cost['price_date']})" if cost["usd_per_hour"] else ""),
    ]
    if s.get("estimate_usd") is not None:
        lines.append(f"  plan estimate   {_money(s['estimate_usd'])} for the job on SageMaker (sm-dist estimate-cost)")
    for host, text in sorted(s["failures"].items()):
        lines.append(f"  failure {host}: {text.strip().splitlines()[-1] if text.strip() else '(empty)'}")
    return "\n".join(lines)
