"""sm_dist's PID 1 from outside: started as SageMaker starts a training container, nothing of local mode.

Two folders laid out as SageMaker lays out /opt/ml (the config files it writes, the code channel
holding the planned bundle), each host's first process the plan's container command, with only the
variables the platform sets (`TRAINING_JOB_NAME`, `TRAINING_JOB_ARN`, the request's `Environment`)
plus the two free ports this shared machine needs instead of SageMaker's fixed ones. What SageMaker
itself provides around the container — /opt/ml and resolvable `algo-N` names — comes from a private
mount namespace per host (`unshare`). Every worker must see ModelTrainer's variables and
`SM_CURRENT_HOST_RANK == GROUP_RANK`, exactly as in local mode. The host order past algo-9 (names
sorted as text) is checked on ten hosts by tests/local/test_rehearsal.py: the same container code
reads the same resourceconfig.json there, so two hosts are enough here.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from _harness import HANG_GUARD_S, Group, free_port
from _modeltrainer import ONLY_MODELTRAINER, ONLY_SM_DIST, modeltrainer_env
from _project import ROLE_ARN

import sm_dist
from sm_dist.launch.api import build_bundle
from sm_dist.local import mountns

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
BYO = Path(__file__).resolve().parents[1] / "local" / "byo"
HOSTS = ["algo-1", "algo-2"]
CHANNEL = {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}


def sagemaker_opt_ml(root: Path, host: str, bundle: Path, hyperparameters: dict[str, str]) -> Path:
    """/opt/ml as the platform hands it to a container: config files and the code channel."""
    config = root / "input" / "config"
    config.mkdir(parents=True)
    resource = {"current_host": host, "current_instance_type": "ml.g5.xlarge", "current_group_name": "homogeneousCluster",
                "hosts": sorted(HOSTS), "network_interface_name": "eth0",
                "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.g5.xlarge",
                                     "hosts": sorted(HOSTS)}]}
    (config / "resourceconfig.json").write_text(json.dumps(resource))
    (config / "inputdataconfig.json").write_text(json.dumps({"code": CHANNEL}))
    (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    shutil.copytree(bundle, root / "input" / "data" / "code")
    for sub in ("model", "output/data", "checkpoints"):
        (root / sub).mkdir(parents=True)
    return root


def test_containers_started_as_sagemaker_starts_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if mountns.unshare_prefix() is None:
        pytest.skip("no private mount namespace here (`unshare --mount`): /opt/ml and algo-N cannot be provided")
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(BYO / "dump_env.py", src)
    plan = sm_dist.plan("dump_env.py", source_dir=str(src), instance_type="ml.g5.xlarge", instance_count=len(HOSTS),
                        nproc_per_node=1, hyperparameters={"model-name": "tiny"}, checkpoint_mode="off",
                        role=ROLE_ARN, output_s3_uri="s3://out-bucket/x", region="us-east-1", max_runtime_s=600)
    bundle = build_bundle(plan, tmp_path / "bundle")
    hosts_file = tmp_path / "etc-hosts"
    hosts_file.write_text(mountns.hosts_file_text(HOSTS, Path(mountns.ETC_HOSTS).read_text()))
    platform = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TRAINING_JOB_NAME": plan.job_name,
                "TRAINING_JOB_ARN": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{plan.job_name}",
                **plan.environment, "SM_DIST_RDZV_PORT": str(free_port()), "SM_DIST_MASTER_PORT": str(free_port())}
    command = [sys.executable if a == "python3" else a for a in plan.container_command]
    roots = [sagemaker_opt_ml(tmp_path / h, h, bundle, dict(plan.hyperparameters)) for h in HOSTS]
    group = Group([mountns.command(root, command, hosts_file) or [] for root in roots], [platform] * len(roots),
                  cwd=tmp_path)
    assert group.wait(timeout=HANG_GUARD_S) == [0] * len(HOSTS), group.report()

    expected = set(modeltrainer_env(roots[0], tmp_path / "sm_training.env", monkeypatch)) - ONLY_MODELTRAINER
    order = sorted(HOSTS)
    for host, root in zip(HOSTS, roots):
        [dump] = (root / "output" / "data").glob("env-*.json")
        env = json.loads(dump.read_text())
        assert {k for k in env if k.startswith("SM_") and not k.startswith("SM_DIST_")} == expected | ONLY_SM_DIST
        assert env["SM_CURRENT_HOST_RANK"] == env["GROUP_RANK"] == env["RANK"] == str(order.index(host)), host
        assert (env["SM_MODEL_DIR"], env["SM_MASTER_ADDR"]) == ("/opt/ml/model", "algo-1")
        assert env["SM_NETWORK_INTERFACE_NAME"] == "eth0" and env["TRAINING_JOB_NAME"] == plan.job_name
