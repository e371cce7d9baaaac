"""Read-only checks of the job's VPC before anything is uploaded (docs/PLATFORM.md §1.11).

A job with `subnets=` and `security_group_ids=` runs its instances in the user's VPC, where a wrong
network shows only once the job started: the hosts cannot reach each other (torchrun's rendezvous on
port 29400 and NCCL's sockets time out, billed) or SageMaker cannot place the instances. So, with
DescribeSubnets and DescribeSecurityGroups:

* the subnets and the security groups are in one VPC;
* each subnet has the free addresses SageMaker asks for: 2 per instance, 5 with EFA;
* with several instances, the groups let the instances talk: all TCP inbound from the job's own
  groups (or from addresses covering its subnets); with EFA, all traffic inbound from and outbound
  to the job's groups — EFA's traffic is matched only by rules naming a security group.

Each failure is one line naming the subnet or group and the fix. A caller without the EC2 read
permissions gets a warning, not a refusal.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from boto3.session import Session

    from sm_dist.planning.plan import Plan

_log = logging.getLogger(__name__)

#: Private addresses SageMaker asks a subnet to have per training instance (docs/PLATFORM.md §1.11).
IPS_PER_INSTANCE = 2
IPS_PER_EFA_INSTANCE = 5
#: The rendezvous port of the job's torchrun (sm_dist.container.pid1_env.DEFAULT_RDZV_PORT), named in the fix.
RDZV_PORT = 29400


def uses_efa(instance_type: str) -> bool:
    """Whether SageMaker gives this type EFA: the container's list or the instance catalog's."""
    from sm_dist.catalog.hardware import hardware
    from sm_dist.contract.container import EFA_TYPES

    box = hardware(instance_type)
    return instance_type in EFA_TYPES or bool(box is not None and box.efa)


def check_network(plan: Plan, session: Session) -> None:
    """Refuse a VPC that cannot hold or connect the job's instances; nothing to do without VpcConfig."""
    vpc = plan.request.get("VpcConfig")
    if not vpc:
        return
    described = describe_vpc(session.client("ec2", region_name=plan.region), vpc["Subnets"], vpc["SecurityGroupIds"],
                             plan.region)
    if described is None:
        return
    subnets, groups = described
    efa = uses_efa(plan.instance_type)
    problems = [*vpc_problems(subnets, groups), *address_problems(subnets, plan.instance_count, efa)]
    if plan.instance_count > 1:
        problems += rule_problems(groups, subnets, efa)
    if problems:
        first, *rest = problems
        raise ConfigError(first[0], first[1], "\n".join([first[2], *(f"{f}={v!r}: {m}" for f, v, m in rest)]))


def describe_vpc(ec2: Any, subnet_ids: Sequence[str], group_ids: Sequence[str],
                 region: str) -> tuple[list[Any], list[Any]] | None:
    """The subnets and groups as EC2 describes them, in the request's order; None (a warning) when
    they cannot be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        subnets = ec2.describe_subnets(SubnetIds=list(subnet_ids))["Subnets"]
        groups = ec2.describe_security_groups(GroupIds=list(group_ids))["SecurityGroups"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        if code.startswith("InvalidSubnetID"):
            raise ConfigError("subnets", list(subnet_ids), f"{error.get('Message')} in {region}: pass subnets of the "
                              "job's region (aws ec2 describe-subnets)") from None
        if code.startswith("InvalidGroup"):
            raise ConfigError("security_group_ids", list(group_ids), f"{error.get('Message')} in {region}: pass "
                              "groups of the subnets' VPC (aws ec2 describe-security-groups)") from None
        _log.warning("VPC check skipped: could not describe the subnets and security groups (%s)", code)
        return None
    except BotoCoreError as exc:
        _log.warning("VPC check skipped: could not describe the subnets and security groups (%s)", type(exc).__name__)
        return None
    return _in_order(subnets, "SubnetId", subnet_ids), _in_order(groups, "GroupId", group_ids)


def _in_order(items: list[Any], key: str, order: Sequence[str]) -> list[Any]:
    """`items` in the order their ids have in `order` (EC2 answers in its own order)."""
    return sorted(items, key=lambda item: list(order).index(item[key]) if item[key] in order else len(order))


Problem = tuple[str, str, str]
"""(setting, the subnet or group it is about, what is wrong and the fix)."""


def vpc_problems(subnets: Sequence[Any], groups: Sequence[Any]) -> list[Problem]:
    """The groups must be of the subnets' VPC, and the subnets of one VPC."""
    vpcs = list(dict.fromkeys(s["VpcId"] for s in subnets))
    if len(vpcs) > 1:
        where = ", ".join(f"{s['SubnetId']} in {s['VpcId']}" for s in subnets)
        return [("subnets", subnets[0]["SubnetId"], f"the subnets are in {len(vpcs)} VPCs ({where}): a job runs in "
                 "one; pass subnets of one VPC")]
    return [("security_group_ids", g["GroupId"], f"is in {g.get('VpcId')}, the subnets in {vpcs[0]}: pass a "
             f"security group of {vpcs[0]}") for g in groups if g.get("VpcId") != vpcs[0]]


def address_problems(subnets: Sequence[Any], count: int, efa: bool) -> list[Problem]:
    """Each subnet SageMaker may choose must have the free addresses the whole job needs."""
    per = IPS_PER_EFA_INSTANCE if efa else IPS_PER_INSTANCE
    need = count * per
    return [("subnets", s["SubnetId"], f"has {s.get('AvailableIpAddressCount', 0)} free private addresses; "
             f"{count} instance(s) need {need} ({per} each{' with EFA' if efa else ''}): free addresses in it or "
             "leave it out of subnets=") for s in subnets if s.get("AvailableIpAddressCount", 0) < need]


def rule_problems(groups: Sequence[Any], subnets: Sequence[Any], efa: bool) -> list[Problem]:
    """The job's groups must let its instances reach each other: in, and out (with EFA, the self rule)."""
    ids = [g["GroupId"] for g in groups]
    cidrs = [s["CidrBlock"] for s in subnets if s.get("CidrBlock")]
    sg = ids[0]
    kind = "all traffic" if efa else "all TCP"
    needs = "EFA needs" if efa else f"torchrun's rendezvous (port {RDZV_PORT}) and NCCL's sockets need"
    problems: list[Problem] = []
    for rules, way, command in (("IpPermissions", "in from", "ingress"), ("IpPermissionsEgress", "out to", "egress")):
        if _allows((p for g in groups for p in g.get(rules, [])), ids, cidrs, efa):
            continue
        note = " (an outbound rule to 0.0.0.0/0 does not cover it)" if efa and command == "egress" else ""
        problems.append(("security_group_ids", sg, f"does not let {kind} {way} the job's own security groups, which "
                         f"{needs} between the instances{note}: aws ec2 authorize-security-group-{command} "
                         f"--group-id {sg} --protocol -1 --source-group {sg}"))
    return problems


def _allows(rules: Iterable[Any], group_ids: Sequence[str], subnet_cidrs: Sequence[str], efa: bool) -> bool:
    """Whether one of `rules` lets the job's instances reach each other: all traffic (EFA) or all TCP
    (else), to or from one of the job's groups — or, without EFA, addresses covering every subnet
    (0.0.0.0/0, the default outbound rule, does)."""
    for rule in rules:
        protocol = str(rule.get("IpProtocol"))
        every_tcp = protocol in ("tcp", "6") and rule.get("FromPort", 0) <= 0 and rule.get("ToPort", 0) >= 65535
        if not (protocol == "-1" or (every_tcp and not efa)):
            continue
        if any(pair.get("GroupId") in group_ids for pair in rule.get("UserIdGroupPairs", [])):
            return True
        ranges = [r.get("CidrIp") for r in rule.get("IpRanges", []) if r.get("CidrIp")]
        if not efa and subnet_cidrs and all(_covered(c, ranges) for c in subnet_cidrs):
            return True
    return False


def _covered(cidr: str, ranges: Sequence[str]) -> bool:
    subnet = ipaddress.ip_network(cidr, strict=False)
    return any(subnet.subnet_of(ipaddress.ip_network(r, strict=False)) for r in ranges  # type: ignore[arg-type]
               if ipaddress.ip_network(r, strict=False).version == subnet.version)


__all__ = ["IPS_PER_EFA_INSTANCE", "IPS_PER_INSTANCE", "address_problems", "check_network", "describe_vpc",
           "rule_problems", "uses_efa", "vpc_problems"]
