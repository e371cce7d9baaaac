"""One container layout: paths, remapping, resourceconfig.json and host order are defined once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sm_dist import catalog
from sm_dist.container import pid1_env, script_env
from sm_dist.container.env import detect_env
from sm_dist.contract import container
from sm_dist.contract.container import (
    EFA_RDMA_TYPES,
    EFA_TYPES,
    OPT_ML,
    SM_DIR_VARIABLES,
    host_order,
    read_resource_config,
    remap,
)
from sm_dist.errors import ContainerStartError, RuntimeEnvError
from sm_dist.jobspec import JobSpec
from sm_dist.local import hostenv, layout
from sm_dist.runtime.checkpoint import config as ckpt_config

HOSTS = ["algo-10", "algo-2", "algo-1", "algo-9"]


def _root(tmp_path: Path, current: str = "algo-2", **extra: object) -> Path:
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": current, "hosts": HOSTS, **extra}))
    return tmp_path


def test_one_remap_for_local_mode_and_the_container() -> None:
    assert layout.remap is remap and hostenv.remap is remap and script_env.remap is remap
    assert remap("/opt/ml/checkpoints", "/tmp/h/algo-1") == "/tmp/h/algo-1/checkpoints"
    assert remap("PYTHONPATH=/opt/ml/input/data/code:/usr/lib", Path("/r")) == "PYTHONPATH=/r/input/data/code:/usr/lib"
    assert remap("/opt/mlx/a", "/r") == "/opt/mlx/a" and remap("/opt/ml/a", OPT_ML) == "/opt/ml/a"
    # the runtime's checkpoint folder goes through the same function
    assert ckpt_config._container_path("/opt/ml/checkpoints", {"SM_DIST_OPT_ML": "/r"}) == "/r/checkpoints"


def test_pid1_and_detect_env_read_one_host_order(tmp_path: Path) -> None:
    """SageMaker's order, sorted as text (docs/PLATFORM.md §1.8): what resourceconfig.json lists,
    ModelTrainer's SM_CURRENT_HOST_RANK and torchrun's c10d node numbering all follow it."""
    root = _root(tmp_path, current_instance_type="ml.p5.48xlarge", network_interface_name="eth1")
    as_text = ["algo-1", "algo-10", "algo-2", "algo-9"]
    assert list(host_order(HOSTS)) == as_text
    topo = pid1_env.read_topology(root, {}, JobSpec(entry="t.py"), num_gpus=0)
    env = detect_env({"SM_DIST_OPT_ML": str(root), "SM_NUM_GPUS": "0"})
    assert list(topo.hosts) == list(env.hosts) == as_text
    assert topo.node_rank == env.node_rank == 2
    assert (topo.instance_type, topo.interface) == ("ml.p5.48xlarge", "eth1")


def test_one_resourceconfig_reader_refuses_the_same_files(tmp_path: Path) -> None:
    root = _root(tmp_path, current="algo-3")
    with pytest.raises(RuntimeEnvError, match="current_host 'algo-3'"):
        read_resource_config(root)
    with pytest.raises(RuntimeEnvError, match="algo-3"):
        detect_env({"SM_DIST_OPT_ML": str(root)})
    with pytest.raises(ContainerStartError, match="algo-3"):
        pid1_env.read_topology(root, {}, JobSpec(entry="t.py"), 0)
    assert read_resource_config(tmp_path / "nothing") is None


def test_pid1_exports_the_contract_directory_variables(tmp_path: Path) -> None:
    from sm_dist.local.config import LocalJobConfig

    config = LocalJobConfig(job_name="j", container_command=("python3", "-c", "pass"), instance_count=1)
    host = layout.create_host_root(config, "algo-1", tmp_path / "algo-1", None)
    env = script_env.script_environment(host.root, {}, script_env.Host(
        hosts=("algo-1",), current_host="algo-1", instance_type=None, interface="lo", num_gpus=0, num_cpus=1))
    assert {k: env[k] for k in SM_DIR_VARIABLES} == {k: remap(v, host.root) for k, v in SM_DIR_VARIABLES.items()}
    assert env["SM_MODEL_DIR"] == str(host.model_dir) and env["SM_OUTPUT_FAILURE"] == str(host.failure_file)


def test_efa_types_follow_the_catalog() -> None:
    """Every type the catalog marks EFA with GPUDirect RDMA (p4d and newer, trn) gets the RDMA variables;
    no type the catalog knows without EFA gets FI_PROVIDER=efa. EFA G types the catalog lists stay
    as SageMaker's own driver leaves them (docs/PLATFORM.md §1.2), except g5.48xlarge, which it lists."""
    rows = {i.name: i for i in catalog.list_instances()}
    efa = {name for name, i in rows.items() if i.efa}
    rdma_families = ("ml.p4d.", "ml.p4de.", "ml.p5.", "ml.p5e.", "ml.p5en.", "ml.p6-", "ml.trn")
    assert {n for n in efa if n.startswith(rdma_families)} == {n for n in EFA_RDMA_TYPES if n in rows}
    assert {n for n in EFA_TYPES if n in rows} <= efa
    assert {"ml.p5en.48xlarge", "ml.p6-b200.48xlarge"} <= EFA_RDMA_TYPES <= EFA_TYPES
    assert all(n.startswith("ml.g") for n in efa - EFA_TYPES)


@pytest.mark.parametrize("instance_type", sorted(EFA_RDMA_TYPES))
def test_pid1_sets_the_rdma_variables_for_every_rdma_type(tmp_path: Path, instance_type: str) -> None:
    topo = pid1_env.read_topology(_root(tmp_path, current_instance_type=instance_type), {},
                                      JobSpec(entry="t.py"), 0)
    env = pid1_env.worker_env({}, topo, tmp_path, tmp_path / "code", tmp_path / "m")
    assert (env.get("FI_PROVIDER"), env.get("FI_EFA_USE_DEVICE_RDMA")) == ("efa", "1")


def test_no_container_path_is_spelled_outside_the_contract() -> None:
    """No string literal outside the contract is a container path (prose such as help text may name /opt/ml)."""
    import ast

    package = Path(container.__file__).parents[1]
    offenders = []
    for path in package.rglob("*.py"):
        if path.parent.name == "contract":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                    and node.value.startswith("/opt/ml"):
                offenders.append(f"{path.relative_to(package)}:{node.lineno}")
    assert offenders == []


def test_processes_per_node_are_worked_out_in_one_place() -> None:
    """Local mode's variable, else the job spec's, else one per GPU, else one (PID 1 and local mode ask the same)."""
    from sm_dist.contract.container import NPROC_ENV, nproc_per_node

    assert nproc_per_node({NPROC_ENV: "2"}, 3, 8) == 2
    assert nproc_per_node({}, 3, 8) == 3
    assert nproc_per_node({}, None, 8) == 8
    assert nproc_per_node({}, None) == 1


def test_the_lambdas_copy_of_the_tensorboard_path_is_the_containers() -> None:
    """The chain stack's Lambda carries contract/chain.py, not this module: its one copy of a container path
    must stay the contract's."""
    from sm_dist.contract.chain import TENSORBOARD_DEFAULT_PATH

    assert TENSORBOARD_DEFAULT_PATH == container.TENSORBOARD_LOCAL_PATH
