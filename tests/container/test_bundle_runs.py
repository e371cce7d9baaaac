"""What SageMaker will run: the planned bundle, unpacked per host, started with the planned
container command and environment, trains cnn.py under torchrun on CPU for a few steps."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from _harness import HANG_GUARD_S, Group, start, wait_until
from _project import ROLE_ARN

import sm_dist
from sm_dist.launch.api import build_bundle
from sm_dist.planning.plan import Plan

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

HOSTS = ["algo-1", "algo-2"]


def _host(root: Path, host: str, bundle: Path, hosts: list[str] = HOSTS) -> None:
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "config" / "resourceconfig.json").write_text(json.dumps({"current_host": host, "hosts": hosts}))
    (root / "input" / "config" / "inputdataconfig.json").write_text(json.dumps({"code": {}}))
    shutil.copytree(bundle, root / "input" / "data" / "code")


def _argv(plan: Plan) -> list[str]:
    """The plan's container command, run by this Python."""
    return [sys.executable if a == "python3" else a for a in plan.container_command]


def _env(plan: Plan, root: Path, port: int) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    container = {k: v.replace("/opt/ml", str(root)) for k, v in plan.environment.items()}
    return {**keep, **container, "SM_DIST_OPT_ML": str(root), "SM_DIST_RDZV_HOST": "127.0.0.1",
            "SM_DIST_RDZV_PORT": str(port), "SM_NUM_GPUS": "0", "TRAINING_JOB_NAME": plan.job_name,
            "OMP_NUM_THREADS": "1"}


def test_planned_bundle_trains_on_two_emulated_hosts(source_dir: Path, tmp_path: Path, port_factory) -> None:
    plan = sm_dist.plan(
        "cnn.py", source_dir=str(source_dir), instance_type="ml.m5.xlarge", instance_count=2, strategy="ddp",
        hyperparameters={"steps": 3, "dataset-size": 64, "batch-size": 8}, checkpoint_mode="off",
        role=ROLE_ARN, output_s3_uri="s3://out-bucket/x", region="us-east-1", max_runtime_s=600,
    )
    bundle = build_bundle(plan, tmp_path / "bundle")
    port = port_factory()
    for host in HOSTS:
        _host(tmp_path / host, host, bundle)
    # algo-2 starts first, so its torchrun has the lower pid: with every host at 127.0.0.1 the
    # rendezvous ordered hosts by pid and put global rank 0 on algo-2 (a flake in CI).
    order = list(reversed(HOSTS))
    group = Group([_argv(plan)] * len(order), [_env(plan, tmp_path / h, port) for h in order], cwd=tmp_path)
    assert group.wait() == [0, 0], group.report()
    algo1 = group.outputs()[order.index("algo-1")]
    steps = [line for line in algo1.splitlines() if line.startswith("[sm_dist] step=")]
    assert steps and steps[-1].startswith("[sm_dist] step=3 ")
    # PID 1 ran the bundle's copy of the entrypoint, with the hyperparameters as flags
    assert str(tmp_path / "algo-1" / "input/data/code/sm_dist/_entrypoints/cnn.py --batch-size 8 --dataset-size 64 --steps 3") in algo1


def test_stop_reaches_the_training_loop_and_exits_interrupted(source_dir: Path, tmp_path: Path, port_factory) -> None:
    """SIGTERM to PID 1 (what StopTrainingJob and a spot interruption send) → torchrun
    → worker → checkpoint committed → EXIT_INTERRUPTED."""
    import signal

    from sm_dist.jobspec import EXIT_INTERRUPTED

    ckpt = tmp_path / "ckpt"
    plan = sm_dist.plan(
        "cnn.py", source_dir=str(source_dir), instance_type="ml.m5.xlarge", strategy="ddp", checkpoint_mode="local",
        hyperparameters={"steps": 100000, "dataset-size": 64, "batch-size": 8, "checkpoint-dir": str(ckpt)},
        role=ROLE_ARN, output_s3_uri="s3://out-bucket/x", region="us-east-1", max_runtime_s=600,
    )
    root = tmp_path / "algo-1"
    _host(root, "algo-1", build_bundle(plan, tmp_path / "bundle"), hosts=["algo-1"])
    group = start(_argv(plan), _env(plan, root, port_factory()), cwd=tmp_path)
    wait_until(lambda: "[sm_dist] step=" in group.outputs()[0], group, timeout=HANG_GUARD_S, what="a training step")
    group.procs[0].send_signal(signal.SIGTERM)
    assert group.wait() == [EXIT_INTERRUPTED], group.report()
    committed = sorted(p.parent.name for p in ckpt.glob("step-*/manifest.json"))
    assert committed, "no checkpoint committed on stop"
    assert not (root / "output" / "failure").exists()
