"""AvgMetric over ranks, rank-0 logging, and the resumable DataLoader."""

from __future__ import annotations

import pytest
import torch
from rt_spawn import free_port, run_ranks
from torch.utils.data import TensorDataset

from sm_dist.errors import ConfigError
from sm_dist.runtime.data import build_dataloader


@pytest.mark.slow
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


@pytest.mark.slow
def test_loader_counts_only_batches_handed_out_even_with_workers() -> None:
    loader = build_dataloader(_dataset(), 4, num_replicas=1, rank=0, seed=1, num_workers=1)
    _take(loader, 1)  # the worker prefetches more, but one batch was handed out
    assert loader.state_dict()["consumed"] == 4


def test_loader_rejects_conflicting_arguments() -> None:
    with pytest.raises(ConfigError, match="sampler"):
        build_dataloader(_dataset(), 2, sampler=None)
    with pytest.raises(ConfigError, match="batch_size"):
        build_dataloader(_dataset(), 0)


class _Lines(torch.utils.data.Dataset):
    """Every line of a channel's files, as a training script builds its dataset from SM_CHANNEL_TRAIN."""

    def __init__(self, files: list) -> None:
        self.lines = [line for path in files for line in path.read_text().splitlines()]

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> str:
        return self.lines[index]


def test_a_dataset_of_channel_files_resumes_exactly(tmp_path) -> None:
    """channel_files orders the files by their path in the channel (not by how the folder lists them),
    so the resumed run sees exactly the lines the uninterrupted one would have."""
    from sm_dist.container.env import detect_env
    from sm_dist.runtime.data import channel_files

    folder = tmp_path / "input" / "data" / "train"
    (folder / "b").mkdir(parents=True)
    for name in ("b/02.txt", "10.txt", "01.txt"):
        (folder / name).write_text("".join(f"{name}:{i}\n" for i in range(5)))
    env = detect_env({"SM_CHANNEL_TRAIN": str(folder)})
    files = channel_files("train", env)
    assert [p.relative_to(folder).as_posix() for p in files] == ["01.txt", "10.txt", "b/02.txt"]
    def lines(loader, batches: int) -> list[str]:
        return [line for _, batch in zip(range(batches), loader) for line in batch]

    whole = lines(build_dataloader(_Lines(files), 2, num_replicas=1, rank=0, seed=4, collate_fn=list), 100)
    first = build_dataloader(_Lines(files), 2, num_replicas=1, rank=0, seed=4, collate_fn=list)
    head = lines(first, 3)
    again = build_dataloader(_Lines(channel_files("train", env)), 2, num_replicas=1, rank=0, seed=4, collate_fn=list)
    again.load_state_dict(first.state_dict())
    assert len(whole) == 15 and head + lines(again, 100) == whole
    with pytest.raises(ConfigError, match="channel='val': no such data channel .*channels: train"):
        channel_files("val", env)
