"""A DataLoader over the resumable sampler that counts what the training loop really received.

DataLoader workers prefetch ahead of the loop, so a sampler cannot know which samples were
trained on. ResumableLoader advances the sampler's `consumed` only when a batch is handed to
the loop; its state_dict() is therefore exact at a checkpoint taken between steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, Dataset

from sm_dist.errors import ConfigError, check_int
from sm_dist.runtime.sampler import ResumableDistributedSampler
from sm_dist.runtime.shards import check_shares

if TYPE_CHECKING:
    from sm_dist.container.env import RunEnv
    from sm_dist.runtime.protocols import RunIdentity


class ResumableLoader:
    """Iterate batches of this rank's shard; resumable mid-epoch via state_dict()."""

    def __init__(self, loader: DataLoader, sampler: ResumableDistributedSampler) -> None:
        self.loader = loader
        self.sampler = sampler
        self.batch_size = loader.batch_size or 1

    def __len__(self) -> int:
        """Batches left in the current epoch on this rank."""
        n = len(self.sampler)
        return n // self.batch_size if self.loader.drop_last else math.ceil(n / self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        left = len(self.sampler)
        for batch in self.loader:
            taken = min(self.batch_size, left)
            left -= taken
            self.sampler.advance(taken)  # before the yield: the loop owns this batch now
            yield batch

    def set_epoch(self, epoch: int) -> None:
        """Begin `epoch` (keeps a restored mid-epoch position when it is the same epoch)."""
        self.sampler.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        return self.sampler.epoch

    def state_dict(self) -> dict[str, int]:
        """{"seed", "epoch", "consumed"}."""
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.sampler.load_state_dict(state)


def build_dataloader(dataset: Dataset, batch_size: int, *, ctx: RunIdentity | None = None,
                     num_replicas: int | None = None, rank: int | None = None, seed: int = 0, shuffle: bool = True,
                     drop_last: bool = False, **loader_kwargs: object) -> ResumableLoader:
    """DataLoader over this rank's exclusive shard of `dataset` (ranks from `ctx` — a RunContext or
    RunEnv — or given); `loader_kwargs` go to torch's DataLoader (num_workers, pin_memory, ...)."""
    check_int("batch_size", batch_size, 1, "expected a positive integer (samples per rank per step)")
    for key in ("sampler", "batch_sampler"):
        if key in loader_kwargs:
            raise ConfigError(key, loader_kwargs[key], "the resumable sampler decides the order; drop this argument")
    world = num_replicas if num_replicas is not None else (ctx.world_size if ctx is not None else 1)
    me = rank if rank is not None else (ctx.rank if ctx is not None else 0)
    sampler = ResumableDistributedSampler(len(dataset), num_replicas=world, rank=me, seed=seed,
                                          shuffle=shuffle, drop_last=drop_last)
    # Each new DataLoader iterator draws a base seed from its generator; with none it draws from
    # the global RNG, which shifts dropout masks after a resume (iterators are created at other
    # points than in the uninterrupted run). A private generator leaves the global RNG alone.
    loader_kwargs.setdefault("generator", torch.Generator().manual_seed(seed * 1_000_003 + me))
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last, **loader_kwargs)
    return ResumableLoader(loader, sampler)


def channel_files(name: str, env: RunEnv | None = None, pattern: str = "**/*") -> list[Path]:
    """The files of data channel `name` (`SM_CHANNEL_<NAME>`, /opt/ml/input/data/<name>), sorted by
    their path in the channel: the same order on every host and after every restart, so a dataset
    indexed over them resumes exactly through the resumable sampler.

    Under `ShardedByS3Key` each host holds its own share: the files (and a dataset of them) differ per
    host; shard such data per host (`num_replicas=ctx.local_world_size`, `rank=ctx.local_rank`). Hosts
    given different numbers of files are refused here, in one line, rather than left to hang at the
    first epoch's end (`sm_dist.runtime.shards`; with a process group).
    """
    from sm_dist.container.env import detect_env

    run_env = env if env is not None else detect_env()
    folder = run_env.channels.get(name.lower())
    if folder is None:
        known = ", ".join(sorted(run_env.channels)) or "none"
        raise ConfigError("channel", name, f"no such data channel in this job (channels: {known}); pass it with "
                          f"inputs={{{name!r}: ...}} (--input {name}=...)")
    root = Path(folder)
    files = sorted((p for p in root.glob(pattern) if p.is_file()), key=lambda p: p.relative_to(root).as_posix())
    check_shares(name, len(files), run_env.current_host, run_env.hosts)
    return files


__all__ = ["ResumableLoader", "build_dataloader", "channel_files"]
