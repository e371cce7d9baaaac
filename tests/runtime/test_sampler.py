"""ResumableDistributedSampler: exclusive shards, union, determinism, mid-epoch resume at any world size."""

from __future__ import annotations

import pytest

from sm_dist.errors import ConfigError
from sm_dist.runtime.sampler import ResumableDistributedSampler


def _shards(n: int, world: int, **kw) -> list[list[int]]:
    return [list(ResumableDistributedSampler(n, num_replicas=world, rank=r, **kw)) for r in range(world)]


def test_two_ranks_over_24_get_disjoint_halves_whose_union_is_all() -> None:
    a, b = _shards(24, 2, seed=0)
    assert len(a) == len(b) == 12
    assert not set(a) & set(b)
    assert sorted(a + b) == list(range(24))


def test_uneven_length_pads_so_every_rank_steps_equally() -> None:
    shards = _shards(10, 4, seed=1)
    assert [len(s) for s in shards] == [3, 3, 3, 3]
    assert set().union(*map(set, shards)) == set(range(10))
    dropped = _shards(10, 4, seed=1, drop_last=True)
    assert [len(s) for s in dropped] == [2, 2, 2, 2]
    flat = [i for s in dropped for i in s]
    assert len(set(flat)) == 8  # exclusive when the tail is dropped


def test_order_is_deterministic_per_seed_and_epoch() -> None:
    s = ResumableDistributedSampler(50, num_replicas=2, rank=0, seed=3)
    first = list(s)
    assert list(ResumableDistributedSampler(50, num_replicas=2, rank=0, seed=3)) == first
    s.set_epoch(1)
    assert list(s) != first
    assert list(ResumableDistributedSampler(50, num_replicas=2, rank=0, seed=4)) != first
    assert _shards(6, 2, shuffle=False) == [[0, 2, 4], [1, 3, 5]]


def _consume(n: int, world: int, steps: int, batch: int, state=None) -> tuple[list[int], dict]:
    """Run `steps` steps of `batch` samples per rank; return the samples seen (global order) and the state."""
    samplers = [ResumableDistributedSampler(n, num_replicas=world, rank=r, seed=7) for r in range(world)]
    if state:
        for s in samplers:
            s.load_state_dict(state)
    iters = [iter(s) for s in samplers]
    seen = []
    for _ in range(steps):
        step = [[next(it) for _ in range(batch)] for it in iters]
        for i in range(batch):  # global order of a step: position-major, rank-minor
            seen.extend(step[r][i] for r in range(world))
        for s in samplers:
            s.advance(batch)
    return seen, samplers[0].state_dict()


@pytest.mark.parametrize("world_after", [2, 3, 4, 1])
def test_mid_epoch_resume_continues_with_exactly_the_unseen_samples(world_after: int) -> None:
    n = 48
    uninterrupted, _ = _consume(n, 1, n, 1)
    before, state = _consume(n, 2, 5, 2)  # 20 samples consumed by 2 ranks
    assert state == {"seed": 7, "epoch": 0, "consumed": 20}
    remaining = n - 20
    after, _ = _consume(n, world_after, remaining // world_after // 1, 1, state)
    assert sorted(before) == sorted(uninterrupted[:20])
    assert not set(before) & set(after)
    seen = before + after
    assert len(set(seen)) == len(seen)
    assert sorted(seen) == sorted(uninterrupted[: len(seen)])  # a prefix of the same epoch order


def test_set_epoch_restarts_the_epoch_but_not_when_resuming_into_it() -> None:
    s = ResumableDistributedSampler(10, num_replicas=2, rank=0, seed=0)
    s.load_state_dict({"seed": 0, "epoch": 2, "consumed": 4})
    s.set_epoch(2)
    assert s.consumed == 4 and len(s) == 3
    s.set_epoch(3)
    assert s.consumed == 0 and len(s) == 5


@pytest.mark.parametrize("kwargs, field", [
    ({"dataset_len": 0}, "dataset_len"),
    ({"dataset_len": 4, "num_replicas": 2, "rank": 2}, "rank"),
])
def test_bad_arguments(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        ResumableDistributedSampler(**kwargs)


def test_bad_state() -> None:
    s = ResumableDistributedSampler(10)
    with pytest.raises(ConfigError, match="consumed"):
        s.load_state_dict({"seed": 0, "epoch": 0, "consumed": 11})
    with pytest.raises(ConfigError, match="missing"):
        s.load_state_dict({"seed": 0})


def test_padding_of_a_resumed_epoch_equals_the_uninterrupted_one() -> None:
    """drop_last=False with N % R != 0: the padded last round holds the same samples after a resume."""
    from sm_dist.runtime.sampler import ResumableDistributedSampler

    n, world = 10, 4

    def shards(sampler_factory, resume_after=None):
        out = []
        for rank in range(world):
            s = sampler_factory(rank)
            if resume_after is not None:
                s.load_state_dict({"seed": 3, "epoch": 0, "consumed": resume_after * world})
            out.append(list(s))
        return out

    make = lambda rank: ResumableDistributedSampler(n, num_replicas=world, rank=rank, seed=3, drop_last=False)  # noqa: E731
    straight = shards(make)
    resumed = shards(make, resume_after=2)
    assert [shard[2:] for shard in straight] == resumed


def test_new_loader_iterators_leave_the_global_rng_alone() -> None:
    """Dropout after a resume depends on the global RNG; building/iterating the loader must not draw from it."""
    import torch

    from sm_dist.runtime.data import build_dataloader

    data = torch.utils.data.TensorDataset(torch.arange(16.0))
    loader = build_dataloader(data, 4, seed=1)
    torch.manual_seed(0)
    before = torch.get_rng_state()
    for _ in range(2):
        list(iter(loader))
    assert torch.equal(before, torch.get_rng_state())
