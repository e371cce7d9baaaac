"""`estimate(model=nn.Module)` uses the module's own shape for activations."""

from __future__ import annotations

from typing import Any

import pytest

import sm_dist
from sm_dist.estimator.activations import activation_bytes, loss_backward_bytes
from sm_dist.estimator.hf_config import shape_of_module

torch = pytest.importorskip("torch")
nn = torch.nn


class RMSNorm(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.num_heads, self.num_key_value_heads = heads, kv_heads
        dim = hidden // heads
        self.q_proj, self.o_proj = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.k_proj, self.v_proj = nn.Linear(hidden, kv_heads * dim), nn.Linear(hidden, kv_heads * dim)


class Block(nn.Module):
    def __init__(self, hidden: int, ffn: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(hidden), RMSNorm(hidden)
        self.attn = Attention(hidden, heads, kv_heads)
        self.gate, self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)


class Model(nn.Module):
    def __init__(self, layers: int = 2, hidden: int = 768, vocab: int = 2048, config: Any = None) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(Block(hidden, 2048, 12, 4) for _ in range(layers))
        self.head = nn.Linear(hidden, vocab)
        if config is not None:
            self.config = config


def _activations(model: nn.Module) -> int:
    est = sm_dist.estimate(model=model, tokens=1e6, seq_len=512, instance_types=["ml.g5.xlarge"], instance_counts=[1],
                           strategies=["ddp"], micro_batch=1, activation_checkpointing="selective")
    return est.rows[0].memory.activations


def test_structure_gives_the_shape() -> None:
    model = Model()
    shape, how = shape_of_module(model, 123)
    assert (shape.layers, shape.hidden, shape.vocab, shape.heads, shape.kv_heads) == (2, 768, 2048, 12, 4)
    assert shape.ffn == 2048 and shape.gated_mlp and shape.norm == "rmsnorm" and not shape.approximate
    assert shape.params == 123 and "read from the module" in how
    expected = activation_bytes(layers=2, hidden=768, heads=12, vocab=2048, seq_len=512, micro_batch=1, shape=shape)
    assert _activations(model) == expected + loss_backward_bytes(2048, 512)
    # what the old count-based guess gave (5 layers x 512 wide, vocab 32,000) is far off
    assert _activations(model) < 0.5 * activation_bytes(layers=5, hidden=512, heads=4, vocab=32000, seq_len=512,
                                                        micro_batch=1)


def test_config_wins_over_structure() -> None:
    class HFConfig:  # a PretrainedConfig-like object
        def to_dict(self) -> dict[str, Any]:
            return {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 768, "num_attention_heads": 12,
                    "num_key_value_heads": 4, "intermediate_size": 2048, "vocab_size": 2048,
                    "max_position_embeddings": 4096, "hidden_act": "silu"}

    shape, how = shape_of_module(Model(config=HFConfig()), 99)
    assert (shape.layers, shape.kv_heads, shape.ffn, shape.vocab) == (2, 4, 2048, 2048) and "config" in how
    assert shape.params == 99 and shape.name == "Model"
    dict_shape, _ = shape_of_module(Model(config=HFConfig().to_dict()), 99)
    assert dict_shape == shape


def test_unusable_config_falls_back_to_structure() -> None:
    shape, how = shape_of_module(Model(config={"model_type": "no-such-model"}), 5)
    assert shape.layers == 2 and "not usable" in how and "read from the module" in how


def test_heads_guessed_are_flagged() -> None:
    model = nn.Module()
    model.layers = nn.ModuleList(nn.Sequential(nn.Linear(256, 1024), nn.Linear(1024, 256)) for _ in range(3))
    shape, how = shape_of_module(model, 7)
    assert shape.approximate and shape.heads == 4 and "approximate" in how


def test_arithmetic_gelu_is_recognised() -> None:
    class NewGELUActivation(nn.Module):  # Hugging Face's class name
        pass

    model = nn.Module()
    model.layers = nn.ModuleList([nn.Sequential(nn.Linear(256, 1024), NewGELUActivation(), nn.Linear(1024, 256))])
    assert shape_of_module(model, 1)[0].activation == "gelu_new"
    assert shape_of_module(Model(), 1)[0].activation == "silu"


def test_no_blocks_uses_the_count() -> None:
    shape, how = shape_of_module(nn.Sequential(nn.Linear(10, 10)), 110)
    assert shape.approximate and shape.params == 110 and "parameter count" in how
