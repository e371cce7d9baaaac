"""Every entrypoint trains a few steps under `python -m torch.distributed.run --nproc_per_node=2`
(gloo, CPU), writes its model, and is deterministic; plus a plain single-process run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from _harness import start, start_ranks

from sm_dist.contract.log_lines import parse_metrics
from sm_dist.runtime.model_output import SHA_FILENAME, load_model, state_dict_sha256
from sm_dist.runtime.models.gpt import GPT, GPTConfig
from sm_dist.runtime.models.resnet import ResNet18

from .conftest import ENTRYPOINTS, Run, parse_run, worker_env

pytestmark = pytest.mark.slow


def _check_model(run, model_dir: Path, steps: int) -> dict[str, torch.Tensor]:
    assert run.returncode == 0, run.out[-3000:]
    assert run.step == steps
    metric_steps = [parse_metrics(line)["step"] for line in run.out.splitlines() if parse_metrics(line)]
    assert metric_steps == [float(s) for s in range(1, steps + 1)]
    weights = load_model(model_dir / "model.pt")
    assert not any(name.startswith("module.") for name in weights)
    assert state_dict_sha256(weights) == run.sha == (model_dir / SHA_FILENAME).read_text().strip()
    return weights


def run_one(argv: list[str]) -> tuple[int, str]:
    """One process, no launcher: its exit code and everything it printed."""
    group = start(argv, worker_env())
    (code,) = group.wait()
    return code, group.output


def _srun(port: int, args: list[str], tasks: int = 2) -> Run:
    """What `srun -n 2 python cnn.py ...` gives each task on one node: SLURM_* variables, no torchrun."""
    envs = [worker_env({"SLURM_NTASKS": str(tasks), "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank),
                        "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "localhost", "SLURM_NTASKS_PER_NODE": str(tasks),
                        "SLURM_JOB_NAME": "train", "SLURM_JOB_ID": "4242", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(port)}) for rank in range(tasks)]
    group = start_ranks([sys.executable, str(ENTRYPOINTS / "cnn.py"), *args], envs)
    return parse_run(max(group.wait()), group.output)


def test_cnn_same_seed_same_model_under_torchrun_and_slurm(torchrun, port_factory, tmp_path: Path) -> None:
    args = ["--steps", "3", "--batch-size", "16", "--seed", "7"]
    a = torchrun("cnn.py", *args, "--model-dir", str(tmp_path / "a"))
    b = _srun(port_factory(), [*args, "--model-dir", str(tmp_path / "b")])
    _check_model(a, tmp_path / "a", 3)
    _check_model(b, tmp_path / "b", 3)
    assert a.sha == b.sha


def test_cnn_single_process(tmp_path: Path) -> None:
    argv = [sys.executable, str(ENTRYPOINTS / "cnn.py"), "--steps", "3", "--batch-size", "16", "--seed", "8",
            "--model-dir", str(tmp_path / "m")]
    run = parse_run(*run_one(argv))
    _check_model(run, tmp_path / "m", 3)


@pytest.mark.parametrize("strategy", ["fsdp", "zero1"])
def test_resnet_sharded_strategies(torchrun, tmp_path: Path, strategy: str) -> None:
    # SageMaker's hyperparameter style: underscores, every value a string.
    run = torchrun("resnet.py", "--strategy", strategy, "--steps", "2", "--batch_size", "4", "--width", "4",
                   "--dataset_size", "32", "--resolution", "32", "--model_dir", str(tmp_path / "m"))
    weights = _check_model(run, tmp_path / "m", 2)
    ResNet18(num_classes=10, width=4, small_input=True).load_state_dict(weights)


@pytest.mark.parametrize("strategy", ["fsdp", "zero1"])
def test_gpt_sharded_strategies_on_local_text(torchrun, tmp_path: Path, strategy: str) -> None:
    text = tmp_path / "corpus"
    text.mkdir()
    (text / "a.txt").write_text("the quick brown fox jumps over the lazy dog. " * 40, encoding="utf-8")
    run = torchrun("gpt.py", "--strategy", strategy, "--steps", "2", "--batch-size", "4", "--n-layer", "2",
                   "--n-embd", "32", "--n-head", "2", "--seq-len", "32", "--text", str(text),
                   "--model-dir", str(tmp_path / "m"))
    weights = _check_model(run, tmp_path / "m", 2)
    model = GPT(GPTConfig(n_layer=2, n_embd=32, n_head=2, seq_len=32))
    model.load_state_dict(weights)
    assert torch.equal(weights["wte.weight"], weights["lm_head.weight"])  # tied, also after sharding


def test_bad_flag_is_one_line_and_exit_2(tmp_path: Path) -> None:
    argv = [sys.executable, str(ENTRYPOINTS / "gpt.py"), "--n-head", "5", "--steps", "1"]
    code, output = run_one(argv)
    assert code == 2
    assert output.strip().splitlines()[-1].startswith("gpt: error: n_head=5")
    assert "Traceback" not in output


def test_run_function_under_torchrun(torchrun, tmp_path: Path) -> None:
    (tmp_path / "mytrain.py").write_text(
        "from sm_dist.runtime.models.cnn import SimpleCNN\n"
        "from sm_dist.runtime.models.synthetic import MnistLike\n"
        "from sm_dist.runtime.train import Workload, adamw, classification_loss\n"
        "def main(ctx, hp):\n"
        "    return Workload(build_model=SimpleCNN, dataset=MnistLike(hp['size'], seed=ctx.seed),\n"
        "                    loss=classification_loss, optimizer=adamw(hp['lr']))\n",
        encoding="utf-8",
    )
    run = torchrun("run_function.py", "mytrain:main", "--steps", "2", "--size", "64", "--lr", "0.003",
                   "--batch-size", "8", "--model-dir", str(tmp_path / "m"), cwd=tmp_path)
    _check_model(run, tmp_path / "m", 2)
