"""Model shapes: presets with their published parameter counts, HF config.json, --params."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sm_dist.errors import CatalogError, ConfigError
from sm_dist.estimator import hf_config
from sm_dist.estimator.models import DEFAULT_SEQ_LEN, PRESETS, preset, shape_from_params

# parameter counts published with the models (Hugging Face model cards / transformers)
PUBLISHED = {
    "gpt2": 124_439_808, "gpt2-xl": 1_557_611_200, "llama2-7b": 6_738_415_616, "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192, "llama3-8b": 8_030_261_248, "llama3-70b": 70_553_706_496,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_presets_have_the_published_parameter_count(name: str) -> None:
    assert preset(name).params == PUBLISHED[name]


def test_unknown_preset_suggests() -> None:
    with pytest.raises(CatalogError, match="did you mean 'llama2-7b'") as info:
        preset("llama2-7")
    assert info.value.field == "model"


LLAMA2_7B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "vocab_size": 32000,
    "max_position_embeddings": 4096, "hidden_act": "silu", "tie_word_embeddings": False,
}
GPT2_CONFIG = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}


@pytest.mark.parametrize(("config", "expected"), [(LLAMA2_7B_CONFIG, "llama2-7b"), (GPT2_CONFIG, "gpt2")])
def test_hf_config_gives_the_same_count_as_the_preset(tmp_path: Path, config: dict, expected: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    shape = hf_config.read(path)
    want = PRESETS[expected]
    assert (shape.params, shape.layers, shape.hidden) == (want.params, want.layers, want.hidden)
    # the training sequence length is an input (default 2048, capped at the context), not max_position_embeddings
    assert shape.seq_len == min(DEFAULT_SEQ_LEN, want.max_positions)
    assert not shape.approximate


@pytest.mark.parametrize(
    "text", ["{not json", "[1, 2]", json.dumps({"model_type": "llama", "hidden_size": 4096}),
             json.dumps({**GPT2_CONFIG, "n_embd": "wide"}), json.dumps({**GPT2_CONFIG, "n_head": 7})],
)
def test_malformed_hf_config_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        hf_config.read(path)
    assert info.value.field == "hf_config"


def test_missing_hf_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        hf_config.read(tmp_path / "nope.json")


@pytest.mark.parametrize("params", [125e6, 1.3e9, 7e9, 70e9])
def test_gpt_like_shape_from_a_count(params: float) -> None:
    shape = shape_from_params(int(params))
    assert shape.approximate and shape.params == int(params)
    assert 12 * shape.layers * shape.hidden**2 == pytest.approx(params, rel=0.25)
    assert shape.hidden % shape.heads == 0
