"""A HyperPod cluster read before a Slurm job is submitted (sm_dist.slurm.hyperpod), through botocore's Stubber
with the real API shapes (moto has no HyperPod): DescribeCluster, ListClusterNodes (paginated)."""

from __future__ import annotations

import datetime as dt
import re

import boto3
import pytest
from botocore.stub import Stubber

from sm_dist.errors import ConfigError
from sm_dist.slurm import hyperpod

ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcd1234efgh"
LAUNCHED = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)


class _Session:
    """What check_fits asks of a boto3 Session: a client (the stubbed one)."""

    def __init__(self, client: object) -> None:
        self._client = client

    def client(self, service: str) -> object:
        assert service == "sagemaker"
        return self._client


def _cluster(status: str = "InService", orchestrator: dict | None = None) -> dict:
    return {"ClusterArn": ARN, "ClusterName": "hp", "ClusterStatus": status,
            "Orchestrator": orchestrator or {"Slurm": {}},
            "InstanceGroups": [
                {"InstanceGroupName": "controller", "InstanceType": "ml.m5.xlarge", "CurrentCount": 1},
                {"InstanceGroupName": "workers", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 4},
            ]}


def _node(group: str, index: int, instance_type: str, status: str = "Running") -> dict:
    return {"InstanceGroupName": group, "InstanceId": f"i-{index:017x}", "InstanceType": instance_type,
            "LaunchTime": LAUNCHED, "InstanceStatus": {"Status": status}}


def _stubbed(cluster: dict, pages: list[list[dict]]) -> tuple[_Session, Stubber]:
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    stub = Stubber(client)
    stub.add_response("describe_cluster", cluster, {"ClusterName": "hp"})
    for number, page in enumerate(pages):
        response: dict = {"ClusterNodeSummaries": page}
        params = {"ClusterName": "hp"} if number == 0 else {"ClusterName": "hp", "NextToken": f"t{number}"}
        if number + 1 < len(pages):
            response["NextToken"] = f"t{number + 1}"
        stub.add_response("list_cluster_nodes", response, params)
    stub.activate()
    return _Session(client), stub


def test_a_job_that_fits_the_running_nodes_of_its_type_is_let_through() -> None:
    workers = [_node("workers", i, "ml.p5.48xlarge") for i in range(4)]
    session, stub = _stubbed(_cluster(), [[_node("controller", 9, "ml.m5.xlarge"), *workers[:2]], workers[2:]])
    group = hyperpod.check_fits("hp", "ml.p5.48xlarge", 4, session=session)  # type: ignore[arg-type]
    assert (group.name, group.running) == ("workers", 4)
    stub.assert_no_pending_responses()  # both pages read


def test_a_job_larger_than_the_running_nodes_is_refused_naming_the_groups() -> None:
    nodes = [_node("workers", i, "ml.p5.48xlarge", "Running" if i < 3 else "Pending") for i in range(4)]
    session, _ = _stubbed(_cluster(), [nodes])
    with pytest.raises(ConfigError, match=re.escape(
            "instance_count=4: cluster hp runs at most 3 nodes of one type (workers (3 of 4 × ml.p5.48xlarge "
            "running)): ask for 3 or fewer; its groups: controller (0 of 1 × ml.m5.xlarge running), workers")):
        hyperpod.check_fits("hp", "ml.p5.48xlarge", 4, session=session)  # type: ignore[arg-type]


def test_a_type_the_cluster_lacks_and_a_cluster_not_in_service_are_refused() -> None:
    session, _ = _stubbed(_cluster(), [[_node("workers", 0, "ml.p5.48xlarge")]])
    with pytest.raises(ConfigError, match="instance_type='ml.p4d.24xlarge': cluster hp has no instance group of that "
                                          "type; its groups: controller"):
        hyperpod.check_fits("hp", "ml.p4d.24xlarge", 1, session=session)  # type: ignore[arg-type]
    session, _ = _stubbed(_cluster(status="Updating"), [[]])
    with pytest.raises(ConfigError, match="hyperpod_cluster='hp': is Updating, not InService"):
        hyperpod.check_fits("hp", None, 1, session=session)  # type: ignore[arg-type]


def test_an_unknown_cluster_is_one_line() -> None:
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    stub = Stubber(client)
    stub.add_client_error("describe_cluster", "ResourceNotFound", "Cluster nope not found", 400)
    stub.activate()
    with pytest.raises(ConfigError, match="hyperpod_cluster='nope': cannot read it: Cluster nope not found"):
        hyperpod.check_fits("nope", None, 1, session=_Session(client))  # type: ignore[arg-type]


def test_the_check_runs_before_anything_is_staged(tmp_path, monkeypatch) -> None:
    """fit(slurm={"hyperpod_cluster": ...}) reads the cluster after finding sbatch and before staging the job."""
    import sm_dist
    from sm_dist.slurm import cluster

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    asked = []

    def refuse(name: str, instance_type: str | None, count: int, session: object = None) -> None:
        asked.append((name, instance_type, count))
        raise ConfigError("instance_count", count, "cluster hp runs at most 2 nodes of one type")

    monkeypatch.setattr(hyperpod, "check_fits", refuse)
    monkeypatch.setattr(cluster, "partitions", lambda: pytest.fail("the partitions are read after the cluster"))
    with pytest.raises(ConfigError, match="runs at most 2 nodes"):
        sm_dist.fit("cnn.py", source_dir="entrypoints", instance_type="ml.p5.48xlarge", instance_count=4,
                    slurm={"hyperpod_cluster": "hp", "root": tmp_path / "jobs"})
    assert asked == [("hp", "ml.p5.48xlarge", 4)] and not (tmp_path / "jobs").exists()
