"""`sm_dist.plan(...)`, `sm_dist.fit(...)` and `build_bundle(...)`: the facade over three backends.

    plan = sm_dist.plan("train.py", instance_type="ml.p4d.24xlarge", instance_count=2,
                        strategy="auto", params=7e9, checkpoint_s3_uri="s3://b/ckpt", spot=True,
                        max_cost_usd=500, role="arn:aws:iam::123456789012:role/sm")
    print(plan)                      # what will happen; nothing uploaded or created
    job = sm_dist.fit(..., wait=False)   # the same plan, then upload + CreateTrainingJob

Keyword arguments are the fields of `LaunchConfig` (unknown ones are refused with a
suggestion), typed as `LaunchSettings`, so an editor or mypy finds a misspelled one before it runs.
Making the plan is one step (`sm_dist.planning`); `fit` then hands it to a backend: the cloud one
(`sm_dist.cloud.run`: upload + create, returns a `Job`) or, with `local=True`, the local one
(`sm_dist.local.run`: the job on this machine, returns a `LocalJob`) or, with `slurm=...`, the Slurm
one (`sm_dist.slurm.run`: sbatch on a Slurm cluster, returns a `SlurmJob`). Every handle is a
`sm_dist.contract.job.JobHandle`. A local or Slurm plan needs no AWS setting. No backend imports
this module or another backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sm_dist.cloud import submit as cloud_backend
from sm_dist.cloud.job import Job
from sm_dist.cloud.run import Run
from sm_dist.errors import ConfigError
from sm_dist.local import api as local_backend
from sm_dist.local.job import LocalJob
from sm_dist.local.options import LocalOptions, LocalOptionsDict
from sm_dist.planning.build import launch_config, make_plan, new_job_name
from sm_dist.planning.code_plan import BASE_ENVIRONMENT, plan_code
from sm_dist.planning.config import LaunchConfig
from sm_dist.planning.plan import Plan
from sm_dist.slurm import submit as slurm_backend
from sm_dist.slurm.job import SlurmJob
from sm_dist.slurm.options import SlurmOptions

if TYPE_CHECKING:
    from boto3 import Session
    from typing_extensions import Unpack  # typing.Unpack is 3.11+; only type checkers read this

    from sm_dist.planning.settings import LaunchSettings

def plan(
    entry: str, *, local: bool = False, session: Session | None = None, **settings: Unpack[LaunchSettings],
) -> Plan:
    """Check the settings and return the frozen plan: request, bundle manifest, cost, warnings.

    Creates nothing; reads AWS (read-only) only to resolve what was not given (role, infra).
    `local=True`: a plan for local mode, made with no AWS call (region, role, bucket and
    instance type default to labels).
    """
    return make_plan(launch_config(entry, settings, local=local), session=session, local=local)


def fit(
    entry: str, *, local: bool = False, wait: bool = False, session: Session | None = None, validate_role: bool = True,
    local_options: LocalOptions | LocalOptionsDict | None = None,
    slurm: SlurmOptions | Mapping[str, object] | bool | None = None, **settings: Unpack[LaunchSettings],
) -> Job | Run | LocalJob | SlurmJob:
    """Plan, then run: upload the code and create the training job; returns its `Job` (`chain=True`: the
    chained run's `Run`, which holds its jobs).

    `wait=True` blocks until the job ends, printing status changes. `local=True` runs the job on this
    machine and returns the finished `LocalJob`, run as `local_options` say (`sm_dist.local.LocalOptions`,
    or a dict of its fields). `slurm=True` (or `sm_dist.slurm.SlurmOptions`, or a dict of its fields) submits
    the job to the Slurm cluster `sbatch` reaches and returns its `SlurmJob` (finished, unless
    `SlurmOptions(wait=False)`). Every handle implements `sm_dist.contract.job.JobHandle`; `isinstance(job,
    sm_dist.LocalJob)` tells a type checker which one it is. One signature, not an overload per `local`,
    so that a misspelled keyword is one short line in a type checker's report. The plan without the run:
    `sm_dist.plan(...)`. `validate_role=False` skips the SDK's IAM permission simulation (also skipped
    when the environment has SAGEMAKER_VALIDATE_ROLE=false).
    """
    if "dry_run" in settings:
        raise ConfigError("dry_run", settings["dry_run"], "sm_dist.plan(...) is the dry run: it returns the plan "  # type: ignore[typeddict-item]
                          "and creates nothing (print(plan) shows it)")
    if local_options and not local:
        given = sorted(local_options) if isinstance(local_options, Mapping) else type(local_options).__name__
        raise ConfigError("local_options", given, "only with local=True")
    if slurm is not None and slurm is not False:
        if local or local_options:
            raise ConfigError("slurm", True, "runs on a Slurm cluster: leave out local=True and local_options")
        options = SlurmOptions.coerce(slurm)
        # a plan made with no AWS call, as local mode's: a Slurm job needs no account
        instance_type = settings.get("instance_type")
        return slurm_backend.run(plan(entry, local=True, **settings), options, gpus=slurm_gpus(instance_type, options),
                                 instance_type=instance_type)
    config = launch_config(entry, settings, local=local)
    if local:  # what needs no plan is refused before it is built (it may take seconds)
        local_backend.check_options(local_options, chain=config.chain, spot=config.spot)
    the_plan = make_plan(config, session=session, local=local)
    if local:
        return local_backend.run(the_plan, local_options)
    return cloud_backend.run(the_plan, session=session, validate_role=validate_role, wait=wait)


def slurm_gpus(instance_type: object, options: SlurmOptions) -> int:
    """sbatch --gpus-per-node: the option, else the GPUs of an instance type the user gave (the catalog), else
    none (a plan's default instance type is a label, not a request for GPUs)."""
    if options.gpus_per_node is not None:
        return options.gpus_per_node
    if not isinstance(instance_type, str):
        return 0
    from sm_dist.catalog import get_instance

    return get_instance(instance_type).gpus


def build_bundle(plan_or_config: Plan | LaunchConfig, dest_dir: str | Path) -> Path:
    """Write the job's code channel into `dest_dir` (new or empty) without uploading anything.

    From a Plan: exactly the planned bundle. From a LaunchConfig: the same files, planned
    without AWS (prices of the config's region or the catalog's).
    """
    from sm_dist.planning.bundle import write_bundle

    if isinstance(plan_or_config, Plan):
        return write_bundle(plan_or_config.bundle, dest_dir)
    if not isinstance(plan_or_config, LaunchConfig):
        raise ConfigError("plan_or_config", type(plan_or_config).__name__, "expected a Plan or a LaunchConfig")
    from sm_dist.catalog import CATALOG_REGION
    from sm_dist.planning import preflight
    from sm_dist.planning.bundle import resolve_entry
    from sm_dist.planning.request import job_image

    config = plan_or_config
    region = config.region or CATALOG_REGION
    entry = resolve_entry(config.entry, Path(config.source_dir).resolve(), config.entry_is_function)
    preflight.check_texts(config.hyperparameters, config.environment,
                          len(BASE_ENVIRONMENT) + config.network_isolation, config.args)
    hw, inst = preflight.check_instance(config.instance_type, region)
    code = plan_code(config, region, config.job_name or new_job_name(config.base_job_name), entry, inst,
                     job_image(config, region, hw)[0])
    return write_bundle(code.bundle, dest_dir)


__all__ = ["build_bundle", "fit", "plan"]
