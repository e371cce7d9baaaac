"""PID 1, run for real: subprocesses with a fake /opt/ml tree and torchrun on CPU."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
from _harness import Group, child_env, start, wait_until

from sm_dist.container import pid1, pid1_env
from sm_dist.jobspec import EXIT_INTERRUPTED, JobSpec

REPO = Path(__file__).resolve().parents[2]

# A torchrun-compatible script: records what it saw; optionally waits for SIGTERM and then
# "commits a checkpoint" by writing the interrupt marker, as the runtime does.
SCRIPT = r'''
import json, os, signal, sys, time
out = os.path.join(os.environ["OUT_DIR"], "rank%s.json" % os.environ["RANK"])
record = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SM_DIST_JOB_SPEC",
          "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "SM_CURRENT_HOST", "SM_HOSTS", "SM_CHANNEL_TRAIN")}
record["argv"] = sys.argv[1:]
mode = os.environ.get("MODE", "exit")
if mode == "fail":
    raise SystemExit("boom: the script failed on purpose")
if mode != "exit":
    stop = []
    signal.signal(signal.SIGTERM, lambda s, f: stop.append(s))
    open(out + ".ready", "w").close()
    while not stop:
        time.sleep(0.05)
    record["sigterm"] = True
    if mode == "commit" and os.environ["RANK"] == "0":
        with open(os.environ["SM_DIST_INTERRUPT_MARKER"], "w") as f:
            f.write("7")
with open(out, "w") as f:
    json.dump(record, f)
sys.exit(143 if mode != "exit" else 0)
'''


def make_host(root: Path, host: str, hosts: list[str], spec: JobSpec) -> Path:
    """One emulated host: /opt/ml/input/{config,data/code} with the script and the job spec."""
    config = root / "input" / "config"
    code = root / "input" / "data" / "code"
    config.mkdir(parents=True)
    code.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": host, "hosts": hosts}))
    (config / "inputdataconfig.json").write_text(json.dumps({"code": {}, "train": {}}))
    (code / "train.py").write_text(SCRIPT)
    spec.write(code)
    return root


def pid1_env_for(root: Path, port: int, out: Path, mode: str = "exit") -> dict[str, str]:
    """What the launcher of the emulated host at `root` gets (the harness strips the machine's launcher variables)."""
    return child_env({"SM_DIST_OPT_ML": str(root), "SM_DIST_RDZV_HOST": "127.0.0.1", "SM_DIST_RDZV_PORT": str(port),
                      "OUT_DIR": str(out), "MODE": mode, "PYTHONPATH": str(REPO), "SM_NUM_GPUS": "0"})


PID1 = [sys.executable, "-m", "sm_dist.container.pid1"]


def test_sagemaker_host_order_and_rank(tmp_path: Path) -> None:
    """Hosts sorted as text, as SageMaker and torchrun's c10d order them (docs/PLATFORM.md §1.8)."""
    spec = JobSpec(entry="train.py")
    root = make_host(tmp_path, "algo-2", ["algo-10", "algo-2", "algo-1"], spec)
    topo = pid1_env.read_topology(root, {}, spec, num_gpus=8)
    assert topo.hosts == ("algo-1", "algo-10", "algo-2")
    assert (topo.node_rank, topo.rdzv_host, topo.rdzv_port, topo.nproc_per_node) == (2, "algo-1", 29400, 8)
    argv = pid1_env.torchrun_argv(topo, JobSpec(entry="train.py", max_restarts=2, hyperparameters={"lr": 0.1}), root / "input/data/code", "job")
    assert "--rdzv-endpoint=algo-1:29400" in argv and "--rdzv-conf=is_host=false,join_timeout=1800" in argv
    assert "--max-restarts=2" in argv and "--nnodes=3" in argv and "--local-addr=algo-2" in argv
    assert argv[-3:] == [str(root / "input/data/code/train.py"), "--lr", "0.1"]


def test_network_environment_follows_the_instance(tmp_path: Path) -> None:
    spec = JobSpec(entry="train.py")
    root = make_host(tmp_path, "algo-1", ["algo-1", "algo-2"], spec)
    config = root / "input/config/resourceconfig.json"
    config.write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1", "algo-2"],
                                  "current_instance_type": "ml.p4d.24xlarge", "network_interface_name": "eth1"}))
    topo = pid1_env.read_topology(root, {}, spec, num_gpus=8)
    env = pid1_env.worker_env({"FI_PROVIDER": "mine"}, topo, root, root / "input/data/code", root / "m")
    assert env["NCCL_SOCKET_IFNAME"] == "eth1" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env["FI_PROVIDER"] == "mine"  # the container's own settings win
    local = pid1_env.read_topology(root, {"SM_DIST_RDZV_HOST": "127.0.0.1"}, spec, num_gpus=0)
    assert (local.rdzv_host, local.local_addr) == ("127.0.0.1", "127.100.100.100")


def test_emulated_hosts_get_loopback_addresses_that_sort_in_host_order(tmp_path: Path) -> None:
    """torchrun ranks hosts by sorting their addresses as text; without host names, local mode's
    addresses must sort in SageMaker's host order (also text: algo-10 before algo-2), rank 0 on algo-1."""
    spec = JobSpec(entry="train.py")
    hosts = sorted(f"algo-{i}" for i in range(1, 13))
    addrs = []
    for host in hosts:
        root = make_host(tmp_path / host, host, hosts, spec)
        addrs.append(pid1_env.read_topology(root, {"SM_DIST_RDZV_HOST": "127.0.0.1"}, spec, 0).local_addr)
    assert addrs == sorted(addrs) and len(set(addrs)) == len(hosts)
    assert hosts[:3] == ["algo-1", "algo-10", "algo-11"] and addrs[0] == "127.100.100.100"
    assert addrs[11] == "127.100.100.111"
    assert pid1_env._emulated_addr("127.0.0.1", 12345) == "127.101.123.145"
    # an explicit address wins; a non-loopback rendezvous host is used as given
    root = make_host(tmp_path / "x", "algo-2", hosts, spec)
    assert pid1_env.read_topology(root, {"SM_DIST_RDZV_HOST": "127.0.0.1", "SM_DIST_LOCAL_ADDR": "10.0.0.5"},
                                      spec, 0).local_addr == "10.0.0.5"
    assert pid1_env.read_topology(root, {"SM_DIST_RDZV_HOST": "10.0.0.9"}, spec, 0).local_addr == "10.0.0.9"


def test_nproc_precedence(tmp_path: Path) -> None:
    root = make_host(tmp_path, "algo-1", ["algo-1"], JobSpec(entry="train.py"))
    assert pid1_env.read_topology(root, {}, JobSpec(entry="t.py"), 0).nproc_per_node == 1
    assert pid1_env.read_topology(root, {}, JobSpec(entry="t.py", nproc_per_node=3), 8).nproc_per_node == 3
    assert pid1_env.read_topology(root, {"SM_DIST_NPROC_PER_NODE": "2"}, JobSpec(entry="t.py", nproc_per_node=3), 8).nproc_per_node == 2


def test_function_entry_runs_through_run_function(tmp_path: Path) -> None:
    argv = pid1_env.script_argv(JobSpec(entry="pkg.mod:main"), tmp_path)
    assert argv[0].endswith("run_function.py") and argv[1] == "pkg.mod:main"


@pytest.mark.slow
def test_two_hosts_form_one_job(tmp_path: Path, port_factory) -> None:
    spec = JobSpec(entry="train.py", hyperparameters={"epochs": 2, "name": "x y"})
    hosts = ["algo-1", "algo-2"]
    port, out = port_factory(), tmp_path / "out"
    out.mkdir()
    group = Group([PID1] * 2, [pid1_env_for(make_host(tmp_path / h, h, hosts, spec), port, out) for h in hosts])
    assert group.wait() == [0, 0], group.report()
    seen = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert {s["WORLD_SIZE"] for s in seen} == {"2"}
    assert sorted(s["SM_CURRENT_HOST"] for s in seen) == hosts
    assert seen[0]["argv"] == ["--epochs", "2", "--name", "x y"]
    assert seen[0]["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert seen[0]["SM_CHANNEL_TRAIN"].endswith("input/data/train")
    assert JobSpec.from_json(Path(seen[0]["SM_DIST_JOB_SPEC"]).read_text()) == spec


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["commit", "nocommit"])
def test_sigterm_reaches_the_script(tmp_path: Path, port_factory, mode: str) -> None:
    root = make_host(tmp_path / "algo-1", "algo-1", ["algo-1"], JobSpec(entry="train.py"))
    out = tmp_path / "out"
    out.mkdir()
    group = start(PID1, pid1_env_for(root, port_factory(), out, mode=mode))
    wait_until((out / "rank0.json.ready").exists, group, what="the script to install its SIGTERM handler")
    group.procs[0].send_signal(signal.SIGTERM)
    [code] = group.wait()
    assert json.loads((out / "rank0.json").read_text())["sigterm"] is True
    failure = root / "output" / "failure"
    if mode == "commit":
        assert code == EXIT_INTERRUPTED and not failure.exists()
    else:
        assert code not in (0, EXIT_INTERRUPTED)
        assert "stopped by SIGTERM before a checkpoint was committed" in failure.read_text()


@pytest.mark.slow
def test_failure_is_reported(tmp_path: Path, port_factory) -> None:
    root = make_host(tmp_path / "algo-1", "algo-1", ["algo-1"], JobSpec(entry="train.py"))
    [code] = start(PID1, pid1_env_for(root, port_factory(), tmp_path, mode="fail")).wait()
    text = (root / "output" / "failure").read_text()
    assert code == 1
    assert len(text) <= pid1.FAILURE_MAX_CHARS and "boom" in text


def test_missing_resourceconfig_writes_failure(tmp_path: Path) -> None:
    root = make_host(tmp_path, "algo-1", ["algo-1"], JobSpec(entry="train.py"))
    (root / "input/config/resourceconfig.json").unlink()
    assert pid1.run({"SM_DIST_OPT_ML": str(root)}) == 2
    assert "resourceconfig.json" in (root / "output" / "failure").read_text()


def test_long_failure_keeps_the_end(tmp_path: Path) -> None:
    pid1.write_failure(tmp_path, "x" * 5000 + "END")
    text = (tmp_path / "output" / "failure").read_text()
    assert len(text) == pid1.FAILURE_MAX_CHARS and text.endswith("END")
