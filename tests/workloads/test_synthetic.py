"""Synthetic datasets: deterministic per (seed, index), order-independent, and learnable."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sm_dist.errors import ConfigError
from sm_dist.runtime.models.cnn import SimpleCNN
from sm_dist.runtime.models.synthetic import (
    ImageNetLike,
    MnistLike,
    TokenWindows,
    synthetic_tokens,
    text_tokens,
)


def _bytes(ds, indices) -> list[bytes]:
    out = []
    for i in indices:
        x, y = ds[i]
        out.append(x.numpy().tobytes() + y.numpy().tobytes())
    return out


@pytest.mark.parametrize("make", [lambda s: MnistLike(32, seed=s), lambda s: ImageNetLike(8, seed=s, resolution=16)])
def test_images_are_a_function_of_seed_and_index(make) -> None:
    a, b, other = make(3), make(3), make(4)
    forward = _bytes(a, range(len(a)))
    assert forward == list(reversed(_bytes(b, reversed(range(len(b))))))
    assert forward != _bytes(other, range(len(other)))
    assert len(set(forward)) == len(forward)


def test_image_shapes_and_label_ranges() -> None:
    x, y = MnistLike(4)[0]
    assert x.shape == (1, 28, 28) and x.dtype == torch.float32 and 0 <= int(y) < 10
    labels = {int(ImageNetLike(64, resolution=8, num_classes=3)[i][1]) for i in range(64)}
    assert labels == {0, 1, 2}
    assert ImageNetLike(1)[0][0].shape == (3, 224, 224)


def test_index_out_of_range_raises_index_error() -> None:
    with pytest.raises(IndexError):
        MnistLike(4)[4]


def test_mnist_like_is_learnable() -> None:
    torch.manual_seed(0)
    ds = MnistLike(64)
    x = torch.stack([ds[i][0] for i in range(64)])
    y = torch.stack([ds[i][1] for i in range(64)])
    model = SimpleCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_token_windows_shift_by_one() -> None:
    tokens = synthetic_tokens(1000, vocab_size=50, seed=1)
    ds = TokenWindows(tokens, seq_len=16)
    assert len(ds) == (1000 - 1) // 16
    x, y = ds[2]
    assert torch.equal(x[1:], y[:-1])
    assert torch.equal(x, tokens[32:48]) and int(y[-1]) == int(tokens[48])


def test_synthetic_tokens_deterministic_and_in_vocab() -> None:
    a = synthetic_tokens(500, vocab_size=37, seed=5)
    assert torch.equal(a, synthetic_tokens(500, vocab_size=37, seed=5))
    assert not torch.equal(a, synthetic_tokens(500, vocab_size=37, seed=6))
    assert int(a.min()) >= 0 and int(a.max()) < 37


def test_text_tokens_are_the_file_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("héllo world", encoding="utf-8")
    assert text_tokens(path).tolist() == list("héllo world".encode())


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda p: text_tokens(p / "missing.txt"), "text"),
        (lambda p: text_tokens(p, vocab_size=100), "vocab_size"),
        (lambda p: TokenWindows(torch.arange(5), seq_len=8), "tokens"),
        (lambda p: MnistLike(0), "length"),
        (lambda p: ImageNetLike(4, resolution=4), "resolution"),
    ],
)
def test_bad_inputs_name_the_field(tmp_path: Path, call, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        call(tmp_path)
    assert err.value.field == field
