"""Deterministic datasets for the seed workloads: no download, same bytes for the same seed.

Every sample is a pure function of (seed, index) — generated on access from its own
`torch.Generator` — so the data does not depend on which rank reads it, in which order, or
whether the run was resumed halfway. Images are a per-class prototype plus noise, tokens follow a
random sparse transition table, so the models have something to learn and losses fall.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils.data import Dataset

from sm_dist.errors import ConfigError, check_int

# A large odd multiplier spreads (seed, index) pairs over the generator's seed space.
_SEED_STRIDE = 1_000_003
_SEED_MASK = (1 << 63) - 1
#: Standard deviation of the per-sample noise around the class prototype.
NOISE_STD = 0.5
#: Side of the low-resolution prototype that ImageNet-shaped classes are upsampled from, so
#: 1000 classes at 224 px need no 150M-float prototype table.
_PROTO_SIDE = 8
#: Successors each token may have in the synthetic token stream (a sparse Markov chain).
_BRANCHING = 4


def _generator(seed: int, index: int) -> torch.Generator:
    return torch.Generator().manual_seed((seed * _SEED_STRIDE + index) & _SEED_MASK)


def _check_positive(field: str, value: int) -> None:
    check_int(field, value, 1, "use a positive integer")


class MnistLike(Dataset):
    """`length` samples of (image 1x28x28 float32, label int64 in 0..9)."""

    def __init__(self, length: int = 1024, *, seed: int = 0, num_classes: int = 10) -> None:
        _check_positive("length", length)
        _check_positive("num_classes", num_classes)
        self.length, self.seed, self.num_classes = length, seed, num_classes
        self.prototypes = torch.randn((num_classes, 1, 28, 28), generator=_generator(seed, -1))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= index < self.length:
            raise IndexError(index)
        g = _generator(self.seed, index)
        label = int(torch.randint(self.num_classes, (), generator=g))
        image = self.prototypes[label] + NOISE_STD * torch.randn((1, 28, 28), generator=g)
        return image, torch.tensor(label)


class ImageNetLike(Dataset):
    """`length` samples of (image 3xRxR float32, label int64); R = `resolution` (224 = ImageNet)."""

    def __init__(self, length: int = 256, *, seed: int = 0, resolution: int = 224, num_classes: int = 1000) -> None:
        _check_positive("length", length)
        _check_positive("num_classes", num_classes)
        check_int("resolution", resolution, _PROTO_SIDE, f"use an image side of at least {_PROTO_SIDE} pixels")
        self.length, self.seed = length, seed
        self.resolution, self.num_classes = resolution, num_classes

    def __len__(self) -> int:
        return self.length

    def _prototype(self, label: int) -> torch.Tensor:
        small = torch.randn((1, 3, _PROTO_SIDE, _PROTO_SIDE), generator=_generator(self.seed, -1 - label))
        side = (self.resolution, self.resolution)
        return torch.nn.functional.interpolate(small, size=side, mode="bilinear", align_corners=False)[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= index < self.length:
            raise IndexError(index)
        g = _generator(self.seed, index)
        label = int(torch.randint(self.num_classes, (), generator=g))
        noise = torch.randn((3, self.resolution, self.resolution), generator=g)
        return self._prototype(label) + NOISE_STD * noise, torch.tensor(label)


class TokenWindows(Dataset):
    """Non-overlapping windows of a token stream: item i = (x, y), y = x shifted by one token."""

    def __init__(self, tokens: torch.Tensor, seq_len: int) -> None:
        _check_positive("seq_len", seq_len)
        if tokens.ndim != 1 or tokens.numel() < seq_len + 1:
            raise ConfigError("tokens", tokens.numel(), f"need at least seq_len + 1 = {seq_len + 1} tokens")
        self.tokens = tokens.to(torch.int64)
        self.seq_len = seq_len

    def __len__(self) -> int:
        return (self.tokens.numel() - 1) // self.seq_len

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        window = self.tokens[index * self.seq_len : (index + 1) * self.seq_len + 1]
        return window[:-1], window[1:]


def synthetic_tokens(n_tokens: int, *, vocab_size: int, seed: int = 0) -> torch.Tensor:
    """A stream where each token is followed by one of a few fixed successors (learnable)."""
    _check_positive("n_tokens", n_tokens)
    _check_positive("vocab_size", vocab_size)
    g = _generator(seed, -1)
    successors = torch.randint(vocab_size, (vocab_size, _BRANCHING), generator=g).tolist()
    choices = torch.randint(_BRANCHING, (n_tokens,), generator=g).tolist()
    current = int(torch.randint(vocab_size, (), generator=g))
    out = []
    for choice in choices:  # a Markov chain is sequential; plain ints keep this fast
        out.append(current)
        current = successors[current][choice]
    return torch.tensor(out, dtype=torch.int64)


def text_tokens(path: str | Path, *, vocab_size: int = 256) -> torch.Tensor:
    """The bytes of a local text file as tokens (one token per byte; needs vocab_size ≥ 256)."""
    if vocab_size < 256:
        raise ConfigError("vocab_size", vocab_size, "byte-level text needs vocab_size >= 256")
    file = Path(path)
    if not file.is_file():
        raise ConfigError("text", str(path), "give the path of an existing local text file")
    data = file.read_bytes()
    if not data:
        raise ConfigError("text", str(path), "the file is empty; give a file with some text")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.int64)
