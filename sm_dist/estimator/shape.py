"""The shape record every estimator part reads: `ModelShape`, and the exact parameter counts
of the two block layouts the presets use.

The floor below the shape sources (presets and counts in models.py, a `config.json` or an
nn.Module in hf_config.py) and the formulas that read a shape (activations,
grid): each of them imports this module, and this module imports nothing of the estimator.
"""

from __future__ import annotations

from sm_dist._records import Record

#: vocabulary and context assumed when only a parameter count is given (LLaMA-1/2 tokenizer).
DEFAULT_VOCAB = 32_000
DEFAULT_SEQ_LEN = 2048


# NamedTuple, not a frozen dataclass: immutable all the same and ~7x cheaper to define, which
# matters for `sm-dist estimate-cost` start-up (tests/bench/bench_cli_startup.py).
class ModelShape(Record):
    """A decoder-only transformer, as far as the estimator cares."""

    name: str
    params: int  #: exact parameter count (or the given --params)
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int  #: default training context
    ffn: int  #: MLP inner size
    kv_heads: int
    gated_mlp: bool = False
    tied_embeddings: bool = False
    approximate: bool = False  #: True when the shape was derived from a count, not known
    norm: str = "rmsnorm"  #: "rmsnorm" or "layernorm" (LayerNorm also saves mean and rstd)
    activation: str = "silu"  #: the MLP's activation (hidden_act)
    head_dim: int = 0  #: 0: hidden // heads (Gemma sets its own)
    experts: int = 0  #: MoE experts per layer (0: dense)
    experts_per_token: int = 0  #: MoE top-k
    active_params: int = 0  #: parameters one token passes through (FLOPs); 0: all of them
    active_ffn: int = 0  #: MLP inner width one token passes through (MoE: top-k experts + shared); 0: ffn
    block_params: int = 0  #: one block's parameters when known exactly (MoE: every expert); 0: derived
    max_positions: int = 0  #: the model's maximum context (max_position_embeddings), 0 when unknown
    kv_cache: bool = False  #: a KV cache is built while training (Hugging Face `use_cache`, on by default)

    @property
    def flops_params(self) -> int:
        """Parameters per token for FLOPs: the active ones for MoE, all of them otherwise."""
        return self.active_params or self.params

    @property
    def mlp_width(self) -> int:
        """MLP inner width per token (activations): top-k experts plus shared experts for MoE."""
        return self.active_ffn or self.ffn

    @property
    def layer_params(self) -> int:
        """Parameters of one transformer block (the FSDP unit)."""
        if self.block_params:
            return self.block_params
        head_dim = self.hidden // self.heads
        attn = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_heads * head_dim
        mlp = (3 if self.gated_mlp else 2) * self.hidden * self.ffn
        return attn + mlp + 2 * self.hidden

    @property
    def largest_unit_params(self) -> int:
        """The largest FSDP unit: a block, or the embedding when that is bigger."""
        return max(self.layer_params, self.vocab * self.hidden)


def llama_params(layers: int, hidden: int, vocab: int, ffn: int, heads: int, kv_heads: int, tied: bool = False) -> int:
    """Exact parameter count of a LLaMA-style model (no biases, RMSNorm, gated MLP)."""
    head_dim = hidden // heads
    block = 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim + 3 * hidden * ffn + 2 * hidden
    return layers * block + vocab * hidden * (1 if tied else 2) + hidden


def gpt2_params(layers: int, hidden: int, vocab: int, positions: int) -> int:
    """Exact parameter count of a GPT-2-style model (biases, LayerNorm, tied output)."""
    block = 4 * hidden + (hidden * 3 * hidden + 3 * hidden) + (hidden * hidden + hidden)
    block += (hidden * 4 * hidden + 4 * hidden) + (4 * hidden * hidden + hidden)
    return vocab * hidden + positions * hidden + layers * block + 2 * hidden


__all__ = ["ModelShape", "DEFAULT_VOCAB", "DEFAULT_SEQ_LEN", "llama_params", "gpt2_params"]
