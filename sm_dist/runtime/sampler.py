"""A distributed sampler that resumes mid-epoch, also at another world size.

Each epoch has one global order, a permutation seeded by (seed, epoch) and identical on every
rank. The samples not yet consumed — the suffix of that order after `consumed` — are dealt
round-robin: rank r takes positions r, r+R, r+2R, ... After every rank has taken k samples,
the globally consumed samples are exactly the first k*R of the suffix, a prefix of the global
order. So the state (seed, epoch, consumed) says which samples were seen independently of R,
and a resumed run continues with exactly the next unseen ones at any world size. (torch's
DistributedSampler shards contiguously-by-stride over the *whole* epoch and cannot resume;
ElasticDistributedSampler resumes only at the same world size: pytorch#36650.)

`consumed` is advanced by the loader (sm_dist.runtime.data.ResumableLoader) when a batch is
handed to the training loop — not when a DataLoader worker prefetches it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch.utils.data import Sampler

from sm_dist.errors import ConfigError, check_int


class ResumableDistributedSampler(Sampler[int]):
    """Exclusive, deterministic, resumable shard of range(dataset_len) for one rank.

    With `drop_last=False` the last round is padded with samples from the start of the
    epoch's order so every rank yields the same count (as torch's DistributedSampler does);
    with `drop_last=True` the tail that does not fill a round is skipped instead.
    """

    def __init__(self, dataset_len: int, *, num_replicas: int = 1, rank: int = 0, seed: int = 0,
                 shuffle: bool = True, drop_last: bool = False) -> None:
        check_int("dataset_len", dataset_len, 1, "expected a dataset with at least one sample")
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ConfigError("rank", rank, f"expected 0 <= rank < num_replicas={num_replicas}")
        self.dataset_len = dataset_len
        self.num_replicas = num_replicas
        self.rank = rank
        self.seed = int(seed)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.epoch = 0
        self.consumed = 0

    def global_order(self, epoch: int | None = None) -> list[int]:
        """The epoch's order of all samples, identical on every rank."""
        if not self.shuffle:
            return list(range(self.dataset_len))
        gen = torch.Generator()
        gen.manual_seed(self.seed * 1_000_003 + (self.epoch if epoch is None else epoch))
        return torch.randperm(self.dataset_len, generator=gen).tolist()

    def _remaining(self) -> int:
        return max(self.dataset_len - self.consumed, 0)

    def __len__(self) -> int:
        remaining = self._remaining()
        if self.drop_last:
            return remaining // self.num_replicas
        return math.ceil(remaining / self.num_replicas)

    def __iter__(self) -> Iterator[int]:
        order = self.global_order()
        rest = order[self.consumed:]
        per_rank = len(self)
        total = per_rank * self.num_replicas
        if total > len(rest) and rest:
            # pad the last round with the start of the *epoch's* order: the same samples whether
            # the epoch ran straight through or resumed (consumed is a multiple of the world size)
            rest = rest + (order * math.ceil(total / len(order)))[: total - len(rest)]
        return iter(rest[self.rank:total:self.num_replicas])

    def set_epoch(self, epoch: int) -> None:
        """Start epoch `epoch` from its beginning (a no-op when resuming into that same epoch)."""
        if epoch != self.epoch:
            self.epoch = int(epoch)
            self.consumed = 0

    def advance(self, local_samples: int) -> None:
        """Record that every rank has handed `local_samples` more samples to training."""
        self.consumed = min(self.consumed + local_samples * self.num_replicas, self.dataset_len)

    def state_dict(self) -> dict[str, int]:
        """{"seed", "epoch", "consumed"}: what was seen, independent of the world size."""
        return {"seed": self.seed, "epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue after the samples recorded in `state` (saved at any world size)."""
        missing = {"seed", "epoch", "consumed"} - set(state)
        if missing:
            raise ConfigError("sampler state", sorted(state), f"missing keys {sorted(missing)}")
        consumed = int(state["consumed"])
        if not 0 <= consumed <= self.dataset_len:
            raise ConfigError("sampler state.consumed", consumed,
                              f"expected 0..{self.dataset_len} (was the dataset changed?)")
        self.seed, self.epoch, self.consumed = int(state["seed"]), int(state["epoch"]), consumed


__all__ = ["ResumableDistributedSampler"]
