"""AvgMetric over ranks, rank-0 logging, and the resumable DataLoader."""

from __future__ import annotations

import pytest
import torch
from rt_spawn import free_port, run_ranks
from torch.utils.data import TensorDataset

from sm_dist.errors import ConfigError
from sm_dist.runtime.data import build_dataloader


def test_avg_metric_is_the_mean_over_every_sample_and_only_rank0_logs() -> None:
    rank0, rank1 = run_ranks(2, "rt_workers:metrics", {}, free_port())
    assert rank0["mean"] == rank1["mean"] == pytest.approx((3 * 1.0 + 5.0) / 4)  # not (1+5)/2
    assert rank0["empty_is_nan"]
    assert rank0["line"] == "[sm_dist] step=7 loss=2.0" and rank0["printed"] == rank0["line"] + "\n"
    assert rank1["line"] is None and rank1["printed"] == ""


def _dataset(n: int = 30) -> TensorDataset:
    return TensorDataset(torch.arange(n))


def _take(loader, batches: int) -> list[int]:
    seen = []
    for i, (x,) in enumerate(loader):
        seen.extend(x.tolist())
        if i + 1 == batches:
            break
    return seen


def test_loader_shards_and_resumes_at_another_world_size() -> None:
    loaders = [build_dataloader(_dataset(), 3, num_replicas=2, rank=r, seed=5) for r in range(2)]
    first = [_take(loader, 2) for loader in loaders]  # 2 steps x 3 samples x 2 ranks
    assert not set(first[0]) & set(first[1])
    state = loaders[0].state_dict()
    assert state == {"seed": 5, "epoch": 0, "consumed": 12}
    resumed = [build_dataloader(_dataset(), 2, num_replicas=3, rank=r, seed=0) for r in range(3)]
    for loader in resumed:
        loader.load_state_dict(state)
    rest = [i for loader in resumed for i in _take(loader, 100)]
    assert sorted(first[0] + first[1] + rest) == list(range(30))  # every sample exactly once
    assert len(resumed[0]) == 0  # the epoch is used up
    resumed[0].set_epoch(1)
    assert len(resumed[0]) == 5  # 30 / 3 ranks / 2 per batch


def test_loader_counts_only_batches_handed_out_even_with_workers() -> None:
    loader = build_dataloader(_dataset(), 4, num_replicas=1, rank=0, seed=1, num_workers=1)
    _take(loader, 1)  # the worker prefetches more, but one batch was handed out
    assert loader.state_dict()["consumed"] == 4


def test_loader_rejects_conflicting_arguments() -> None:
    with pytest.raises(ConfigError, match="sampler"):
        build_dataloader(_dataset(), 2, sampler=None)
    with pytest.raises(ConfigError, match="batch_size"):
        build_dataloader(_dataset(), 0)
