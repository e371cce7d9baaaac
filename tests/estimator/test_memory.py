"""Memory accounting: the ZeRO paper's Table 1 and what the sm_dist runtime holds."""

from __future__ import annotations

import pytest

from sm_dist.errors import ConfigError
from sm_dist.estimator.memory import (
    CUDA_CONTEXT_BYTES,
    memory_breakdown,
    not_runnable_reason,
    persistent_bytes_per_param,
    zero_stage_memory,
)

PSI = 7_500_000_000
GPUS = (4, 16, 64, 256, 1024)
# Rajbhandari et al. 2020, Table 1: 7.5B parameters, K=12, GB = 1e9 bytes
TABLE_1 = {
    1: (52.5, 35.6, 31.4, 30.4, 30.1),
    2: (41.3, 21.6, 16.6, 15.4, 15.1),
    3: (30.0, 7.5, 1.88, 0.47, 0.12),
}


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_paper_table_1(stage: int) -> None:
    got = [zero_stage_memory(PSI, 12, n, stage).total / 1e9 for n in GPUS]
    for value, want in zip(got, TABLE_1[stage]):
        # the paper rounds to 3 significant digits
        assert value == pytest.approx(want, abs=0.051 if want >= 1 else 0.006)


def test_zero_paper_baseline_is_120_gb() -> None:
    for n in GPUS:
        assert zero_stage_memory(PSI, 12, n, 0).total == 120 * 10**9
    with pytest.raises(ConfigError):
        zero_stage_memory(PSI, 12, 4, 4)


# (strategy, precision) -> bytes per parameter (params, grads, optimizer) before sharding
LAYOUT = {
    ("ddp", "fp32"): (4, 4, 8), ("ddp", "amp"): (4, 4, 8), ("ddp", "bf16"): (2, 2, 4), ("ddp", "mixed"): (2, 2, 12),
    ("zero1", "mixed"): (2, 2, 12), ("zero1", "fp32"): (4, 4, 8),
    ("fsdp", "fp32"): (4, 4, 8), ("fsdp", "bf16"): (2, 2, 4), ("fsdp", "mixed"): (4, 4, 8),
    ("zero2", "mixed"): (4, 4, 8), ("hsdp", "amp"): (4, 4, 8),
}


@pytest.mark.parametrize(("strategy", "precision"), sorted(LAYOUT))
def test_bytes_per_param_match_the_contract(strategy: str, precision: str) -> None:
    assert persistent_bytes_per_param(strategy, precision) == LAYOUT[(strategy, precision)]


@pytest.mark.parametrize("world", [2, 4])
def test_sharding_per_strategy(world: int) -> None:
    psi = 10_000_000
    ddp = memory_breakdown(psi, "ddp", "mixed", world, world)
    assert (ddp.params, ddp.grads, ddp.optimizer) == (2 * psi, 2 * psi, 12 * psi)
    zero1 = memory_breakdown(psi, "zero1", "mixed", world, world)
    assert (zero1.params, zero1.grads, zero1.optimizer) == (2 * psi, 2 * psi, 12 * psi // world)
    for strategy in ("zero2", "fsdp"):
        mb = memory_breakdown(psi, strategy, "fp32", world, world)
        assert (mb.params, mb.grads, mb.optimizer) == (4 * psi // world, 4 * psi // world, 8 * psi // world)
    assert memory_breakdown(psi, "fsdp", "mixed", world, world).params == 4 * psi // world


def test_hsdp_shards_inside_an_instance_only() -> None:
    psi = 80_000_000
    hsdp = memory_breakdown(psi, "hsdp", "fp32", world_size=16, gpus_per_instance=8)
    fsdp = memory_breakdown(psi, "fsdp", "fp32", world_size=16, gpus_per_instance=8)
    assert hsdp.params == 4 * psi // 8 and fsdp.params == 4 * psi // 16


def test_zero2_holds_the_unsharded_model_between_forward_and_backward() -> None:
    psi = 100_000_000
    zero2 = memory_breakdown(psi, "zero2", "mixed", 4, 4, unit_params=psi // 10)
    fsdp = memory_breakdown(psi, "fsdp", "mixed", 4, 4, unit_params=psi // 10)
    parts = dict(zero2.other_parts)
    assert parts["unsharded_params_fwd_to_bwd"] == 2 * psi  # bf16 working copy of every parameter
    assert dict(fsdp.other_parts)["unsharded_units"] == 2 * (psi // 10) * 2
    assert zero2.other > fsdp.other
    assert zero2.total == zero2.params + zero2.grads + zero2.optimizer + zero2.activations + zero2.other


def test_other_holds_context_and_communication() -> None:
    single = memory_breakdown(1_000_000, "ddp", "fp32", 1, 1)
    assert single.other == CUDA_CONTEXT_BYTES  # one process: no NCCL, no bucket copy
    multi = memory_breakdown(1_000_000, "ddp", "fp32", 2, 2)
    assert dict(multi.other_parts)["ddp_bucket_grad_copy"] == 4_000_000
    amp = memory_breakdown(1_000_000, "ddp", "amp", 1, 1)
    assert dict(amp.other_parts)["autocast_weight_cache"] == 2_000_000


def test_dp_across_instances_is_not_runnable() -> None:
    assert not_runnable_reason("dp", 8, 8) is None
    assert "one instance" in not_runnable_reason("dp", 16, 8)
    with pytest.raises(ConfigError, match="one process"):
        memory_breakdown(1_000_000, "dp", "fp32", 16, 8)


def test_dp_gpu0_holds_everything() -> None:
    dp = memory_breakdown(1_000_000, "dp", "fp32", 4, 4)
    assert (dp.params, dp.grads, dp.optimizer) == (4_000_000, 4_000_000, 8_000_000)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"strategy": "fsdpp"}, "strategy"), ({"precision": "fp8"}, "precision"), ({"world_size": 0}, "world_size"),
     ({"optimizer": "lion"}, "optimizer")],
)
def test_bad_input_names_the_field(kwargs: dict, field: str) -> None:
    args = {"params": 1000, "strategy": "ddp", "precision": "fp32", "world_size": 2, "gpus_per_instance": 2}
    optimizer = kwargs.pop("optimizer", "adamw")
    args.update(kwargs)
    with pytest.raises(ConfigError) as info:
        memory_breakdown(**args, optimizer=optimizer)
    assert info.value.field == field
