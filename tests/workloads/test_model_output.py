"""The final model file and the sha256 of its weights."""

from __future__ import annotations

from pathlib import Path

import torch

from sm_dist.runtime.model_output import (
    SHA_FILENAME,
    load_model,
    state_dict_sha256,
    write_model,
)


def _state(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"b.weight": torch.randn(3, 2, generator=g), "a.bias": torch.randn(3, generator=g),
            "n": torch.tensor(5)}


def test_sha_depends_on_values_not_insertion_order() -> None:
    state = _state(0)
    reordered = dict(reversed(list(state.items())))
    assert state_dict_sha256(state) == state_dict_sha256(reordered)
    assert state_dict_sha256(state) != state_dict_sha256(_state(1))


def test_sha_sees_dtype_shape_and_names() -> None:
    state = _state(0)
    base = state_dict_sha256(state)
    assert state_dict_sha256({**state, "n": torch.tensor(5, dtype=torch.int32)}) != base
    assert state_dict_sha256({**state, "b.weight": state["b.weight"].reshape(2, 3)}) != base
    assert state_dict_sha256({("x." + k): v for k, v in state.items()}) != base


def test_bf16_weights_hash() -> None:
    state = {"w": torch.ones(4, dtype=torch.bfloat16)}
    assert len(state_dict_sha256(state)) == 64


def test_write_and_load_round_trip(tmp_path: Path) -> None:
    state = _state(3)
    path, sha = write_model(state, tmp_path / "model")
    loaded = load_model(path)
    assert sorted(loaded) == sorted(state)
    assert all(torch.equal(loaded[k], state[k]) for k in state)
    assert state_dict_sha256(loaded) == sha
    assert (tmp_path / "model" / SHA_FILENAME).read_text().strip() == sha
    assert not list((tmp_path / "model").glob("*.tmp"))
