"""The job's VPC, checked before anything is uploaded (docs/PLATFORM.md §1.11): one VPC, free
addresses in each subnet, and security group rules that let the instances reach each other (all
traffic to and from the group itself with EFA). moto implements EC2's subnets and groups."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from _answers import answer, error
from _project import CKPT_BUCKET, ROLE_ARN, aws_state

import sm_dist
from sm_dist.cloud.network_checks import uses_efa
from sm_dist.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

P4D = "ml.p4d.24xlarge"  # EFA (GPUDirect RDMA)
G5 = "ml.g5.2xlarge"  # no EFA


def test_efa_types_are_the_containers_and_the_catalogs() -> None:
    assert uses_efa(P4D) and uses_efa("ml.p5.48xlarge") and uses_efa("ml.g5.48xlarge")
    assert not uses_efa(G5) and not uses_efa("ml.m5.xlarge")


@pytest.fixture
def vpc(aws: str) -> dict[str, Any]:
    """A VPC (10.0.0.0/16) with a roomy subnet, a /28 (11 free addresses), a group with the
    self-referencing all-traffic rules both ways, a bare group (only the default outbound rule), and
    a subnet and group of another VPC."""
    import boto3

    ec2 = boto3.client("ec2")
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    other_vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    ids = {
        "roomy": ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"],
        "small": ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.2.0/28")["Subnet"]["SubnetId"],
        "elsewhere": ec2.create_subnet(VpcId=other_vpc, CidrBlock="10.1.1.0/24")["Subnet"]["SubnetId"],
        "bare": ec2.create_security_group(GroupName="bare", Description="d", VpcId=vpc_id)["GroupId"],
        "other_vpc_group": ec2.create_security_group(GroupName="o", Description="d", VpcId=other_vpc)["GroupId"],
    }
    efa = ids["efa"] = ec2.create_security_group(GroupName="efa", Description="d", VpcId=vpc_id)["GroupId"]
    self_rule = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": efa}]}]
    ec2.authorize_security_group_ingress(GroupId=efa, IpPermissions=self_rule)
    ec2.authorize_security_group_egress(GroupId=efa, IpPermissions=self_rule)
    return ids


def _fit(source_dir: Path, instance_type: str, count: int, subnets: list[str], groups: list[str],
         session: Any = None) -> sm_dist.Job:
    return sm_dist.fit("train.py", session=session, source_dir=str(source_dir), instance_type=instance_type,
                       instance_count=count, strategy="ddp", role=ROLE_ARN, max_runtime_s=3600,
                       checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/c", subnets=subnets, security_group_ids=groups)


def _refused(source_dir: Path, instance_type: str, count: int, subnets: list[str], groups: list[str]) -> str:
    with pytest.raises(ConfigError) as refused:
        _fit(source_dir, instance_type, count, subnets, groups)
    assert aws_state() == ([CKPT_BUCKET], [], 0)  # nothing uploaded, no job
    return str(refused.value)


def test_an_efa_job_in_a_group_that_talks_to_itself_launches(vpc: dict[str, Any], source_dir: Path) -> None:
    job = _fit(source_dir, P4D, 2, [vpc["roomy"]], [vpc["efa"]])
    assert aws_state()[1] == [job.name]


def test_an_efa_job_needs_the_self_rule_in_and_out(vpc: dict[str, Any], source_dir: Path) -> None:
    sg = vpc["bare"]
    lines = _refused(source_dir, P4D, 2, [vpc["roomy"]], [sg]).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"security_group_ids='{sg}': does not let all traffic in from the job's own security groups, which EFA needs between the instances")
    assert lines[0].endswith(f"aws ec2 authorize-security-group-ingress --group-id {sg} --protocol -1 --source-group {sg}")
    assert lines[1].startswith(f"security_group_ids='{sg}': does not let all traffic out to the job's own security groups")
    assert "0.0.0.0/0 does not cover it" in lines[1]  # the bare group has that default outbound rule
    assert lines[1].endswith(f"authorize-security-group-egress --group-id {sg} --protocol -1 --source-group {sg}")


def test_without_efa_the_rendezvous_still_needs_the_hosts_to_reach_each_other(vpc: dict[str, Any],
                                                                              source_dir: Path) -> None:
    import boto3

    sg = vpc["bare"]
    message = _refused(source_dir, G5, 2, [vpc["roomy"]], [sg])
    assert message.startswith(f"security_group_ids='{sg}': does not let all TCP in from the job's own security groups, "
                              "which torchrun's rendezvous (port 29400) and NCCL's sockets need between the instances")
    assert "\n" not in message  # outbound: the default rule to 0.0.0.0/0 covers TCP without EFA
    # all TCP from the VPC's addresses covers the subnets: enough without EFA
    boto3.client("ec2").authorize_security_group_ingress(GroupId=sg, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 0, "ToPort": 65535, "IpRanges": [{"CidrIp": "10.0.0.0/16"}]}])
    job = _fit(source_dir, G5, 2, [vpc["roomy"]], [sg])
    assert aws_state()[1] == [job.name]


def test_one_instance_needs_no_rule_between_hosts(vpc: dict[str, Any], source_dir: Path) -> None:
    job = _fit(source_dir, P4D, 1, [vpc["roomy"]], [vpc["bare"]])
    assert aws_state()[1] == [job.name]


def test_each_subnet_needs_five_addresses_per_efa_instance(vpc: dict[str, Any], source_dir: Path) -> None:
    small = vpc["small"]
    message = _refused(source_dir, P4D, 3, [vpc["roomy"], small], [vpc["efa"]])
    assert message == (f"subnets='{small}': has 11 free private addresses; 3 instance(s) need 15 (5 each with EFA): "
                       "free addresses in it or leave it out of subnets=")
    job = _fit(source_dir, G5, 3, [small], [vpc["efa"]])  # 2 each without EFA: 6 of 11
    assert aws_state()[1] == [job.name]


def test_subnets_and_groups_must_share_the_jobs_vpc(vpc: dict[str, Any], source_dir: Path) -> None:
    other = vpc["other_vpc_group"]
    message = _refused(source_dir, P4D, 1, [vpc["roomy"]], [vpc["efa"], other])
    assert message.startswith(f"security_group_ids='{other}': is in vpc-") and "pass a security group of vpc-" in message
    message = _refused(source_dir, P4D, 1, [vpc["roomy"], vpc["elsewhere"]], [vpc["efa"]])
    assert message.startswith(f"subnets='{vpc['roomy']}': the subnets are in 2 VPCs")


def test_an_unknown_subnet_or_group_is_refused(vpc: dict[str, Any], source_dir: Path) -> None:
    assert "The subnet ID 'subnet-0missing' does not exist in us-east-1" in _refused(
        source_dir, P4D, 1, ["subnet-0missing"], [vpc["efa"]])
    assert "security_group_ids=['sg-0missing']" in _refused(source_dir, P4D, 1, [vpc["roomy"]], ["sg-0missing"])


def test_a_caller_who_may_not_describe_the_vpc_gets_a_warning(vpc: dict[str, Any], source_dir: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    import boto3

    session = boto3.Session(region_name="us-east-1")
    answer(session, "ec2", "DescribeSubnets", error("UnauthorizedOperation", "You are not authorized"))
    with caplog.at_level(logging.WARNING, logger="sm_dist.cloud.network_checks"):
        job = _fit(source_dir, P4D, 2, [vpc["roomy"]], [vpc["bare"]], session=session)
    assert "VPC check skipped: could not describe the subnets and security groups (UnauthorizedOperation)" in caplog.text
    assert aws_state()[1] == [job.name]
