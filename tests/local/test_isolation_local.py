"""Network isolation in local mode: the container gets no S3, only its peers (docs/PLATFORM.md §1.7).

A probe script (tests/local/byo/probe_s3.py) lists the local S3 endpoint's buckets with boto3, as a
script in the container would. Without isolation it does (local mode's endpoint and fake keys are in
its environment); with `network_isolation=True` it is refused — no endpoint, no credentials — while
the emulated CheckpointConfig sync, which is the platform's, still runs. That the README's job on two
isolated hosts survives a killed rank, the restarted hosts restoring from each other (§1.7.1), is
tests/local/test_cnn_local.py's kill test (its job runs isolated).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import sm_dist
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.hostenv import ISOLATED_ENV, host_environment
from sm_dist.local.layout import HostRoot
from sm_dist.local.options import LocalOptions

BYO = Path(__file__).with_name("byo")
ENDPOINT_ENV = {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:5999", "AWS_ACCESS_KEY_ID": "sm-dist-local",
                "AWS_SECRET_ACCESS_KEY": "sm-dist-local", "AWS_REGION": "us-east-1", "SM_DIST_NPROC_PER_NODE": "1"}


@pytest.mark.parametrize("isolated", [False, True], ids=["open", "isolated"])
def test_an_isolated_host_gets_no_endpoint_and_no_credentials(tmp_path: Path, isolated: bool) -> None:
    config = LocalJobConfig(job_name="iso-job", container_command=("python3", "-c", "pass"), instance_count=2,
                            network_isolation=isolated)
    caller = {"AWS_PROFILE": "mine", "AWS_ACCESS_KEY_ID": "AKIA-real", "HOME": str(tmp_path), "PATH": "/usr/bin"}
    env = host_environment(config, HostRoot("algo-1", tmp_path), {"SM_DIST_RDZV_PORT": 1}, private=True,
                           extra=ENDPOINT_ENV, base=caller)
    aws = {k: v for k, v in env.items() if k.startswith("AWS_")}
    assert env["SM_DIST_NPROC_PER_NODE"] == "1" and env["HOME"] == str(tmp_path)  # the rest is unchanged
    if isolated:
        assert aws == ISOLATED_ENV
        assert not any("127.0.0.1:5999" in v for v in env.values())
    else:
        assert aws == {k: v for k, v in ENDPOINT_ENV.items() if k.startswith("AWS_")}  # never the caller's


def _probe(tmp_path: Path, name: str, isolated: bool) -> tuple[str, str]:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    shutil.copy(BYO / "probe_s3.py", src)
    job = sm_dist.fit("probe_s3.py", source_dir=str(src), local=True, instance_count=1, nproc_per_node=1,
                      network_isolation=isolated, local_options=LocalOptions(root=tmp_path / name, echo=False))
    assert job.status().status == "Completed", job.summary()
    assert "probe.txt" in job.run.checkpoint_keys  # the platform's sync (local mode's, outside the host) ran
    log = (tmp_path / name / "run" / "logs" / "algo-1.log").read_text()
    [said] = re.findall(r"probe: (listed .*|refused: .*)", log)
    [names] = re.findall(r"probe: AWS_\* names: (.*)", log)
    return said, names


@pytest.mark.slow
def test_a_script_lists_the_local_endpoint_only_without_isolation(tmp_path: Path) -> None:
    said, names = _probe(tmp_path, "open", isolated=False)
    assert said.startswith("listed") and "sm-dist-local" in said, said  # the checkpoint bucket is there
    assert "AWS_ENDPOINT_URL_S3" in names
    said, names = _probe(tmp_path, "isolated", isolated=True)
    assert said.startswith("refused: NoCredentialsError"), said
    assert "AWS_ENDPOINT_URL_S3" not in names and "AWS_ACCESS_KEY_ID" not in names

