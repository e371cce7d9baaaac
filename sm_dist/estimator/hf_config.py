"""A model's shape read from its own description: a Hugging Face `config.json`, or a user's nn.Module.

Neither transformers nor torch is imported. Two readers:

* `read` / `shape_from_config`: a `config.json` read as transformers' config classes read it.
* `shape_of_module`: an nn.Module, for `estimate(model=module)`, duck-typed. In order of trust:
  1. `module.config` (a Hugging Face `PretrainedConfig`, or a dict with the same keys) is parsed
     as a `config.json` would be: exact.
  2. Otherwise the module's own structure: the blocks are its largest `nn.ModuleList`; the
     embedding gives vocabulary and hidden size; the block's Linears give the MLP width and
     whether it is gated; a norm class named *RMS* gives RMSNorm; heads and kv heads come from
     attributes the attention module carries (num_heads, n_head, num_key_value_heads, ...). What
     cannot be read is guessed (head size 64) and the shape is marked approximate.
  3. No ModuleList of blocks: a GPT-like shape from the parameter count (approximate).

Reading a `config.json`:
Per `model_type`, the defaults of that model's HF config class (`tie_word_embeddings`: False for
LLaMA/Mistral/Mixtral/Qwen2/Phi, True for Gemma, GPT-2 and Falcon; the kv-head default; Gemma's
head_dim 256) and the block layout (gated MLP, biases, norms, parallel attention). A field that
changes the parameter count and has no safe default (e.g. `intermediate_size` of a LLaMA-style
config) is an error naming it, never a guess. MoE configs (Mixtral, Qwen-MoE) give total parameters
(memory) and active parameters (FLOPs). The training sequence length is not `max_position_embeddings`:
it is the caller's `seq_len`, by default `models.DEFAULT_SEQ_LEN` capped at the model's context.
"""

# Annotations evaluated, not postponed (no `from __future__ import annotations`): typing.NamedTuple
# would compile each field's annotation string at import, a visible share of `sm-dist estimate-cost`
# start-up (tests/test_imports.py).

import json
import os
from collections import Counter
from typing import TYPE_CHECKING, Any, NamedTuple

from sm_dist.errors import ConfigError
from sm_dist.estimator.models import shape_from_params
from sm_dist.estimator.shape import DEFAULT_SEQ_LEN, ModelShape, gpt2_params

if TYPE_CHECKING:
    from sm_dist.estimator.inputs import ModuleLike


class Family(NamedTuple):
    """What a model_type's HF class implies beyond the config's own fields."""

    gated: bool  #: gate/up/down MLP (SwiGLU/GeGLU)
    tied: bool  #: the HF config class's default for tie_word_embeddings
    kv_default: bool  #: a missing num_key_value_heads means num_attention_heads
    qkv_bias: bool = False
    norms: int = 2  #: RMSNorms per block
    qk_norm: bool = False  #: Qwen3: RMSNorm over q and k heads
    head_dim: int = 0  #: the class's head_dim default (0: hidden // heads)
    act: str = "silu"


_LLAMA_LIKE: dict[str, Family] = {
    "llama": Family(gated=True, tied=False, kv_default=True),
    "mistral": Family(gated=True, tied=False, kv_default=False),
    "mixtral": Family(gated=True, tied=False, kv_default=False),
    "qwen2": Family(gated=True, tied=False, kv_default=False, qkv_bias=True),
    "qwen2_moe": Family(gated=True, tied=False, kv_default=False, qkv_bias=True),
    "qwen3": Family(gated=True, tied=False, kv_default=False, qk_norm=True),
    "gemma": Family(gated=True, tied=True, kv_default=False, head_dim=256, act="gelu_pytorch_tanh"),
    "gemma2": Family(gated=True, tied=True, kv_default=False, norms=4, head_dim=256, act="gelu_pytorch_tanh"),
    "phi3": Family(gated=True, tied=False, kv_default=True),
    "olmo": Family(gated=True, tied=False, kv_default=True),
}
#: architectures[0] -> model_type, when a config has no model_type (as AutoConfig would need).
_ARCH = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
         "Qwen2ForCausalLM": "qwen2", "Qwen2MoeForCausalLM": "qwen2_moe", "GemmaForCausalLM": "gemma",
         "Gemma2ForCausalLM": "gemma2", "GPT2LMHeadModel": "gpt2", "PhiForCausalLM": "phi",
         "FalconForCausalLM": "falcon", "Qwen3ForCausalLM": "qwen3", "Phi3ForCausalLM": "phi3"}
KNOWN_TYPES = (*_LLAMA_LIKE, "gpt2", "phi", "falcon")
_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")


def read(path: str | os.PathLike[str], seq_len: int | None = None) -> ModelShape:
    """The shape of the decoder-only model a `config.json` describes."""
    text_path = os.fspath(path)
    try:
        with open(text_path, encoding="utf-8") as handle:
            config = json.loads(handle.read())
    except OSError as exc:
        raise ConfigError("hf_config", text_path, f"cannot read it ({exc.strerror}); give the path of a config.json") from exc
    except ValueError as exc:
        raise ConfigError("hf_config", text_path, f"not valid JSON ({exc}); give a Hugging Face config.json") from exc
    if not isinstance(config, dict):
        raise ConfigError("hf_config", text_path, "expected a JSON object (a Hugging Face config.json)")
    config = config.get("text_config", config) if "num_hidden_layers" not in config else config
    return shape_from_config(config, text_path, seq_len)


class _Cfg:
    """Field access that names the field (and the file) when it is missing or not a number."""

    def __init__(self, config: dict[str, Any], path: str, model_type: str) -> None:
        self.config, self.path, self.model_type = config, path, model_type

    def int(self, *keys: str, default: int | None = None) -> int:
        for key in keys:
            if self.config.get(key) is not None:
                value = self.config[key]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 1:
                    raise ConfigError("hf_config", self.path, f"{key}={value!r} is not a positive whole number")
                return int(value)
        if default is not None:
            return default
        raise ConfigError("hf_config", self.path, f"{' / '.join(keys)} is missing; a {self.model_type or 'decoder'} "
                          "config needs it for the parameter count (add it from the model's published config.json)")


def _model_type(config: dict[str, Any], path: str) -> str:
    model_type = str(config.get("model_type") or "").lower()
    if not model_type:
        archs = config.get("architectures") or []
        model_type = _ARCH.get(str(archs[0]) if archs else "", "")
    if not model_type:
        raise ConfigError("hf_config", path, "model_type is missing (and architectures names no known model); "
                          f"add model_type, one of {', '.join(KNOWN_TYPES)}, or give --params N instead")
    if model_type not in KNOWN_TYPES:
        moe = " (an MoE config: a dense count would be wrong)" if any(k in config for k in _MOE_KEYS) else ""
        raise ConfigError("hf_config", path, f"model_type={model_type!r} is not one the estimator knows{moe}; "
                          f"known: {', '.join(KNOWN_TYPES)}; or give --params N (a GPT-like shape)")
    return model_type


def shape_from_config(config: dict[str, Any], path: str, seq_len: int | None = None) -> ModelShape:
    """The shape, parameter counts (total and active) and defaults of one parsed config."""
    model_type = _model_type(config, path)
    cfg = _Cfg(config, path, model_type)
    hidden = cfg.int("hidden_size", "n_embd", "d_model")
    layers = cfg.int("num_hidden_layers", "n_layer", "num_layers")
    heads = cfg.int("num_attention_heads", "n_head")
    vocab = cfg.int("vocab_size")
    positions = cfg.int("max_position_embeddings", "n_positions", "n_ctx", default=0) if model_type != "falcon" else 0
    seq = int(seq_len) if seq_len else min(DEFAULT_SEQ_LEN, positions or DEFAULT_SEQ_LEN)
    name = str(config.get("_name_or_path") or model_type)
    # every HF config class defaults use_cache to True, and the cache is built in training too
    base: dict[str, Any] = {"name": name, "layers": layers, "hidden": hidden, "heads": heads, "vocab": vocab, "seq_len": seq,
            "max_positions": positions, "kv_cache": bool(config.get("use_cache", True))}
    if model_type == "gpt2":
        if hidden % heads:
            raise ConfigError("hf_config", path, f"n_embd={hidden} is not divisible by n_head={heads}")
        return ModelShape(params=gpt2_params(layers, hidden, vocab, positions or 1024), ffn=cfg.int("n_inner", default=4 * hidden),
                          kv_heads=heads, tied_embeddings=True, norm="layernorm",
                          activation=str(config.get("activation_function", "gelu_new")), **base)
    if model_type == "phi":
        return _phi(cfg, base)
    if model_type == "falcon":
        return _falcon(cfg, base)
    return _llama_like(cfg, base, _LLAMA_LIKE[model_type])


def _tied(cfg: _Cfg, default: bool) -> bool:
    value = cfg.config.get("tie_word_embeddings")
    return default if value is None else bool(value)


def _heads(cfg: _Cfg, base: dict[str, Any], family_head_dim: int, kv_default: bool) -> tuple[int, int]:
    """(kv heads, head dim), with the HF class's defaults where it has a safe one."""
    heads, hidden = base["heads"], base["hidden"]
    kv = cfg.int("num_key_value_heads", default=heads if kv_default else None)
    head_dim = cfg.int("head_dim", default=family_head_dim or (hidden // heads if hidden % heads == 0 else None))
    if heads % kv:
        raise ConfigError("hf_config", cfg.path, f"num_attention_heads={heads} is not a multiple of num_key_value_heads={kv}")
    return kv, head_dim


def _llama_like(cfg: _Cfg, base: dict[str, Any], fam: Family) -> ModelShape:
    hidden, heads, layers, vocab = base["hidden"], base["heads"], base["layers"], base["vocab"]
    kv, head_dim = _heads(cfg, base, fam.head_dim, fam.kv_default)
    attn = 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim
    attn += (heads + 2 * kv) * head_dim * fam.qkv_bias + 2 * head_dim * fam.qk_norm
    norms = fam.norms * hidden
    moe = _moe(cfg, hidden, layers)
    if moe is None:
        ffn = cfg.int("intermediate_size")
        block = attn + 3 * hidden * ffn + norms
        total_blocks, active_blocks, active_ffn, experts, top_k = layers * block, layers * block, ffn, 0, 0
    else:
        block, total_blocks, active_blocks, ffn, active_ffn, experts, top_k = moe
        block += attn + norms
        total_blocks += layers * (attn + norms)
        active_blocks += layers * (attn + norms)
    tied = _tied(cfg, fam.tied)
    outside = vocab * hidden * (1 if tied else 2) + hidden
    act = str(cfg.config.get("hidden_act") or cfg.config.get("hidden_activation") or fam.act)
    return ModelShape(params=total_blocks + outside, ffn=ffn, kv_heads=kv, gated_mlp=True, tied_embeddings=tied,
                      activation=act, head_dim=head_dim if head_dim * heads != hidden else 0, experts=experts,
                      experts_per_token=top_k, active_params=(active_blocks + outside) if experts else 0,
                      active_ffn=active_ffn if experts else 0, block_params=block, **base)


def _moe(cfg: _Cfg, hidden: int, layers: int) -> tuple[int, int, int, int, int, int, int] | None:
    """MoE MLP parameters: (largest block MLP, total, active, expert ffn, active ffn, experts, top-k), or None.

    Mixtral: `num_local_experts` SwiGLU experts of `intermediate_size`, a router, top
    `num_experts_per_tok`. Qwen-MoE: `num_experts` of `moe_intermediate_size`, a shared expert of
    `shared_expert_intermediate_size` with a one-output gate; layers in `mlp_only_layers` (or off
    the `decoder_sparse_step`) are dense with `intermediate_size`.
    """
    config = cfg.config
    if cfg.model_type == "mixtral":
        experts, top_k, ffn = cfg.int("num_local_experts"), cfg.int("num_experts_per_tok"), cfg.int("intermediate_size")
        router, shared = hidden * experts, 0
        sparse_layers = set(range(layers))
    elif cfg.model_type == "qwen2_moe":
        experts, top_k = cfg.int("num_experts"), cfg.int("num_experts_per_tok")
        ffn = cfg.int("moe_intermediate_size")
        shared_ffn = cfg.int("shared_expert_intermediate_size", default=0) if "shared_expert_intermediate_size" in config else 0
        shared = 3 * hidden * shared_ffn + (hidden if shared_ffn else 0)
        router = hidden * experts
        step = cfg.int("decoder_sparse_step", default=1)
        dense_only = set(config.get("mlp_only_layers") or [])
        sparse_layers = {i for i in range(layers) if i not in dense_only and (i + 1) % step == 0}
    else:
        return None
    sparse = router + shared + experts * 3 * hidden * ffn
    active = router + shared + top_k * 3 * hidden * ffn
    dense = 3 * hidden * cfg.int("intermediate_size") if len(sparse_layers) < layers else 0
    n_sparse, n_dense = len(sparse_layers), layers - len(sparse_layers)
    shared_width = (shared - hidden) // (3 * hidden) if shared else 0
    return (max(sparse, dense), n_sparse * sparse + n_dense * dense, n_sparse * active + n_dense * dense,
            ffn, top_k * ffn + shared_width, experts, top_k)


def _phi(cfg: _Cfg, base: dict[str, Any]) -> ModelShape:
    """Phi-1/1.5/2: parallel attention and MLP after one LayerNorm, biases everywhere, untied lm_head with a bias."""
    hidden, vocab = base["hidden"], base["vocab"]
    kv, head_dim = _heads(cfg, base, 0, True)
    ffn = cfg.int("intermediate_size")
    attn = 2 * (hidden * base["heads"] * head_dim + base["heads"] * head_dim) + 2 * (hidden * kv * head_dim + kv * head_dim)
    block = attn + 2 * hidden * ffn + ffn + hidden + 2 * hidden
    tied = _tied(cfg, False)
    params = base["layers"] * block + vocab * hidden * (1 if tied else 2) + (0 if tied else vocab) + 2 * hidden
    return ModelShape(params=params, ffn=ffn, kv_heads=kv, tied_embeddings=tied, norm="layernorm",
                      activation=str(cfg.config.get("hidden_act", "gelu_new")), block_params=block, **base)


def _falcon(cfg: _Cfg, base: dict[str, Any]) -> ModelShape:
    """Falcon: fused qkv (multi_query: one kv head; new_decoder_architecture: num_kv_heads), a 4h GELU MLP, tied."""
    hidden, heads = base["hidden"], base["heads"]
    config = cfg.config
    new_arch = bool(config.get("new_decoder_architecture", False))
    if new_arch:
        kv = cfg.int("num_kv_heads", default=heads)
    else:
        kv = 1 if config.get("multi_query", True) else heads  # FalconConfig's default multi_query=True
    head_dim = hidden // heads
    ffn = cfg.int("ffn_hidden_size", default=4 * hidden)
    bias = bool(config.get("bias", False))
    block = hidden * (heads + 2 * kv) * head_dim + hidden * hidden + 2 * hidden * ffn
    block += bias * ((heads + 2 * kv) * head_dim + 2 * hidden + ffn)
    parallel = bool(config.get("parallel_attn", True))
    block += 2 * hidden * (2 if new_arch or not parallel else 1)  # LayerNorm weight + bias
    tied = _tied(cfg, True)
    params = base["layers"] * block + base["vocab"] * hidden * (1 if tied else 2) + 2 * hidden
    return ModelShape(params=params, ffn=ffn, kv_heads=kv, tied_embeddings=tied, norm="layernorm", activation="gelu",
                      block_params=block, **base)


# -- an nn.Module's shape -----------------------------------------------------------------------------

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


def shape_of_module(module: "ModuleLike", params: int, seq_len: int | None = None) -> tuple[ModelShape, str]:
    """(shape, how it was found) for an nn.Module with `params` parameters (the module docstring's order of trust)."""
    name = type(module).__name__
    config = _config_dict(module)
    if config is not None:
        try:
            shape = shape_from_config(config, f"{name}.config", seq_len)
            return shape._replace(params=params, name=name), f"shape from {name}.config ({_summary(shape)})"
        except ConfigError as exc:
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


def _from_structure(module: "ModuleLike", params: int, seq_len: int | None) -> ModelShape | None:
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


__all__ = ["read", "shape_from_config", "shape_of_module", "KNOWN_TYPES", "GUESSED_HEAD_DIM"]
