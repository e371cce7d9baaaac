"""The transformer shape of a user's nn.Module, for `estimate(model=module)`: duck-typed, no torch import.

In order of trust:

1. `module.config` (a Hugging Face `PretrainedConfig`, or a dict with the same keys) is parsed
   as a `config.json` would be (hf_config.shape_from_config): exact.
2. Otherwise the module's own structure: the blocks are its largest `nn.ModuleList`; the
   embedding gives vocabulary and hidden size; the block's Linears give the MLP width and
   whether it is gated; a norm class named *RMS* gives RMSNorm; heads and kv heads come from
   attributes the attention module carries (num_heads, n_head, num_key_value_heads, ...). What
   cannot be read is guessed (head size 64) and the shape is marked approximate.
3. No ModuleList of blocks: a GPT-like shape from the parameter count (approximate).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from sm_dist.errors import ConfigError
from sm_dist.estimator import hf_config
from sm_dist.estimator.models import shape_from_params
from sm_dist.estimator.shape import DEFAULT_SEQ_LEN, ModelShape

if TYPE_CHECKING:
    from sm_dist.estimator.inputs import ModuleLike

log = logging.getLogger(__name__)

_HEAD_KEYS = ("num_heads", "num_attention_heads", "n_head", "n_heads", "nheads")
_KV_KEYS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "kv_heads", "n_kv_head")
#: Head size assumed when a module names no head count (GPT-2, BERT and many small models).
GUESSED_HEAD_DIM = 64


def _config_dict(module: object) -> dict[str, Any] | None:
    config = getattr(module, "config", None)
    if isinstance(config, dict):
        return dict(config)
    if config is not None and callable(getattr(config, "to_dict", None)):
        return dict(config.to_dict())
    return None


def shape_of_module(module: ModuleLike, params: int, seq_len: int | None = None) -> tuple[ModelShape, str]:
    """(shape, how it was found) for an nn.Module with `params` parameters (see the module docstring)."""
    name = type(module).__name__
    config = _config_dict(module)
    if config is not None:
        try:
            shape = hf_config.shape_from_config(config, f"{name}.config", seq_len)
            return shape._replace(params=params, name=name), f"shape from {name}.config ({_summary(shape)})"
        except ConfigError as exc:
            log.debug("%s.config not usable: %s", name, exc)
            reason = f"{name}.config not usable ({exc}); "
    else:
        reason = ""
    read = _from_structure(module, params, seq_len)
    if read is None:
        guess = shape_from_params(params)._replace(params=params, name=name)
        return guess, (f"{reason}no nn.ModuleList of blocks: a GPT-like shape from the parameter count "
                       f"({_summary(guess)}), so activations are approximate")
    how = "approximate (heads guessed)" if read.approximate else "exact for the activation model"
    return read._replace(name=name), f"{reason}shape read from the module ({_summary(read)}; {how})"


def _summary(shape: ModelShape) -> str:
    mlp = f"{'gated ' if shape.gated_mlp else ''}MLP {shape.ffn}"
    return (f"{shape.layers} layers, hidden {shape.hidden}, heads {shape.heads}/{shape.kv_heads} kv, {mlp}, "
            f"{shape.norm}, vocab {shape.vocab}")


def _kind(module: object) -> str:
    return type(module).__name__


def _int_attr(modules: list[object], keys: tuple[str, ...]) -> int | None:
    for sub in modules:
        for key in keys:
            value = getattr(sub, key, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _activation(modules: list[object], gated: bool) -> str:
    """Hugging Face's arithmetic GELU (NewGELUActivation) keeps more than a fused kernel: name it."""
    if any(_kind(m) == "NewGELUActivation" for m in modules):
        return "gelu_new"
    return "silu" if gated else "gelu"


def _from_structure(module: ModuleLike, params: int, seq_len: int | None) -> ModelShape | None:
    # submodules are read by duck typing (len of a ModuleList, a Linear's in/out features): Any
    subs: list[Any] = list(module.modules())
    lists = [m for m in subs if _kind(m) == "ModuleList" and len(m)]
    if not lists:
        return None
    blocks = max(lists, key=lambda m: sum(p.numel() for p in m.parameters()))
    inner = list(blocks[0].modules())
    linears = [(m.in_features, m.out_features) for m in inner if hasattr(m, "in_features") and hasattr(m, "out_features")]
    embeddings = sorted((m.num_embeddings, m.embedding_dim) for m in subs if _kind(m) == "Embedding")
    hidden = embeddings[-1][1] if embeddings else (Counter(i for i, _ in linears).most_common(1)[0][0] if linears else 0)
    if not hidden:
        return None
    vocab = embeddings[-1][0] if embeddings else max((o for _, o in linears), default=hidden)
    from_hidden = [o for i, o in linears if i == hidden]
    ffn = max(from_hidden, default=4 * hidden)
    gated = from_hidden.count(ffn) >= 2 and ffn != hidden
    norm = "rmsnorm" if any("rms" in _kind(m).lower() for m in inner) else "layernorm"
    named = _int_attr(inner, _HEAD_KEYS)
    guessed = named is None or hidden % named != 0
    heads = max(1, hidden // GUESSED_HEAD_DIM) if named is None or guessed else named
    kv = _int_attr(inner, _KV_KEYS) or heads
    positions = [n for n, d in embeddings[:-1] if d == hidden]
    seq = int(seq_len) if seq_len else min(DEFAULT_SEQ_LEN, max(positions, default=DEFAULT_SEQ_LEN))
    return ModelShape(
        name="", params=params, layers=len(blocks), hidden=hidden, heads=heads, vocab=vocab, seq_len=seq, ffn=ffn,
        kv_heads=kv, gated_mlp=gated, approximate=guessed, norm=norm,
        activation=_activation(inner, gated), max_positions=max(positions, default=0),
    )


__all__ = ["shape_of_module", "GUESSED_HEAD_DIM"]
