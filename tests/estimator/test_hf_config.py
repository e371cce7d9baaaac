"""HF config.json parsing as transformers' config classes do it, against published parameter counts.

`data/hf_configs.json` holds the shape fields of each model's published config.json and the
parameter count published for it (model card / safetensors metadata); MoE entries also hold the
count one token passes through.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sm_dist
from sm_dist.errors import ConfigError
from sm_dist.estimator import hf_config
from sm_dist.estimator.shape import DEFAULT_SEQ_LEN

DATA = json.loads((Path(__file__).parent / "data" / "hf_configs.json").read_text())
MODELS = sorted(k for k in DATA if not k.startswith("_"))


def _write(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("name", MODELS)
def test_parameter_count_within_one_percent_of_the_published_one(tmp_path: Path, name: str) -> None:
    entry = DATA[name]
    shape = hf_config.read(_write(tmp_path, entry["config"]))
    assert shape.params == pytest.approx(entry["published"], rel=0.01)
    if "active" in entry:
        assert shape.active_params == pytest.approx(entry["active"], rel=0.01)
        assert shape.flops_params < shape.params


def test_the_published_set_is_the_one_the_issue_names() -> None:
    for name in ("llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "mistral-7b", "qwen2-7b", "gemma-2b",
                 "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "phi-2", "mixtral-8x7b"):
        assert name in DATA


def test_gemma_ties_embeddings_by_default_llama_does_not(tmp_path: Path) -> None:
    gemma = dict(DATA["gemma-2b"]["config"])
    gemma.pop("tie_word_embeddings", None)
    assert hf_config.read(_write(tmp_path, gemma)).tied_embeddings is True
    llama = dict(DATA["llama2-7b"]["config"])
    llama.pop("tie_word_embeddings", None)
    assert hf_config.read(_write(tmp_path, llama)).tied_embeddings is False


def test_a_missing_field_that_changes_the_count_is_named_not_guessed(tmp_path: Path) -> None:
    llama = dict(DATA["llama2-7b"]["config"])
    del llama["intermediate_size"]
    with pytest.raises(ConfigError, match="intermediate_size"):
        hf_config.read(_write(tmp_path, llama))


def test_training_length_is_not_max_position_embeddings(tmp_path: Path) -> None:
    mistral = DATA["mistral-7b"]["config"]
    shape = hf_config.read(_write(tmp_path, mistral))
    assert shape.seq_len == DEFAULT_SEQ_LEN < mistral["max_position_embeddings"]
    assert hf_config.read(_write(tmp_path, mistral), seq_len=4096).seq_len == 4096


def test_moe_estimate_says_what_it_assumes_and_times_active_parameters(tmp_path: Path) -> None:
    path = _write(tmp_path, DATA["mixtral-8x7b"]["config"])
    est = sm_dist.estimate(hf_config=str(path), tokens=1e9, instance_types=["ml.p4de.24xlarge"],
                           instance_counts=[16], strategies=["fsdp"], activation_checkpointing="full")
    assert any("mixture of experts" in w and "no expert parallelism" in w for w in est.warnings)
    dense = sm_dist.estimate(params=DATA["mixtral-8x7b"]["published"], tokens=1e9,
                             instance_types=["ml.p4de.24xlarge"], instance_counts=[16], strategies=["fsdp"], activation_checkpointing="full")
    moe_step, dense_step = est.rows[0].step, dense.rows[0].step
    assert moe_step is not None and dense_step is not None
    assert moe_step.compute < dense_step.compute / 2  # 12.9B active of 46.7B


def test_a_parsed_config_estimates_like_its_file(tmp_path: Path) -> None:
    """hf_config= takes the parsed object too (a dict, or `config.to_dict()` of a transformers config)."""
    config = DATA["qwen2-7b"]["config"]
    kw = dict(tokens=1e10, instance_types=["ml.p4d.24xlarge"], instance_counts=[2], strategies=["fsdp"])
    from_file = sm_dist.estimate(hf_config=_write(tmp_path, config), **kw)
    from_dict = sm_dist.estimate(hf_config=config, **kw)
    assert from_dict.model["params"] == from_file.model["params"] == hf_config.read(_write(tmp_path, config)).params
    assert from_dict.rows[0].memory == from_file.rows[0].memory
    with pytest.raises(ConfigError, match="hf_config"):
        sm_dist.estimate(hf_config={"model_type": "llama"}, **kw)  # no hidden_size: named, not guessed
