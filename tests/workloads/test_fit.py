"""The shared training loop in one process (world size 1, gloo): output, determinism, accumulation,
checkpoint resume. Multi-rank runs are in test_entrypoints.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sm_dist import runtime
from sm_dist.contract.log_lines import FinalLine, parse_metrics
from sm_dist.errors import ConfigError
from sm_dist.runtime.checkpoint import Checkpointer
from sm_dist.runtime.model_output import load_model, state_dict_sha256
from sm_dist.runtime.models.cnn import SimpleCNN
from sm_dist.runtime.models.synthetic import MnistLike
from sm_dist.runtime.schedules import lr_schedule
from sm_dist.runtime.train import (
    TrainConfig,
    Workload,
    adamw,
    classification_loss,
    fit,
    steps_per_epoch,
)

from .conftest import final_lines


def _cnn(dropout: float = 0.0, size: int = 64, schedule: str = "constant") -> Workload:
    return Workload(build_model=lambda: SimpleCNN(dropout=dropout), dataset=MnistLike(size, seed=0),
                    loss=classification_loss, optimizer=adamw(1e-3), scheduler=lr_schedule(schedule, warmup_steps=2))


def _fit(tmp: Path, *, seed: int = 0, ckpt: Path | None = None, workload: Workload | None = None,
         async_checkpoint: bool = False, **cfg):
    config = TrainConfig(model_dir=str(tmp / "model"), **cfg)
    with runtime.init("ddp", "fp32", seed, environ={}) as ctx:
        checkpointer = None
        if ckpt is not None:
            checkpointer = Checkpointer(ctx, mode="local", local_path=str(ckpt), interval_steps=2, keep=2,
                                        async_checkpoint=async_checkpoint)
        return fit(ctx, workload or _cnn(), config, checkpointer)


def test_fit_prints_metrics_and_writes_a_plain_state_dict(tmp_path: Path, capsys) -> None:
    result = _fit(tmp_path, steps=3, batch_size=16)
    out = capsys.readouterr().out
    metric_steps = [parse_metrics(line)["step"] for line in out.splitlines() if parse_metrics(line)]
    assert metric_steps == [1.0, 2.0, 3.0]
    assert final_lines(out) == [FinalLine(3, result.model_sha256)]
    weights = load_model(result.model_path)
    assert not any(k.startswith("module.") for k in weights)
    SimpleCNN().load_state_dict(weights)  # strict: same keys as the unwrapped model
    assert state_dict_sha256(weights) == result.model_sha256


def test_same_seed_same_model_other_seed_differs(tmp_path: Path) -> None:
    a = _fit(tmp_path / "a", steps=2, batch_size=8)
    b = _fit(tmp_path / "b", steps=2, batch_size=8)
    c = _fit(tmp_path / "c", steps=2, batch_size=8, seed=1)
    assert a.model_sha256 == b.model_sha256 != c.model_sha256


def test_gradient_accumulation_matches_the_larger_batch(tmp_path: Path) -> None:
    accum = _fit(tmp_path / "a", steps=3, batch_size=8, grad_accum=2, clip=None)
    big = _fit(tmp_path / "b", steps=3, batch_size=16, clip=None)
    wa, wb = load_model(accum.model_path), load_model(big.model_path)
    assert accum.model_sha256 != big.model_sha256  # summed in another order, so not bitwise
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=1e-4, atol=1e-5)


def test_epochs_bound_the_steps(tmp_path: Path) -> None:
    result = _fit(tmp_path, epochs=2, batch_size=16)
    assert result.step == 2 * steps_per_epoch(64, 1, TrainConfig(batch_size=16)) == 8
    assert result.epoch == 2


@pytest.mark.parametrize("async_checkpoint", [False, True], ids=["blocking", "async"])
def test_resume_across_epochs_with_dropout_equals_uninterrupted(tmp_path: Path, capsys, async_checkpoint: bool) -> None:
    work = _cnn(dropout=0.3)  # dropout: RNG state; warmup: scheduler state (a fresh one would warm up again)
    straight = _fit(tmp_path / "s", steps=9, batch_size=16, workload=work)
    first = _fit(tmp_path / "r", steps=5, batch_size=16, workload=work, ckpt=tmp_path / "ck", async_checkpoint=async_checkpoint)
    assert first.step == 5
    capsys.readouterr()
    resumed = _fit(tmp_path / "r", steps=9, batch_size=16, workload=work, ckpt=tmp_path / "ck",
                   async_checkpoint=async_checkpoint)
    assert "[sm_dist] resumed step=5 epoch=1" in capsys.readouterr().out
    assert resumed.model_sha256 == straight.model_sha256


def test_finished_run_resumes_at_its_end(tmp_path: Path, capsys) -> None:
    done = _fit(tmp_path, steps=3, batch_size=16, ckpt=tmp_path / "ck")
    capsys.readouterr()
    again = _fit(tmp_path, steps=3, batch_size=16, ckpt=tmp_path / "ck")
    assert again.step == 3 and again.model_sha256 == done.model_sha256
    assert not [line for line in capsys.readouterr().out.splitlines() if parse_metrics(line)]  # no step trained


def test_batch_larger_than_a_ranks_share_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _fit(tmp_path, steps=1, batch_size=65)
    assert err.value.field == "batch_size" and "<= 64" in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"batch_size": 0}, "batch_size"), ({"steps": 0}, "steps"), ({"epochs": None}, "epochs"),
     ({"clip": -1.0}, "clip"), ({"grad_accum": 0}, "grad_accum")],
)
def test_train_config_names_the_bad_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        TrainConfig(**kwargs)
    assert err.value.field == field


def test_bad_learning_rate() -> None:
    with pytest.raises(ConfigError) as err:
        adamw(0.0)
    assert err.value.field == "lr"


@pytest.mark.parametrize("strategy", ["fsdp", "zero1"])
def test_gpt_resume_under_sharded_strategies(tmp_path: Path, strategy: str) -> None:
    """The DCP (fsdp) and consolidated (zero1) checkpoint paths through the loop, with dropout."""
    from sm_dist.runtime.models.gpt import GPT, GPTConfig
    from sm_dist.runtime.models.synthetic import TokenWindows, synthetic_tokens
    from sm_dist.runtime.train import next_token_loss

    cfg = GPTConfig(n_layer=2, n_embd=32, n_head=2, seq_len=16, dropout=0.1)
    work = Workload(build_model=lambda: GPT(cfg), dataset=TokenWindows(synthetic_tokens(2000, vocab_size=256), 16),
                    loss=next_token_loss, optimizer=adamw(1e-3))

    def run(tag: str, steps: int, ckpt: Path | None = None):
        config = TrainConfig(steps=steps, batch_size=8, model_dir=str(tmp_path / tag))
        with runtime.init(strategy, "fp32", 0, environ={}) as ctx:
            checkpointer = Checkpointer(ctx, mode="local", local_path=str(ckpt), interval_steps=2) if ckpt else None
            return fit(ctx, work, config, checkpointer)

    straight = run("s", 6)
    run("r", 3, tmp_path / "ck")
    assert run("r", 6, tmp_path / "ck").model_sha256 == straight.model_sha256


def test_async_checkpoint_of_the_last_step_is_not_written_twice(tmp_path: Path, caplog) -> None:
    caplog.set_level("INFO", logger="sm_dist.runtime.checkpoint")
    _fit(tmp_path, steps=4, batch_size=16, ckpt=tmp_path / "ck", async_checkpoint=True)
    commits = [r.getMessage() for r in caplog.records if r.getMessage().startswith("checkpoint step")]
    assert len(commits) == 2 and "step 4" in commits[-1]
    assert "replacing" not in caplog.text
