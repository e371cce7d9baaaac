"""What PID 1 must do for a real SageMaker job (docs/PLATFORM.md §1.2, §1.3, §2.2):
the image's torch checked against the supported range, the environment SageMaker's own torchrun
driver sets, and a rendezvous that waits for a late first host."""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from pathlib import Path

import pytest
from _harness import free_port

from sm_dist.container import pid1, pid1_env
from sm_dist.errors import ContainerStartError
from sm_dist.jobspec import JobSpec

ARN = "arn:aws:sagemaker:eu-west-1:123456789012:training-job/my-job"


def _host(root: Path, resource_config: dict[str, object]) -> Path:
    """An /opt/ml tree with resourceconfig.json and a job spec in the code channel."""
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "config" / "resourceconfig.json").write_text(json.dumps(resource_config))
    code = root / "input" / "data" / "code"
    code.mkdir(parents=True)
    (code / "train.py").write_text("print('never runs')\n")
    JobSpec(entry="train.py").write(code)
    return root


def _cloud_host(tmp_path: Path, instance_type: str, interface: str = "eth1") -> Path:
    return _host(tmp_path, {"current_host": "algo-2", "hosts": ["algo-1", "algo-2"],
                            "current_instance_type": instance_type, "network_interface_name": interface})


def _env(root: Path, env: dict[str, str]) -> dict[str, str]:
    spec = JobSpec(entry="train.py")
    topo = pid1_env.read_topology(root, env, spec, num_gpus=8)
    return pid1_env.worker_env(env, topo, root, root / "input/data/code", root / "m")


def test_environment_matches_sagemakers_torchrun_driver(tmp_path: Path) -> None:
    env = _env(_cloud_host(tmp_path, "ml.p5en.48xlarge"), {"TRAINING_JOB_ARN": ARN})
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth1"
    assert env["NCCL_PROTO"] == "simple"
    assert env["FI_PROVIDER"] == "efa"  # p5en is EFA although SageMaker's driver's list lacks it
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "eu-west-1"


def test_the_containers_own_settings_win_and_emulated_hosts_keep_gloo_on_loopback(tmp_path: Path) -> None:
    root = _cloud_host(tmp_path, "ml.g5.xlarge", interface="eth0")
    env = _env(root, {"NCCL_PROTO": "LL128", "AWS_REGION": "us-west-2", "TRAINING_JOB_ARN": ARN})
    assert env["NCCL_PROTO"] == "LL128" and env["AWS_REGION"] == "us-west-2"
    local = _env(root, {"SM_DIST_RDZV_HOST": "127.0.0.1"})
    assert "GLOO_SOCKET_IFNAME" not in local  # every emulated host is 127.x: eth0 would break gloo
    assert "AWS_REGION" not in local  # no job ARN, no guess


@pytest.mark.parametrize("arn", ["", "not-an-arn", "arn:aws:sagemaker::1:training-job/x"])
def test_no_region_from_a_missing_or_odd_arn(arn: str) -> None:
    assert pid1_env.region_of(arn) is None


def test_rendezvous_waits_for_all_hosts_longer_than_torchs_default(tmp_path: Path) -> None:
    root = _cloud_host(tmp_path, "ml.g5.xlarge")
    topo = pid1_env.read_topology(root, {}, JobSpec(entry="train.py"), num_gpus=1)
    argv = pid1_env.torchrun_argv(topo, JobSpec(entry="train.py"), root / "input/data/code", "job")
    conf = next(a for a in argv if a.startswith("--rdzv-conf="))
    assert f"join_timeout={pid1_env.RDZV_WAIT_S}" in conf and pid1_env.RDZV_WAIT_S > 600


def test_a_host_waits_for_a_late_first_host_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    server = socket.socket()

    def first_host_starts_late() -> None:
        time.sleep(0.6)
        server.bind(("127.0.0.1", port))
        server.listen()

    thread = threading.Thread(target=first_host_starts_late)
    thread.start()
    try:
        with caplog.at_level(logging.INFO, logger="sm_dist.pid1"):
            pid1_env.wait_for_store("127.0.0.1", port, timeout=30, interval=0.1, log_every=0.2)
    finally:
        thread.join()
        server.close()
    assert any("waiting for the rendezvous store on 127.0.0.1" in r.getMessage() for r in caplog.records)


def test_the_first_tries_of_the_store_come_quickly_then_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """algo-1's store opens a second or two after the hosts start: a fixed 2 s pause after the first refusal
    held every other host back by up to 2 s at each start (strace of a local 2-host job)."""
    clock, pauses = [0.0], []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(pid1_env.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(pid1_env.time, "sleep", sleep)
    with pytest.raises(ContainerStartError):
        pid1_env.wait_for_store("127.0.0.1", free_port(), timeout=8, interval=2.0)
    assert pauses[:7] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]


def test_a_first_host_that_never_comes_fails_with_the_reason() -> None:
    with pytest.raises(ContainerStartError, match="did not accept connections in 0 s"):
        pid1_env.wait_for_store("127.0.0.1", free_port(), timeout=0.3, interval=0.1)


@pytest.mark.parametrize(("version", "refused"), [("2.4.1+cu121", True), ("2.8.0+cu128", True), ("2.10.0", False),
                                                  ("2.13.0+cpu", False), ("2.15.0", False)])
def test_torch_below_the_supported_range_is_refused(version: str, refused: bool) -> None:
    if refused:
        with pytest.raises(ContainerStartError, match=re.escape(f"torch {version} is older") + ".*torch_version="):
            pid1_env.check_torch(version)
    else:
        warning = pid1_env.check_torch(version)
        assert (warning is not None) == (version == "2.15.0")


def test_an_image_with_too_old_a_torch_fails_fast_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _host(tmp_path, {"current_host": "algo-1", "hosts": ["algo-1"]})
    monkeypatch.setattr(pid1, "installed_torch", lambda: "2.4.0")
    assert pid1.run({"SM_DIST_OPT_ML": str(root)}) == 2
    failure = (root / "output" / "failure").read_text()
    assert "torch 2.4.0 is older than sm_dist's runtime supports (torch 2.10–2.13)" in failure
