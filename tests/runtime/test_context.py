"""init(): defaults from the job spec, explicit arguments win, seeding, teardown."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from sm_dist import runtime
from sm_dist.errors import ConfigError
from sm_dist.jobspec import JobSpec
from sm_dist.vocab import Precision


def test_job_spec_gives_defaults_and_explicit_arguments_win(tmp_path: Path) -> None:
    spec = JobSpec(entry="train.py", strategy="fsdp", precision="bf16", seed=7).write(tmp_path)
    environ = {"SM_DIST_JOB_SPEC": str(spec)}
    with runtime.init(environ=environ) as ctx:
        assert (ctx.strategy.name, ctx.precision, ctx.seed) == ("fsdp", Precision.BF16, 7)
        assert torch.equal(torch.rand(3), _rand_after_seed(7))  # seeded by the spec
        assert dist.is_initialized() and ctx.world_size == 1 and ctx.is_main
    assert not dist.is_initialized()  # the context manager tore the group down
    with runtime.init(strategy="zero1", precision="amp", seed=1, environ=environ) as ctx:
        assert (ctx.strategy.name, ctx.precision, ctx.seed) == ("zero1", Precision.AMP, 1)
    with runtime.init(environ={}) as ctx:
        assert (ctx.strategy.name, ctx.precision, ctx.seed) == ("ddp", Precision.FP32, 0)


def _rand_after_seed(seed: int) -> torch.Tensor:
    state = torch.get_rng_state()
    torch.manual_seed(seed)
    value = torch.rand(3)
    torch.set_rng_state(state)
    return value


def test_bad_values_name_the_field() -> None:
    with pytest.raises(ConfigError, match="precision='fp8'"):
        runtime.init(precision="fp8", environ={})
    with pytest.raises(ConfigError, match="seed='7'"):
        runtime.init(seed="7", environ={})
    assert not dist.is_initialized()


def test_sync_batchnorm_is_refused_on_cpu() -> None:
    with runtime.init(environ={}, sync_batchnorm=True) as ctx:
        with pytest.raises(ConfigError, match="sync_batchnorm"):
            ctx.wrap_model(torch.nn.BatchNorm1d(4))


def test_single_process_training_and_state_dict_without_module_prefix() -> None:
    with runtime.init(strategy="ddp", environ={}) as ctx:
        model = ctx.wrap_model(torch.nn.Sequential(torch.nn.Linear(4, 2)))
        opt = ctx.build_optimizer(model, lambda p: torch.optim.SGD(p, lr=0.1))
        with ctx.autocast():
            loss = model(torch.ones(2, 4)).sum()
        ctx.backward(loss)
        ctx.step(opt)
        state = ctx.state_dict(model, opt)
    assert sorted(state["model"]) == ["0.bias", "0.weight"]
    plain = torch.nn.Sequential(torch.nn.Linear(4, 2))
    plain.load_state_dict(state["model"])


@pytest.mark.parametrize("strategy", ["ddp", "zero1"])
def test_mixed_precision_master_weights_follow_an_lr_scheduler(strategy: str) -> None:
    with runtime.init(strategy=strategy, precision="mixed", environ={}) as ctx:
        model = ctx.wrap_model(torch.nn.Linear(4, 2))
        opt = ctx.build_optimizer(model, lambda p: torch.optim.AdamW(p, lr=0.1))
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        assert next(model.parameters()).dtype == torch.bfloat16  # half working copy
        before = model.module.weight.detach().float().clone()
        for _ in range(2):
            with ctx.autocast():
                loss = model(torch.ones(3, 4)).float().pow(2).sum()
            ctx.backward(loss)
            ctx.step(opt)
            opt.zero_grad()
            sched.step()
        assert opt.param_groups[0]["lr"] == pytest.approx(0.025)
        assert opt.inner.param_groups[0]["lr"] == pytest.approx(0.05)  # what the fp32 optimizer used in step 2
        assert all(m.dtype == torch.float32 for g in opt.inner.param_groups for m in g["params"])
        assert not torch.equal(before, model.module.weight.detach().float())


def test_master_weight_partition_is_largest_first_and_deterministic() -> None:
    from sm_dist.runtime.strategies.master_weights import partition

    sizes = [10, 100, 40, 90, 30, 50]
    owners = partition(sizes, 2)
    loads = [sum(s for s, o in zip(sizes, owners) if o == r) for r in range(2)]
    assert loads == [170, 150]  # 100|90, 40|50, 30 -> lighter rank 0 (tie), 10 -> rank 1
    assert partition(sizes, 2) == owners and partition(sizes, 1) == [0] * 6


@pytest.mark.parametrize(("strategy", "option"), [
    ("zero2", {"reshard_after_forward": True}),  # would silently make zero2 an fsdp run
    ("ddp", {"reshard_after_forward": False}),
    ("ddp", {"shard_units": (torch.nn.Linear,)}),
    ("zero1", {"shard_units": (torch.nn.Linear,)}),
])
def test_options_of_other_strategies_are_refused(strategy: str, option: dict) -> None:
    (name, value), = option.items()
    with pytest.raises(ConfigError, match=rf"{name}=.*applies to .* only, not strategy={strategy}"):
        runtime.init(strategy=strategy, environ={}, **option)
    assert not dist.is_initialized()  # refused before joining a process group


def test_options_are_accepted_where_they_apply() -> None:
    with runtime.init(strategy="fsdp", environ={}, reshard_after_forward=False) as ctx:
        assert ctx.strategy.reshard_after_forward is False
    with runtime.init(strategy="zero2", environ={}, shard_units=(torch.nn.Linear,)) as ctx:
        assert ctx.strategy.shard_units == (torch.nn.Linear,)


def test_existing_group_of_another_size_is_a_runtime_env_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from sm_dist.errors import RuntimeEnvError, SmDistError
    from sm_dist.runtime import context

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 4)
    env = context.detect_env({}, num_gpus=0)
    with pytest.raises(RuntimeEnvError, match="world size 4, but WORLD_SIZE=1") as info:
        context._init_process_group(env, 1.0, agent_store=False)
    assert isinstance(info.value, SmDistError) and not isinstance(info.value, ConfigError)
