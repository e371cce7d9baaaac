"""`sm_dist.plan(...)`, `sm_dist.fit(...)` and `build_bundle(...)`: the launch entry points.

    plan = sm_dist.plan("train.py", instance_type="ml.p4d.24xlarge", instance_count=2,
                        strategy="auto", params=7e9, checkpoint_s3_uri="s3://b/ckpt", spot=True,
                        max_cost_usd=500, role="arn:aws:iam::123456789012:role/sm")
    print(plan)                      # what will happen; nothing uploaded or created
    job = sm_dist.fit(..., wait=False)   # the same plan, then upload + CreateTrainingJob

Keyword arguments are the fields of `LaunchConfig` (unknown ones are refused with a
suggestion). `fit(dry_run=True)` returns the plan after printing it; `fit(local=True)` runs the
plan on this machine through `sm_dist.local.run_local`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sm_dist.errors import ConfigError
from sm_dist.launch.config import LaunchConfig
from sm_dist.launch.plan import Plan, make_plan, new_job_name, plan_code

_log = logging.getLogger(__name__)


def _config(entry: str, settings: dict[str, Any]) -> LaunchConfig:
    return LaunchConfig.from_mapping({"entry": entry, **settings})


def plan(entry: str, *, session: Any = None, **settings: Any) -> Plan:
    """Check the settings and return the frozen plan: request, bundle manifest, cost, warnings.

    Creates nothing; reads AWS (read-only) only to resolve what was not given (role, infra).
    """
    return make_plan(_config(entry, settings), session=session)


def fit(
    entry: str, *, wait: bool = False, dry_run: bool = False, local: bool = False, session: Any = None,
    validate_role: bool = True, local_options: dict[str, Any] | None = None, **settings: Any,
) -> Any:
    """Plan, then launch: upload the code and create the training job; returns a `Job`.

    `wait=True` blocks until the job ends, printing status changes. `dry_run=True` prints the
    plan and returns it (no upload, no create). `local=True` runs the job on this machine.
    `validate_role=False` skips the SDK's IAM permission simulation (also skipped when the
    environment has SAGEMAKER_VALIDATE_ROLE=false).
    """
    if local:  # a local run needs no AWS account: placeholders label the plan (local mode's rule)
        from sm_dist.local.cli import local_settings

        settings = local_settings(settings)
    the_plan = plan(entry, session=session, **settings)
    if dry_run:
        print(the_plan)
        return the_plan
    if local:
        return _run_local(the_plan, local_options or {})
    from sm_dist.launch.job import Job
    from sm_dist.launch.submit import submit

    if session is None:
        import boto3

        session = boto3.Session(region_name=the_plan.region)
    for warning in the_plan.warnings:
        _log.warning("%s", warning)
    submit(the_plan, session, validate_role=validate_role)
    job = Job(the_plan.job_name, session=session, region=the_plan.region, plan=the_plan)
    if wait:
        job.wait()
    return job


def _run_local(the_plan: Plan, options: dict[str, Any]) -> Any:
    try:
        from sm_dist.local import run_local
    except ImportError:
        raise ConfigError("local", True, "local mode (sm_dist.local.run_local) is not available in this install") from None
    return run_local(the_plan, **options)


def build_bundle(plan_or_config: Plan | LaunchConfig, dest_dir: str | Path) -> Path:
    """Write the job's code channel into `dest_dir` (new or empty) without uploading anything.

    From a Plan: exactly the planned bundle. From a LaunchConfig: the same files, planned
    without AWS (prices of the config's region or the catalog's).
    """
    from sm_dist.launch.bundle import write_bundle

    if isinstance(plan_or_config, Plan):
        return write_bundle(plan_or_config.bundle, dest_dir)
    if not isinstance(plan_or_config, LaunchConfig):
        raise ConfigError("plan_or_config", type(plan_or_config).__name__, "expected a Plan or a LaunchConfig")
    from sm_dist.catalog import CATALOG_REGION

    config = plan_or_config
    code = plan_code(config, config.region or CATALOG_REGION, config.job_name or new_job_name(config.base_job_name))
    return write_bundle(code.bundle, dest_dir)


__all__ = ["plan", "fit", "build_bundle"]
