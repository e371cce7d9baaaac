"""The seed models: shapes, parameter counts against published figures, causality, validation."""

from __future__ import annotations

import pytest
import torch

from sm_dist.errors import ConfigError
from sm_dist.runtime.models.cnn import SimpleCNN
from sm_dist.runtime.models.gpt import GPT, GPTConfig, lm_loss
from sm_dist.runtime.models.resnet import ResNet18

# torchvision.models.resnet18().parameters() — the reference ResNet-18 (ImageNet head).
TORCHVISION_RESNET18_PARAMS = 11_689_512
# GPT-2 small (124M): nanoGPT reports 123.65M excluding the 1024x768 position embedding.
GPT2_SMALL_PARAMS = 123_653_376 + 1024 * 768


def test_simple_cnn_maps_mnist_shape_to_ten_logits() -> None:
    model = SimpleCNN()
    assert model(torch.zeros(3, 1, 28, 28)).shape == (3, 10)


def test_simple_cnn_rejects_bad_dropout() -> None:
    with pytest.raises(ConfigError) as err:
        SimpleCNN(dropout=1.5)
    assert err.value.field == "dropout"


def test_resnet18_has_torchvision_parameter_count() -> None:
    with torch.device("meta"):
        model = ResNet18()
    assert sum(p.numel() for p in model.parameters()) == TORCHVISION_RESNET18_PARAMS


@pytest.mark.parametrize(("small", "side"), [(True, 32), (False, 64)])
def test_resnet18_small_and_imagenet_stems(small: bool, side: int) -> None:
    model = ResNet18(num_classes=7, width=4, small_input=small)
    assert model(torch.randn(2, 3, side, side)).shape == (2, 7)


def test_gpt2_small_shape_has_gpt2_parameter_count() -> None:
    cfg = GPTConfig.from_shape(layers=12, hidden=768, heads=12, vocab=50257, seq_len=1024)
    with torch.device("meta"):
        model = GPT(cfg)
    assert model.num_params() == GPT2_SMALL_PARAMS
    assert model.lm_head.weight is model.wte.weight


def test_untied_gpt_counts_the_head_separately() -> None:
    tied, untied = GPT(GPTConfig()), GPT(GPTConfig(tie_weights=False))
    assert untied.num_params() - tied.num_params() == 256 * 64


def test_gpt_is_causal() -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(seq_len=16)).eval()
    idx = torch.randint(256, (1, 16))
    changed = idx.clone()
    changed[0, 10:] = (changed[0, 10:] + 1) % 256
    a, b = model(idx), model(changed)
    assert torch.equal(a[:, :10], b[:, :10])
    assert not torch.equal(a[:, 10:], b[:, 10:])


def test_gpt_loss_starts_near_uniform() -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig())
    idx, targets = torch.randint(256, (2, 32)), torch.randint(256, (2, 32))
    loss = lm_loss(model(idx), targets)
    assert abs(loss.item() - torch.log(torch.tensor(256.0)).item()) < 0.1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"n_embd": 64, "n_head": 5}, "n_head"), ({"n_layer": 0}, "n_layer"), ({"dropout": -0.1}, "dropout")],
)
def test_gpt_config_names_the_bad_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        GPTConfig(**kwargs)
    assert err.value.field == field


def test_gpt_rejects_inputs_longer_than_context() -> None:
    model = GPT(GPTConfig(seq_len=8))
    with pytest.raises(ConfigError):
        model(torch.zeros(1, 9, dtype=torch.long))


@pytest.mark.parametrize(("layers", "hidden", "heads", "vocab", "seq_len"), [(2, 64, 4, 256, 64), (3, 96, 3, 1000, 32)])
def test_gpt_matches_the_estimators_gpt2_formula(layers: int, hidden: int, heads: int, vocab: int, seq_len: int) -> None:
    """measure-memory builds this model from estimator shapes: both must count the same parameters."""
    from sm_dist.estimator.models import gpt2_params

    cfg = GPTConfig.from_shape(layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq_len=seq_len)
    with torch.device("meta"):
        model = GPT(cfg)
    assert model.num_params() == gpt2_params(layers, hidden, vocab, seq_len)
