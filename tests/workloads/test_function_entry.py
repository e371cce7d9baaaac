"""run_function: a user's "module:function" under the runtime, in one process (a 2-rank torchrun
run is in test_entrypoints.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sm_dist.jobspec import JOB_SPEC_ENV, JobSpec
from sm_dist.runtime.function_entry import resolve_function, run
from sm_dist.runtime.model_output import load_model

USER_CODE = '''
import json
import torch
from sm_dist.runtime.models.cnn import SimpleCNN
from sm_dist.runtime.models.synthetic import MnistLike
from sm_dist.runtime.train import Workload, adamw, classification_loss

def workload(ctx, hparams):
    print("HPARAMS " + json.dumps({"seed": ctx.seed, "strategy": str(ctx.strategy.name), **hparams}))
    return Workload(build_model=SimpleCNN, dataset=MnistLike(hparams["size"], seed=ctx.seed),
                    loss=classification_loss, optimizer=adamw(hparams.get("lr", 1e-3)))

def trained(ctx, hparams):
    model = ctx.wrap_model(torch.nn.Linear(3, 2))
    return model, 4

def one_arg(ctx):
    return None
'''


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request) -> str:
    """A user module in the working directory (a fresh name per test: imports are cached)."""
    name = "user_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")
    (tmp_path / f"{name}.py").write_text(USER_CODE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _hparams(out: str) -> dict:
    line = next(line for line in out.splitlines() if line.startswith("HPARAMS "))
    return json.loads(line[len("HPARAMS "):])


def test_workload_is_trained_with_the_common_flags(user_module: str, tmp_path: Path, capsys) -> None:
    code = run([f"{user_module}:workload", "--steps", "2", "--batch_size", "8", "--size", "32", "--lr", "0.01",
                "--model-dir", str(tmp_path / "m"), "--note", "x"])
    out = capsys.readouterr().out
    assert code == 0
    hp = _hparams(out)
    assert (hp["size"], hp["lr"], hp["note"], hp["steps"], hp["batch_size"]) == (32, 0.01, "x", 2, 8)
    assert "[sm_dist] final step=2 model_sha256=" in out
    assert "fc2.weight" in load_model(tmp_path / "m" / "model.pt")


def test_returned_model_is_written_with_its_step(user_module: str, tmp_path: Path, capsys) -> None:
    assert run([f"{user_module}:trained", "--model-dir", str(tmp_path / "m")]) == 0
    assert "[sm_dist] final step=4 model_sha256=" in capsys.readouterr().out
    assert sorted(load_model(tmp_path / "m" / "model.pt")) == ["bias", "weight"]


def test_entry_and_defaults_from_the_job_spec(user_module: str, tmp_path: Path, monkeypatch, capsys) -> None:
    spec = JobSpec(entry=f"{user_module}:workload", strategy="ddp", seed=11, hyperparameters={"size": 16})
    monkeypatch.setenv(JOB_SPEC_ENV, str(spec.write(tmp_path)))
    assert run(["--size", "16", "--steps", "1", "--batch-size", "8", "--model-dir", str(tmp_path / "m")]) == 0
    assert _hparams(capsys.readouterr().out)["seed"] == 11


@pytest.mark.parametrize(
    ("entry", "message"),
    [("train.py", "pkg.module:function"), ("nomodule_xyz:main", "not found"), ("{mod}:missing", "no function"),
     ("{mod}:one_arg", "def one_arg(ctx, hparams)")],
)
def test_bad_entries_are_one_line_errors(user_module: str, capsys, entry: str, message: str) -> None:
    assert run([entry.format(mod=user_module), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("run_function: error: entry=") and message in err


def test_missing_entry_without_job_spec(capsys) -> None:
    assert run(["--steps", "1"]) == 2
    assert "first argument" in capsys.readouterr().err


def test_resolve_function_imports_from_cwd(user_module: str) -> None:
    assert resolve_function(f"{user_module}:workload").__name__ == "workload"
