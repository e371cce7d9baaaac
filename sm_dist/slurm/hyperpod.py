"""A SageMaker HyperPod cluster read before a job is submitted to it: refuse a job that does not fit.

`check_fits(name, instance_type, count)` asks SageMaker (read-only: DescribeCluster, ListClusterNodes;
docs/PLATFORM.md §12) whether the cluster is in service, orchestrated by Slurm, and runs at least
`count` nodes of `instance_type` in one instance group (with no type given: of any one type). Each
refusal is one ConfigError line naming the cluster's groups, before anything is staged or submitted.
boto3 is imported inside the function (the Slurm backend's world allows it there only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from boto3 import Session

#: ClusterInstanceStatus of a node that takes jobs (the API's enum: Running, Pending, Failure, ...).
RUNNING = "Running"


@dataclass(frozen=True)
class Group:
    """One instance group of the cluster and its nodes that run."""

    name: str
    instance_type: str
    current: int
    running: int

    def __str__(self) -> str:
        return f"{self.name} ({self.running} of {self.current} × {self.instance_type} running)"


def read_groups(described: dict[str, Any], nodes: list[dict[str, Any]]) -> list[Group]:
    """DescribeCluster's InstanceGroups with ListClusterNodes' running nodes counted per group."""
    running: dict[str, int] = {}
    for node in nodes:
        if (node.get("InstanceStatus") or {}).get("Status") == RUNNING:
            running[node["InstanceGroupName"]] = running.get(node["InstanceGroupName"], 0) + 1
    return [Group(name=g["InstanceGroupName"], instance_type=g.get("InstanceType", "?"),
                  current=int(g.get("CurrentCount", 0)), running=running.get(g["InstanceGroupName"], 0))
            for g in described.get("InstanceGroups", [])]


def check_described(name: str, described: dict[str, Any], groups: list[Group], instance_type: str | None,
                    count: int) -> Group:
    """The group the job runs in; ConfigError when the cluster cannot take it."""
    status = described.get("ClusterStatus")
    if status != "InService":
        raise ConfigError("hyperpod_cluster", name, f"is {status}, not InService: wait for it, or pick another")
    if "Eks" in (described.get("Orchestrator") or {}):
        raise ConfigError("hyperpod_cluster", name, "is orchestrated by EKS, not Slurm: --slurm submits with sbatch")
    listed = ", ".join(str(g) for g in groups) or "none"
    fitting = [g for g in groups if instance_type in (None, g.instance_type)]
    if not fitting:
        raise ConfigError("instance_type", instance_type, f"cluster {name} has no instance group of that type; its "
                          f"groups: {listed}")
    best = max(fitting, key=lambda g: g.running)
    if best.running < count:
        raise ConfigError("instance_count", count, f"cluster {name} runs at most {best.running} nodes of one type "
                          f"({best}): ask for {best.running} or fewer; its groups: {listed}")
    return best


def check_fits(name: str, instance_type: str | None, count: int, session: Session | None = None) -> Group:
    """Read the HyperPod cluster `name` and refuse a job it cannot run (see the module's docstring)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    client = (session or boto3.Session()).client("sagemaker")
    try:
        described = client.describe_cluster(ClusterName=name)
        nodes: list[dict[str, Any]] = []
        token = ""
        while True:
            page = (client.list_cluster_nodes(ClusterName=name, NextToken=token) if token
                    else client.list_cluster_nodes(ClusterName=name))
            nodes.extend(dict(node) for node in page.get("ClusterNodeSummaries", []))
            token = page.get("NextToken", "")
            if not token:
                break
    except ClientError as exc:
        raise ConfigError("hyperpod_cluster", name, f"cannot read it: {exc.response['Error'].get('Message', exc)}"
                          ) from None
    except BotoCoreError as exc:
        raise ConfigError("hyperpod_cluster", name, f"cannot read it: {exc}") from None
    return check_described(name, dict(described), read_groups(dict(described), nodes),
                           instance_type, count)


__all__ = ["Group", "check_described", "check_fits", "read_groups"]
