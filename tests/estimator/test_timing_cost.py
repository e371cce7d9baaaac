"""Step time (FLOPs, ring collectives), cost and spot."""

from __future__ import annotations

import pytest

from sm_dist.catalog import get_instance
from sm_dist.estimator import timing
from sm_dist.estimator.cost import job_cost, job_hours
from sm_dist.vocab import Precision, Strategy


def _step(strategy: Strategy, count: int, name: str = "ml.p4d.24xlarge", accumulation: int = 1) -> timing.StepTime:
    return timing.step_time(params=1_000_000_000, tokens_per_micro_batch=4096, accumulation=accumulation,
                            strategy=strategy, precision=Precision.MIXED, inst=get_instance(name), count=count,
                            mfu=0.4, checkpointing="selective")


def test_compute_is_6_flops_per_param_per_token() -> None:
    step = _step(Strategy.DDP, 1)
    assert step.compute == pytest.approx(6 * 1e9 * 4096 / (312e12 * 0.4))
    assert timing.flops_per_token(10, "full") == 80


def test_ddp_all_reduce_is_ring_hierarchical() -> None:
    inst = get_instance("ml.p4d.24xlarge")
    step = _step(Strategy.DDP, 2)
    grad_bytes = 2 * 1e9  # bf16 gradients
    intra = 2 * 7 / 8 * grad_bytes / (600e9 * timing.NVLINK_EFFICIENCY)
    inter = 2 * 1 / 2 * grad_bytes / (inst.network_gbps * 1e9 / 8 * timing.NETWORK_EFFICIENCY)
    assert step.communication == pytest.approx(intra + inter)
    window = timing.OVERLAP_EFFICIENCY * step.compute * (1 - timing.FORWARD_SHARE)
    assert step.exposed == pytest.approx(max(0.0, intra + inter - window))


def test_communication_volumes() -> None:
    assert [timing.comm_volume_psi(s) for s in ("ddp", "zero1", "zero2", "fsdp")] == [2, 3, 2, 3]


def test_data_parallel_is_a_parameter_server_that_grows_with_gpus() -> None:
    four = _step(Strategy.DP, 1, "ml.g5.12xlarge")
    eight = _step(Strategy.DP, 1, "ml.g5.48xlarge")
    assert eight.exposed / four.exposed == pytest.approx(7 / 3)  # 2·K·(N−1)
    assert eight.exposed > _step(Strategy.DDP, 1, "ml.g5.48xlarge").exposed


def test_slow_network_exposes_communication() -> None:
    fast = _step(Strategy.FSDP, 16, "ml.p5.48xlarge")
    slow = _step(Strategy.FSDP, 16, "ml.g5.48xlarge")
    assert slow.exposed > fast.exposed >= 0


def test_cost_and_spot_expectation() -> None:
    inst = get_instance("ml.p4d.24xlarge")
    hours = job_hours(steps=100, step_seconds=36.0)
    assert hours == pytest.approx(1.0 + 300 / 3600)
    cost = job_cost(10.0, 4, inst, spot_discount=0.6, spot_hours=10.5)  # spot's hours: its interruptions (goodput)
    assert cost.sagemaker == pytest.approx(10 * 4 * 25.2513)
    assert cost.ec2 == pytest.approx(10 * 4 * 21.9576)
    assert cost.spot_hours == 10.5
    assert cost.spot == pytest.approx(10.5 * 4 * 25.2513 * 0.4)
