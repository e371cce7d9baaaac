"""Capacity before upload: the account's SageMaker training quotas — the plan's instance type's and
the account-wide one — less what its running jobs use; or, for a job on a training plan, the plan's
reserved capacity.

Many GPU types start with a training quota of 0 (spot quotas are separate), and CreateTrainingJob
then fails with ResourceLimitExceeded after the code and data were uploaded. sm_dist reads the quotas
first and refuses a job that cannot start. It refuses only on a definite answer: what it cannot read
(no servicequotas permission, no quota listed for the type or region) is a warning, and
CreateTrainingJob stays the final judge (docs/PLATFORM.md §1.10).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from boto3.session import Session
    from mypy_boto3_sagemaker import SageMakerClient

    from sm_dist.planning.plan import Plan

_log = logging.getLogger(__name__)

#: A boto3 Service Quotas client (sm_dist installs no type stubs for that service).
ServiceQuotasClient = Any

#: Service Quotas' service code for SageMaker.
SERVICE_CODE = "sagemaker"
#: Where the user asks for more (docs/PLATFORM.md §1.10): the quota's page in the job's region.
CONSOLE_URL = "https://{region}.console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas/{code}"
#: Pages of 100 default quotas read while looking for the one named (SageMaker lists one per
#: instance type and use); past this the check is skipped with a warning.
MAX_QUOTA_PAGES = 50
#: Running jobs described while counting the instances in use; past this the count is partial.
MAX_JOBS_DESCRIBED = 100


@dataclass(frozen=True)
class Quota:
    """One applied SageMaker quota: its name, code and value (instances)."""

    name: str
    code: str
    value: float


@dataclass(frozen=True)
class Usage:
    """Instances the account's jobs of one kind (spot or on-demand) hold now."""

    of_type: int
    """Of the plan's instance type."""
    jobs_of_type: int
    total: int
    """Of every type (the account-wide quota's count)."""
    jobs: int
    counted: bool = True
    """False: the running jobs could not be listed (or not all): the counts may be too low."""


def quota_name(instance_type: str, spot: bool) -> str:
    """The quota a training job of this type counts against: "ml.p4d.24xlarge for spot training job usage"."""
    return f"{instance_type} for {'spot ' if spot else ''}training job usage"


def total_quota_name(spot: bool) -> str:
    """The account-wide quota every training job's instances count against, of any type."""
    return f"Number of instances across all {'spot ' if spot else ''}training jobs"


def check_capacity(plan: Plan, session: Session, reusing: str | None = None) -> None:
    """Refuse a plan that cannot start: too few instances in the quotas (less those in use) of any type the
    request asks for, or a training plan that does not hold this job; and a chain whose later jobs would ask
    for a type (a spot run's fallback, or on demand after `on_demand_after`) whose quota is below the job's
    count. A training plan skips the quotas of its type: it reserves capacity. `reusing`: the job whose warm
    pool this one moves onto; its instances are not counted in use."""
    from sm_dist.cloud.training_plans import check_training_plan
    from sm_dist.planning.fallbacks import training_plan

    request = plan.request
    resources = request["ResourceConfig"]
    sagemaker = session.client("sagemaker", region_name=plan.region)
    arn = training_plan(resources)
    if arn:
        check_training_plan(sagemaker, arn, plan.instance_type, plan.instance_count, plan.region)
    quotas = session.client("service-quotas", region_name=plan.region)
    spot = bool(request.get("EnableManagedSpotTraining"))
    # SageMaker checks the quota of every type in InstancePreferences, and refuses the job if any falls short
    # (docs/PLATFORM.md §1.12): each type not on the plan, the first being the plan's own
    preferred = [p["InstanceType"] for p in resources.get("InstancePreferences") or () if not p.get("TrainingPlanArns")]
    asked = preferred if resources.get("InstancePreferences") else [] if arn else [plan.instance_type]
    for kind in asked:
        check_training_quota(quotas, sagemaker, kind, plan.instance_count, spot=spot, region=plan.region,
                             reusing=reusing, fallback=kind != plan.instance_type)
    for kind, later_spot, why in later_types(plan):
        check_later_quota(quotas, kind, plan.instance_count, spot=later_spot, region=plan.region, why=why)
    if resources.get("KeepAlivePeriodInSeconds"):
        warn_warm_pool_quota(quotas, plan.instance_type, plan.instance_count, plan.region)


def later_types(plan: Plan) -> list[tuple[str, bool, tuple[str, object]]]:
    """(type, spot, (field, value)) a chain's later jobs may ask for that its first does not: a spot run's
    fallback types, and with `on_demand_after` every type on demand (contract.chain's decision)."""
    from sm_dist.planning.fallbacks import training_plan

    chain = plan.chain
    if chain is None or training_plan(plan.request["ResourceConfig"]):
        return []
    types = chain.instance_types() or (plan.instance_type,)
    spot = bool(plan.request.get("EnableManagedSpotTraining"))
    later: list[tuple[str, bool, tuple[str, object]]] = []
    if spot:
        later += [(kind, True, ("fallback_instance_types", kind)) for kind in types[1:]]
        if chain.on_demand_after is not None:
            later += [(kind, False, ("on_demand_after", chain.on_demand_after)) for kind in types]
    return later


def check_later_quota(quotas: ServiceQuotasClient, instance_type: str, count: int, *, spot: bool, region: str,
                      why: tuple[str, object]) -> None:
    """A type a chain's later job may ask for: its quota (of that kind, spot or on demand) must hold `count`
    instances at all; what other jobs will hold by then is not known, so not counted."""
    for quota in read_quotas(quotas, (quota_name(instance_type, spot),), region):
        if quota.value < count:
            field, value = why
            kind = "spot" if spot else "on-demand"
            leave = ("leave it out of fallback_instance_types" if field == "fallback_instance_types"
                     else "leave on_demand_after unset (the run stays on spot)")
            raise ConfigError(field, value, (
                f"a later job of this run may ask for {count} × {instance_type} {kind}; the account's quota "
                f"\"{quota.name}\" in {region} is {quota.value:g}, so SageMaker would refuse it: request at least "
                f"{count} at {CONSOLE_URL.format(region=region, code=quota.code)}, or {leave}"))


def warn_warm_pool_quota(quotas: ServiceQuotasClient, instance_type: str, count: int, region: str) -> Quota | None:
    """A job keeping a warm pool: warn when the account's warm-pool quota for its type (0 by default) is
    below its count, so that no pool will be kept (the job still runs; docs/PLATFORM.md §1.13). The
    quota is found by its name holding the type and "warm pool" (its exact name is not documented); one
    that is not listed or cannot be read is left unsaid."""
    from botocore.exceptions import BotoCoreError, ClientError

    query: dict[str, Any] = {"ServiceCode": SERVICE_CODE, "MaxResults": 100}
    found: list[Any] = []
    try:
        for _ in range(MAX_QUOTA_PAGES):
            page = quotas.list_aws_default_service_quotas(**query)
            found = [q for q in page.get("Quotas", []) if instance_type in str(q.get("QuotaName", "")).split()
                     and "warm pool" in str(q.get("QuotaName", "")).lower()]
            if found or not page.get("NextToken"):
                break
            query["NextToken"] = page["NextToken"]
    except (ClientError, BotoCoreError):
        return None
    quota = _applied(quotas, found[0], region) if found else None
    if quota is not None and quota.value < count:
        _log.warning("warm pool: the account's quota \"%s\" in %s is %g, this job has %d instances: it runs, but "
                     "SageMaker keeps no pool after it; request %d at %s", quota.name, region, quota.value, count, count,
                     CONSOLE_URL.format(region=region, code=quota.code))
    return quota


def check_training_quota(quotas: ServiceQuotasClient, sagemaker: SageMakerClient, instance_type: str,
                         count: int, *, spot: bool, region: str, reusing: str | None = None,
                         fallback: bool = False) -> None:
    """The quota of this type and the account-wide one, less the instances running jobs hold, must
    each cover `count` (`fallback`: a type of InstancePreferences other than instance_type)."""
    per_type, total = quota_name(instance_type, spot), total_quota_name(spot)
    found = read_quotas(quotas, (per_type, total), region)
    if not found:
        return
    used = instances_in_use(sagemaker, instance_type, spot, exclude=reusing)
    for quota in found:
        held, jobs = (used.of_type, used.jobs_of_type) if quota.name == per_type else (used.total, used.jobs)
        if count > quota.value - held:
            refusal = _refusal(quota, count, instance_type, held, jobs, used.counted, spot, region)
            if fallback:
                raise ConfigError("fallback_instance_types", instance_type, (
                    f"SageMaker checks the quota of every type the job lists (InstancePreferences) and refuses the "
                    f"job if any falls short: {refusal.fix}; or leave it out of fallback_instance_types"))
            raise refusal


def _refusal(quota: Quota, count: int, instance_type: str, held: int, jobs: int, counted: bool, spot: bool,
             region: str) -> ConfigError:
    free = max(int(quota.value) - held, 0)
    in_use = (f"{held} in use by {jobs} running job(s)" if counted
              else f"at least {held} in use (the running jobs could not all be counted)")
    other = "the on-demand quotas are separate: run without spot, or " if spot else ""
    return ConfigError("instance_count", count, (
        f"this job needs {count} × {instance_type}; the account's quota \"{quota.name}\" in {region} is "
        f"{quota.value:g}, {in_use}, so {free} free: request at least {count + held} at "
        f"{CONSOLE_URL.format(region=region, code=quota.code)}, {other}wait for running jobs to end, or pass "
        "training_plan_arn= (--training-plan-arn) for reserved capacity"))


def read_quotas(quotas: ServiceQuotasClient, names: tuple[str, ...], region: str) -> list[Quota]:
    """The applied values of the quotas `names` that can be read; a warning for each that cannot.

    Their codes come from the default quotas (ListAWSDefaultServiceQuotas lists every quota); each
    value from GetServiceQuota, which answers NoSuchResourceException for a quota never changed,
    whose default then applies (docs/PLATFORM.md §1.10)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        defaults = _find_defaults(quotas, names)
    except (ClientError, BotoCoreError) as exc:
        if _code(exc) != "NoSuchResourceException":  # that one: no SageMaker quotas listed in this region
            _warn_unread(names, region, exc)
            return []
        defaults = {}
    missing = [n for n in names if n not in defaults]
    if missing:
        _log.warning("quota check skipped for %s: Service Quotas lists no such quota in %s (a type or region with "
                     "none listed); CreateTrainingJob decides", ", ".join(f'"{n}"' for n in missing), region)
    found = [_applied(quotas, defaults[n], region) for n in names if n in defaults]
    return [q for q in found if q is not None]


def _applied(quotas: ServiceQuotasClient, default: Any, region: str) -> Quota | None:
    """The quota's applied value (GetServiceQuota), its default when it was never changed; None (a warning)."""
    from botocore.exceptions import BotoCoreError, ClientError

    name = default["QuotaName"]
    try:
        applied: Any = quotas.get_service_quota(ServiceCode=SERVICE_CODE, QuotaCode=default["QuotaCode"])["Quota"]
    except ClientError as exc:
        if _code(exc) != "NoSuchResourceException":
            _warn_unread((name,), region, exc)
            return None
        applied = default  # no applied value: the default is the account's
    except BotoCoreError as exc:
        _warn_unread((name,), region, exc)
        return None
    if applied.get("ErrorReason") or "Value" not in applied:
        _log.warning("quota check skipped: \"%s\" in %s has no value (%s)", name, region, applied.get("ErrorReason"))
        return None
    return Quota(name, default["QuotaCode"], float(applied["Value"]))


def _find_defaults(quotas: ServiceQuotasClient, names: tuple[str, ...]) -> dict[str, Any]:
    """The default quotas named `names` (code and default value) by name; at most MAX_QUOTA_PAGES pages."""
    found: dict[str, Any] = {}
    query: dict[str, Any] = {"ServiceCode": SERVICE_CODE, "MaxResults": 100}
    for _ in range(MAX_QUOTA_PAGES):
        page = quotas.list_aws_default_service_quotas(**query)
        found.update((q["QuotaName"], q) for q in page.get("Quotas", []) if q.get("QuotaName") in names)
        if len(found) == len(names) or not page.get("NextToken"):
            return found
        query["NextToken"] = page["NextToken"]
    _log.warning("quota check: stopped after %d pages of SageMaker quotas", MAX_QUOTA_PAGES)
    return found


def instances_in_use(sagemaker: SageMakerClient, instance_type: str, spot: bool, exclude: str | None = None) -> Usage:
    """Instances held by the account's running jobs of the same kind (spot or not) and by warm pools,
    which count against the training quotas (docs/PLATFORM.md §1.10): of `instance_type`, and of
    every type. Jobs on a training plan use its reserved capacity and are not counted."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        names = [*_job_names(sagemaker, StatusEquals="InProgress"),
                 *_job_names(sagemaker, WarmPoolStatusEquals="Available")]
    except (ClientError, BotoCoreError) as exc:
        _log.warning("quota check: could not list running training jobs (%s); counting none", _reason(exc))
        return Usage(0, 0, 0, 0, counted=False)
    unique = [n for n in dict.fromkeys(names) if n != exclude]  # `exclude`: a pool the new job moves onto
    of_type = jobs_of_type = total = jobs = 0
    for name in unique[:MAX_JOBS_DESCRIBED]:
        try:
            job: Any = sagemaker.describe_training_job(TrainingJobName=name)
        except ClientError:  # ended and deleted since it was listed
            continue
        held, held_of_type = _held(job, None, spot), _held(job, instance_type, spot)
        total, jobs = total + held, jobs + (held > 0)
        of_type, jobs_of_type = of_type + held_of_type, jobs_of_type + (held_of_type > 0)
    return Usage(of_type, jobs_of_type, total, jobs, counted=len(unique) <= MAX_JOBS_DESCRIBED)


def _job_names(sagemaker: SageMakerClient, **where: str) -> list[str]:
    """Names of the jobs ListTrainingJobs returns for `where`, every page (NextToken), until
    more than MAX_JOBS_DESCRIBED."""
    names: list[str] = []
    query: dict[str, Any] = {"MaxResults": 100, **where}
    while len(names) <= MAX_JOBS_DESCRIBED:
        page = sagemaker.list_training_jobs(**query)
        names += [j["TrainingJobName"] for j in page.get("TrainingJobSummaries", [])]
        if not page.get("NextToken"):
            break
        query["NextToken"] = page["NextToken"]
    return names


def _held(job: Any, instance_type: str | None, spot: bool) -> int:
    """Instances of `instance_type` (None: of any type) a described job holds against the quotas of
    this kind, else 0."""
    running = job.get("TrainingJobStatus") == "InProgress" or job.get("WarmPoolStatus", {}).get("Status") == "Available"
    config = job.get("ResourceConfig", {})
    if not running or bool(job.get("EnableManagedSpotTraining")) != spot or config.get("TrainingPlanArn"):
        return 0
    groups = [(config.get("InstanceType") or config.get("SelectedInstanceType"),  # Selected*: given preferred types
               config.get("InstanceCount") or config.get("SelectedInstanceCount", 0)),
              *((g.get("InstanceType"), g.get("InstanceCount", 0)) for g in config.get("InstanceGroups", []))]
    return sum(n for kind, n in groups if kind and (instance_type is None or kind == instance_type))


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def _reason(exc: Exception) -> str:
    return _code(exc) or type(exc).__name__


def _warn_unread(names: tuple[str, ...], region: str, exc: Exception) -> None:
    hint = (" (allow servicequotas:ListAWSDefaultServiceQuotas and servicequotas:GetServiceQuota to check first)"
            if _code(exc) == "AccessDeniedException" else "")
    _log.warning("quota check skipped: could not read %s in %s (%s); CreateTrainingJob may still refuse the job "
                 "after the upload%s", ", ".join(f'"{n}"' for n in names), region, _reason(exc), hint)


__all__ = ["CONSOLE_URL", "Quota", "Usage", "check_capacity", "check_later_quota", "check_training_quota",
           "instances_in_use", "later_types", "quota_name", "read_quotas", "total_quota_name", "warn_warm_pool_quota"]
