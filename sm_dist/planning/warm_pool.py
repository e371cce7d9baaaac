"""Whether a job starts on the warm pool an earlier job left, and if not, why: a pure comparison.

SageMaker moves an `Available` warm pool to the next job only when these values are identical in both
(the developer guide's "Matching training jobs", docs/PLATFORM.md §1.13): RoleArn; ResourceConfig's
InstanceCount, InstanceType, VolumeKmsKeyId and VolumeSizeInGB; VpcConfig's SecurityGroupIds and Subnets;
EnableInterContainerTrafficEncryption; EnableNetworkIsolation. `pool_differences` compares the plan's
CreateTrainingJob request with the earlier job's DescribeTrainingJob answer on exactly those, and names
each that differs by the setting the user gives. The cloud backend finds the earlier job
(`sm_dist.cloud.warm_pool`); the plan report shows the answer (`PoolReuse.line`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: (the setting, its path in the request and in DescribeTrainingJob's answer), the documented matching values.
MATCH_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("role", ("RoleArn",)),
    ("instance_type", ("ResourceConfig", "InstanceType")),
    ("instance_count", ("ResourceConfig", "InstanceCount")),
    ("volume_size_gb", ("ResourceConfig", "VolumeSizeInGB")),
    ("volume_kms_key", ("ResourceConfig", "VolumeKmsKeyId")),
    ("subnets", ("VpcConfig", "Subnets")),
    ("security_group_ids", ("VpcConfig", "SecurityGroupIds")),
    ("network_isolation", ("EnableNetworkIsolation",)),
    ("encrypt_inter_container_traffic", ("EnableInterContainerTrafficEncryption",)),
)
_FLAGS = frozenset({"EnableNetworkIsolation", "EnableInterContainerTrafficEncryption"})


def _value(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = document
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    if node is None and path == ("ResourceConfig", "InstanceType"):  # a job given preferred types
        resources = document.get("ResourceConfig") or {}
        preferred = [p.get("InstanceType") for p in resources.get("InstancePreferences") or []]
        node = resources.get("SelectedInstanceType") or (  # the one it ran on; a plan's: SageMaker's choice later
            "one of " + " then ".join(preferred) if preferred else None)
    if path[-1] in _FLAGS:
        return bool(node)
    if isinstance(node, list):  # the order of subnets or groups is not a difference (sm_dist's assumption)
        return sorted(node)
    return node


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return ",".join(value) or "none"
    return str(value)


def pool_differences(request: Mapping[str, Any], previous: Mapping[str, Any]) -> tuple[str, ...]:
    """What keeps the job `request` would create off the warm pool of the job described by `previous`
    (a DescribeTrainingJob answer): "instance_count 4 here, 2 in the pool", one per differing value;
    empty when the pool can move to it."""
    found = []
    if request.get("EnableManagedSpotTraining"):
        found.append("spot: a warm pool serves no spot job")
    for setting, path in MATCH_FIELDS:
        mine, theirs = _value(request, path), _value(previous, path)
        if mine != theirs:
            found.append(f"{setting} {_shown(mine)} here, {_shown(theirs)} in the pool")
    return tuple(found)


@dataclass(frozen=True)
class PoolReuse:
    """The answer for one plan: the earlier job whose pool is Available, and what differs from it."""

    job_name: str
    differences: tuple[str, ...] = ()
    retained_s: int | None = None
    """WarmPoolStatus.ResourceRetainedBillableTimeInSeconds of that pool so far (billed per instance)."""

    @property
    def reusable(self) -> bool:
        return not self.differences

    def line(self) -> str:
        """The plan report's answer."""
        if self.reusable:
            return f"starts on the warm pool of {self.job_name} (Available; every matching value is the same)"
        return (f"the warm pool of {self.job_name} is not reused: {'; '.join(self.differences)}. "
                f"Match it, or end it: sm-dist release {self.job_name}")

    def to_dict(self) -> dict[str, Any]:
        return {"job_name": self.job_name, "reusable": self.reusable, "differences": list(self.differences),
                "retained_s": self.retained_s}


def keep_alive_line(request: Mapping[str, Any], job_name: str, usd_per_hour: float | None = None) -> str | None:
    """The plan report's line for a job that keeps a warm pool; None when it keeps none. `usd_per_hour`: the
    job's on-demand price for all its instances, which the retained time is billed at (docs/PLATFORM.md §1.13)."""
    keep = (request.get("ResourceConfig") or {}).get("KeepAlivePeriodInSeconds")
    if not keep:
        return None
    cost = "" if usd_per_hour is None else f" (up to ${keep / 3600 * usd_per_hour:,.2f} beyond the job's)"
    return (f"kept {keep} s after the job ends, billed meanwhile per instance at the on-demand price{cost}; a matching "
            f"next job starts on it (needs a warm-pool quota, 0 by default); end it sooner: sm-dist release {job_name}")


__all__ = ["MATCH_FIELDS", "PoolReuse", "keep_alive_line", "pool_differences"]
