"""Model shapes from a name or a number: presets, a GPT-like shape from a parameter count, and
the exact count of an nn.Module's parameters.

The estimator needs the parameter count (memory, FLOPs) and the transformer shape (layers,
hidden size, heads, vocabulary, sequence length) for activations and FSDP unit sizes. The other
sources of a shape are in hf_config.py (a `config.json`, or an nn.Module's `.config` or
structure); the record itself is shape.py. Standard library only; no torch or transformers import.
"""

from __future__ import annotations

from sm_dist._records import TYPE_CHECKING
from sm_dist.errors import CatalogError, ConfigError
from sm_dist.estimator.shape import DEFAULT_SEQ_LEN, DEFAULT_VOCAB, ModelShape, gpt2_params, llama_params
from sm_dist.vocab import did_you_mean

if TYPE_CHECKING:
    from sm_dist.estimator.inputs import ModuleLike

#: hidden size / layers ≈ 128 in GPT-3 and LLaMA family shapes (Brown 2020 Table 2.1;
#: Touvron 2023); with 12·L·h² parameters per stack this fixes h from Ψ.
HIDDEN_PER_LAYER = 128
HEAD_DIM = 128


def _gpt2(name: str, layers: int, hidden: int, heads: int, positions: int = 1024,
          activation: str = "gelu_new") -> ModelShape:
    """GPT-2 (and GPT-3's shape, Brown et al. 2020 Table 2.1: same block, 2048 positions).

    GPT-2's activation is its Hugging Face config's "gelu_new" (tensor arithmetic, see
    activations.UNFUSED_ACTIVATIONS); GPT-3 175B has no HF implementation and is trained with
    fused kernels (Megatron's bias-GeLU fusion), so its preset says "gelu".
    """
    params = gpt2_params(layers, hidden, 50257, positions)
    return ModelShape(name, params, layers, hidden, heads, 50257, positions, 4 * hidden, heads, tied_embeddings=True,
                      norm="layernorm", activation=activation, max_positions=positions)


def _llama(name: str, layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, seq: int) -> ModelShape:
    params = llama_params(layers, hidden, vocab, ffn, heads, kv)
    return ModelShape(name, params, layers, hidden, heads, vocab, seq, ffn, kv, gated_mlp=True, max_positions=seq)


#: Shapes from the models' published config.json files (Hugging Face hub).
PRESETS: dict[str, ModelShape] = {
    m.name: m
    for m in (
        _gpt2("gpt2", 12, 768, 12),
        _gpt2("gpt2-medium", 24, 1024, 16),
        _gpt2("gpt2-large", 36, 1280, 20),
        _gpt2("gpt2-xl", 48, 1600, 25),
        _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
        _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
        _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
        _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
        _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
        _llama("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 8192),
        _gpt2("gpt3-175b", 96, 12288, 96, positions=2048, activation="gelu"),
    )
}


def preset(name: str) -> ModelShape:
    """A preset by name ("llama2-7b"), or CatalogError with a suggestion."""
    key = str(name).strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    raise CatalogError(
        "model", name, f"unknown model preset{did_you_mean(key, list(PRESETS))}; known: {', '.join(PRESETS)}; "
        "or give --params N or --hf-config config.json"
    )


def shape_from_params(params: int) -> ModelShape:
    """A GPT-like shape with about `params` parameters (h/L ≈ 128); marked approximate."""
    if int(params) < 1:
        raise ConfigError("params", params, "expected a positive parameter count, e.g. 7e9")
    # Ψ ≈ 12·L·h² with L = h/128  ->  h³ = 128·Ψ/12, rounded to whole heads
    hidden = max(HEAD_DIM, int(round((HIDDEN_PER_LAYER * params / 12) ** (1 / 3) / HEAD_DIM)) * HEAD_DIM)
    layers = max(1, int(round(params / (12 * hidden * hidden))))
    heads = hidden // HEAD_DIM
    return ModelShape(
        f"gpt-like-{_short(params)}", int(params), layers, hidden, heads, DEFAULT_VOCAB, DEFAULT_SEQ_LEN,
        4 * hidden, heads, approximate=True,
    )


def _short(params: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if params >= size:
            return f"{params / size:.3g}{unit}"
    return str(int(params))


def with_params(shape: ModelShape, params: int, name: str | None = None) -> ModelShape:
    """`shape` with an exact parameter count (e.g. counted from an nn.Module)."""
    return shape._replace(params=int(params), name=name or shape.name)


def count_module_params(module: ModuleLike) -> tuple[int, int]:
    """(parameters, buffer bytes) of a torch nn.Module; tied weights count once. Duck-typed, so
    this module never imports torch."""
    seen: set[int] = set()
    params = 0
    for p in module.parameters():
        if id(p) not in seen:  # tied weights count once
            seen.add(id(p))
            params += p.numel()
    buffers = sum(b.numel() * b.element_size() for b in module.buffers())
    return int(params), int(buffers)


__all__ = ["ModelShape", "PRESETS", "DEFAULT_SEQ_LEN", "DEFAULT_VOCAB", "preset", "shape_from_params",
           "with_params", "count_module_params", "llama_params", "gpt2_params"]
