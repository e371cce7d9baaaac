"""Activation memory per GPU: what autograd keeps for backward, block by block, from the shape.

The bookkeeping follows Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", arXiv:2205.05198, §4: count every tensor a layer saves for its backward),
applied to the blocks people train today and to the kernels and precision rules PyTorch uses:

- attention: q (heads·head_dim), k and v (kv_heads·head_dim each, so GQA/MQA keep less), the
  output and the fp32 log-sum-exp per head. A flash/SDPA kernel keeps no s×s scores; "eager"
  attention (checkpointing "none" only) adds the fp32 softmax, its 16-bit copy for the second
  matmul and the repeated k/v and output copies.
- attention under a KV cache (Hugging Face's `use_cache`, on by default and built in training
  too): the cache's k and v are concatenated copies; where q, k and v are views of one fused
  projection (GPT-2, Falcon) the copies come on top of it, elsewhere they replace k and v.
- MLP: a fused GELU keeps its input and output (2·ffn); Hugging Face's "gelu_new" (GPT-2, Phi),
  written as Python arithmetic, keeps five ffn-wide intermediates; gated SwiGLU/GeGLU keeps
  gate, activation, up and product (4·ffn), with the model's own intermediate size. MoE: the
  top-k experts' (and shared experts') MLPs, plus each routed copy of the token and its expert's
  output (2·k·h) and the router's fp32 softmax; the experts are grouped matmuls, which CUDA
  autocast does not cast, so under amp (fp32 weights) they keep fp32.
- norms: LayerNorm keeps its fp32 input (and mean/rstd); RMSNorm as Hugging Face writes it
  keeps the fp32 input and the normalised result. Under autocast every Linear reading an fp32
  norm output keeps its own 16-bit copy, so separate q/k/v (or gate/up) projections keep three
  (two) copies where GPT-2's fused qkv keeps one.
- precision as CUDA autocast applies it: matmul inputs 16-bit (2 bytes) under amp/mixed/bf16,
  norms, softmax and the loss in fp32; fp32 training keeps everything in 4 bytes. The residual
  stream is fp32 under amp (fp32 weights) and bf16 under mixed/bf16 (bf16 working weights).
- dropout (off unless asked: LLaMA-family configs train without it): CUDA keeps a bool mask per
  dropped element, 1 byte (two h-wide residual masks; eager attention adds an s×s one). Not
  measured: CPU dropout keeps its mask in the input's dtype.
- the head: the final norm, the head's input and the fp32 log-softmax of the loss (4·v).
- recompute: "selective" recomputes attention scores (what SDPA does anyway); "full" keeps
  each block's input (the residual: 4·s·b·h under amp, 2 under mixed) plus one block's
  activations while it is re-run in backward.

Checked against saved-tensor measurements of GPT-2, LLaMA and Qwen2-proportioned blocks
(tests/runtime/test_activation_fidelity.py, sm_dist.tools.saved_tensors).
"""

from __future__ import annotations

from sm_dist._records import TYPE_CHECKING, Record
from sm_dist.errors import ConfigError
from sm_dist.vocab import Precision, parse_enum

if TYPE_CHECKING:
    from typing import TypedDict, TypeVar

    from typing_extensions import Unpack  # typing.Unpack is 3.11+

    from sm_dist.estimator.shape import ModelShape

#: Activation checkpointing modes, from most to least memory. "selective-op" is torchtitan's per-operator
#: policy (its default for Llama 3 8B): each block is checkpointed, and autograd keeps the block's input,
#: every other matmul output (the 1st, 3rd, ... of the block) and the attention kernel's output; the rest
#: is recomputed in backward (docs/PLATFORM.md §11).
CHECKPOINTING = ("none", "selective", "selective-op", "full")
#: Attention kernels: "flash" (SDPA flash/memory-efficient, FlashAttention) or "eager" (matmul-softmax-matmul).
ATTENTION_KERNELS = ("flash", "eager")
#: Bytes of one fp32 element: norms, softmax, log-sum-exp and the loss run in fp32 under
#: CUDA autocast (its fp32 op list, aten/src/ATen/autocast_mode.cpp).
FP32 = 4
#: Bytes of a matmul input under autocast (bf16/fp16).
HALF = 2
#: Bytes per logit kept for the loss: cross-entropy runs in fp32 and keeps its log-softmax.
LOGIT_BYTES = FP32
#: Bytes per logit the loss's backward holds beside the saved log-softmax: log_softmax's backward reads the
#: incoming gradient (fp32) and writes its own (fp32) while the saved output is alive (torchtitan and Hugging
#: Face both upcast the logits before cross_entropy).
LOSS_BACKWARD_LOGIT_BYTES = 2 * FP32
#: Activations Hugging Face writes as Python arithmetic (transformers.activations.NewGELUActivation,
#: GPT-2's and Phi's "gelu_new"): autograd keeps every intermediate, 16·ffn bytes per token under
#: autocast instead of a fused GELU's 4·ffn. Other names are taken as fused kernels (F.gelu, F.silu).
UNFUSED_ACTIVATIONS = frozenset({"gelu_new"})
#: Kept for callers that scale the old 16-bit formula: fp32 training stores activations in 4 bytes.
ACTIVATION_SCALE = {Precision.FP32: 2.0, Precision.AMP: 1.0, Precision.MIXED: 1.0, Precision.BF16: 1.0}


class Block(Record):
    """What the activation model needs of one transformer block."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int  #: MLP inner width one token passes through (MoE: top-k experts + shared)
    gated: bool
    norm: str  #: "layernorm" or "rmsnorm"
    fused_qkv: bool  #: one qkv projection (GPT-2, Falcon) rather than separate q/k/v
    attention: str = "flash"
    dropout: bool = False
    activation: str = "gelu"  #: the MLP's activation (hidden_act); see UNFUSED_ACTIVATIONS
    experts: int = 0  #: MoE experts per layer (0: dense)
    experts_per_token: int = 0  #: MoE top-k
    kv_cache: bool = False  #: a KV cache is built in the forward (Hugging Face use_cache)


def parse_checkpointing(value: object) -> str:
    """Normalise an --activation-checkpointing value ("none", "selective", "full")."""
    text = "none" if value in (None, False) else ("full" if value is True else str(value).strip().lower())
    text = "selective-op" if text in ("op", "selective_op") else text
    if text not in CHECKPOINTING:
        raise ConfigError("activation_checkpointing", value, f"expected one of {', '.join(CHECKPOINTING)}")
    return text


if TYPE_CHECKING:  # for type checkers only: `typing` stays off estimate-cost's path (sm_dist/_records.py)
    class BlockOverrides(TypedDict, total=False):
        """Keywords of `block_from` / `activation_bytes` that override what the shape says."""

        kv_heads: int
        head_dim: int
        ffn: int
        gated: bool
        norm: str
        fused_qkv: bool
        attention: str
        dropout: bool
        activation: str
        experts: int
        experts_per_token: int
        kv_cache: bool

    _T = TypeVar("_T")


#: BlockOverrides' keys, at run time: every Block field but the two always given.
_OVERRIDES = frozenset(Block._fields) - {"hidden", "heads"}


def block_from(shape: ModelShape | None = None, *, hidden: int, heads: int, **given: Unpack[BlockOverrides]) -> Block:
    """A Block from a ModelShape, with explicit keywords taking precedence.

    Without a shape the block is GPT-2's: MHA through a fused qkv, GELU 4h, LayerNorm.
    """
    def pick(value: _T | None, from_shape: _T, default: _T) -> _T:
        if value is not None:
            return value
        return from_shape if shape is not None else default

    kv = pick(given.get("kv_heads"), (shape.kv_heads if shape else 0) or heads, heads)
    head_dim = pick(given.get("head_dim"), (shape.head_dim if shape else 0) or hidden // heads, hidden // heads)
    ffn = pick(given.get("ffn"), (shape.mlp_width if shape else 0) or 4 * hidden, 4 * hidden)
    gated = bool(pick(given.get("gated"), shape.gated_mlp if shape else False, False))
    norm = pick(given.get("norm"), shape.norm if shape else "rmsnorm", "layernorm").lower()
    if norm not in ("layernorm", "rmsnorm"):
        raise ConfigError("norm", norm, "expected layernorm or rmsnorm")
    # GPT-2 and Falcon project q, k, v with one Linear; LLaMA-family models with three
    fused = bool(pick(given.get("fused_qkv"), norm == "layernorm" and not gated, norm == "layernorm" and not gated))
    attention = str(given.get("attention") or "flash").lower()
    if attention not in ATTENTION_KERNELS:
        raise ConfigError("attention", attention, f"expected one of {', '.join(ATTENTION_KERNELS)}")
    activation = pick(given.get("activation"), shape.activation if shape else "gelu", "gelu").lower()
    experts = pick(given.get("experts"), shape.experts if shape else 0, 0) or 0
    top_k = pick(given.get("experts_per_token"), shape.experts_per_token if shape else 0, 0) or 0
    cache = bool(pick(given.get("kv_cache"), shape.kv_cache if shape else False, False))
    return Block(int(hidden), int(heads), int(kv), int(head_dim), int(ffn), gated, norm, fused, attention,
                 bool(given.get("dropout")), activation, int(experts), int(top_k) if experts else 0, cache)


def _norm_bytes(block: Block, precision: Precision, consumers: int) -> float:
    """Bytes per token one norm keeps, with `consumers` Linears reading its output."""
    h = block.hidden
    autocast = precision is not Precision.FP32
    if block.norm == "layernorm":  # fp32 input (the cast copy under mixed) + fp32 mean and rstd
        kept = FP32 * h + 2 * FP32
    else:  # HF RMSNorm: fp32 input, rstd, and the normalised result in the working dtype
        kept = FP32 * h + FP32 + (HALF if precision in (Precision.MIXED, Precision.BF16) else FP32) * h
    if not autocast:
        return kept + FP32 * h  # the output, one tensor for every consumer
    if precision is Precision.AMP or block.norm == "layernorm":
        return kept + consumers * HALF * h  # fp32 output: each Linear keeps its own 16-bit cast
    return kept + HALF * h  # bf16 output (weight · bf16 result), shared


def _attention_bytes(block: Block, precision: Precision, eager: bool) -> float:
    m = FP32 if precision is Precision.FP32 else HALF
    q, kv = block.heads * block.head_dim, block.kv_heads * block.head_dim
    # a KV cache's concatenated k and v: extra where q keeps the fused projection's whole output alive
    cache = m * 2 * kv if block.kv_cache and block.fused_qkv else 0
    if not eager:  # q, k, v, the output (read in place by the output projection), log-sum-exp
        return m * (2 * q + 2 * kv) + FP32 * block.heads + cache
    return m * 4 * q + cache  # q, k and v repeated to every head, the output copied for the projection


def _scores_bytes(block: Block, precision: Precision, seq_len: int) -> float:
    """Eager attention's s×s terms per token: the fp32 softmax, and what the second matmul reads
    (the 16-bit copy under autocast; with dropout, CUDA's bool mask and the dropped probabilities)."""
    m = FP32 if precision is Precision.FP32 else HALF
    if block.dropout:
        per = FP32 + 1 + m
    else:
        per = FP32 + (0 if precision is Precision.FP32 else HALF)
    return per * block.heads * seq_len


def _routing_bytes(block: Block, precision: Precision) -> float:
    """MoE beyond the experts' MLPs: each of the top-k copies of a token gathered for its expert
    and that expert's output kept for the weighted sum, plus the router's fp32 softmax."""
    if not block.experts:
        return 0.0
    return _expert_bytes(precision) * 2 * block.experts_per_token * block.hidden + FP32 * block.experts


def _expert_bytes(precision: Precision) -> int:
    """Bytes per element inside MoE experts: Hugging Face runs them as grouped matmuls, which
    CUDA autocast does not cast (no AutocastCUDA kernel for aten::_grouped_mm), so fp32 weights
    (fp32, amp) keep fp32 activations; bf16 working weights (mixed, bf16) keep bf16."""
    return FP32 if precision in (Precision.FP32, Precision.AMP) else HALF


def _mlp_bytes(block: Block, precision: Precision) -> float:
    """The MLP's activations per token (its input belongs to the norm before it)."""
    m = FP32 if precision is Precision.FP32 else HALF
    if block.gated:  # gate output, activation output, up output, their product
        m = _expert_bytes(precision) if block.experts else m
        return m * 4 * block.ffn + _routing_bytes(block, precision)
    if block.activation in UNFUSED_ACTIVATIONS:
        # HF NewGELUActivation: pow keeps an fp32 input (CUDA autocast runs pow in fp32), tanh its
        # fp32 output, the product 1+tanh (fp32) and 0.5·x (input dtype), and the fp32 result is
        # cast again for the down projection; in fp32 all five are 4 bytes
        return (FP32 * 5 if precision is Precision.FP32 else FP32 * 3 + HALF * 2) * block.ffn
    return m * 2 * block.ffn  # a fused activation keeps its input; the down projection its output


def block_bytes_per_token(block: Block, precision: Precision, checkpointing: str, seq_len: int) -> float:
    """Bytes one block keeps per token (s·b = 1) with every activation stored."""
    eager = block.attention == "eager" and checkpointing == "none"
    total = _norm_bytes(block, precision, 1 if block.fused_qkv else 3)
    total += _attention_bytes(block, precision, eager) + (_scores_bytes(block, precision, seq_len) if eager else 0)
    # the MLP's norm feeds gate and up (one router instead for MoE, whose experts gather the output)
    total += _norm_bytes(block, precision, 1 if block.experts or not block.gated else 2)
    total += _mlp_bytes(block, precision)
    if block.dropout:
        total += 2 * block.hidden  # bool masks after attention and after the MLP
    return total


def residual_bytes(precision: Precision) -> int:
    """Bytes per element of the residual stream (a block's input)."""
    return HALF if precision in (Precision.MIXED, Precision.BF16) else FP32


def _matmul_widths(block: Block) -> list[int]:
    """The width of every matmul output of one block, in forward order (what torchtitan's policy counts)."""
    q, kv = block.heads * block.head_dim, block.kv_heads * block.head_dim
    attention = [q + 2 * kv] if block.fused_qkv else [q, kv, kv]
    mlp = [block.ffn, block.ffn, block.hidden] if block.gated else [block.ffn, block.hidden]
    return attention + [block.hidden] + mlp


def op_saved_bytes_per_token(block: Block, precision: Precision) -> float:
    """Bytes per token one block keeps under per-operator selective checkpointing: its input (the
    residual), every other matmul output (the 1st, 3rd, ...; torchtitan saves "all compute ops, except
    every second mm") and the attention kernel's output and fp32 log-sum-exp."""
    m = FP32 if precision is Precision.FP32 else HALF
    saved = sum(width for i, width in enumerate(_matmul_widths(block)) if i % 2 == 0)
    return residual_bytes(precision) * block.hidden + m * (saved + block.heads * block.head_dim) + FP32 * block.heads


def layer_activation_bytes(seq_len: int, micro_batch: int, hidden: int, heads: int, checkpointing: str,
                           precision: object = Precision.MIXED, block: Block | None = None) -> float:
    """Bytes one layer keeps for backward (full: its input only)."""
    return _layer_bytes(seq_len * micro_batch, seq_len, parse_checkpointing(checkpointing),
                        parse_enum(Precision, precision, "precision"), block or block_from(hidden=hidden, heads=heads))


def _layer_bytes(tokens: int, seq_len: int, mode: str, precision: Precision, block: Block) -> float:
    """`layer_activation_bytes` of a parsed mode and precision."""
    if mode == "full":
        return tokens * residual_bytes(precision) * block.hidden
    if mode == "selective-op":
        return tokens * op_saved_bytes_per_token(block, precision)
    return tokens * block_bytes_per_token(block, precision, mode, seq_len)


def head_bytes(block: Block, precision: Precision, vocab: int, tokens: int) -> int:
    """The final norm, the head's input and the loss's fp32 log-softmax."""
    return int(tokens * (_norm_bytes(block, precision, 1) + LOGIT_BYTES * vocab))


def loss_backward_bytes(vocab: int, tokens: int) -> int:
    """What the loss's backward adds at the start of backward, on top of the saved fp32 log-softmax: the
    gradient it receives and the one it returns, both fp32 logits (LOSS_BACKWARD_LOGIT_BYTES per logit)."""
    return LOSS_BACKWARD_LOGIT_BYTES * vocab * tokens


def activation_bytes(
    *, layers: int, hidden: int, heads: int, vocab: int, seq_len: int, micro_batch: int,
    checkpointing: str = "selective", precision: object = Precision.MIXED, shape: ModelShape | None = None,
    **block: Unpack[BlockOverrides],
) -> int:
    """Activation bytes per GPU for one micro-batch (the peak, at the start of backward).

    `shape` (a ModelShape) supplies kv heads, MLP width and gating, norm and head_dim; keywords
    (kv_heads, head_dim, ffn, gated, norm, fused_qkv, attention, dropout, activation) override it.
    """
    unknown = set(block) - _OVERRIDES
    if unknown:  # a caller without a type checker
        raise ConfigError("activation_bytes", sorted(unknown)[0], "unknown block keyword")
    return peak_bytes(layers, vocab, seq_len, micro_batch, parse_checkpointing(checkpointing),
                      parse_enum(Precision, precision, "precision"), block_from(shape, hidden=hidden, heads=heads, **block))


def peak_bytes(layers: int, vocab: int, seq_len: int, micro_batch: int, mode: str, precision: Precision,
               block: Block) -> int:
    """`activation_bytes` of a parsed mode and precision and a built block (the estimator's grid parses once,
    at its entry)."""
    tokens = seq_len * micro_batch
    total = layers * _layer_bytes(tokens, seq_len, mode, precision, block)
    if mode in ("full", "selective-op"):  # one block re-run in backward; under amp/fp32 its norm keeps the stored input itself
        shared = FP32 * block.hidden if precision in (Precision.AMP, Precision.FP32) else 0
        total += tokens * (block_bytes_per_token(block, precision, "selective", seq_len) - shared)
    return int(total) + head_bytes(block, precision, vocab, tokens)


def describe(block: Block, precision: object, checkpointing: str) -> str:
    """The assumptions behind the figure, in one line (printed next to it)."""
    prec = parse_enum(Precision, precision, "precision")
    mode = parse_checkpointing(checkpointing)
    attn = "MHA" if block.kv_heads == block.heads else ("MQA" if block.kv_heads == 1 else f"GQA kv={block.kv_heads}")
    kernel = "eager attention (s×s scores kept)" if block.attention == "eager" and mode == "none" else "flash/SDPA attention"
    act = block.activation + (" unfused" if block.activation in UNFUSED_ACTIVATIONS and not block.gated else "")
    mlp = f"{'gated ' if block.gated else ''}{act} MLP {block.ffn}"
    if block.experts:
        mlp += f" through {block.experts_per_token} of {block.experts} experts (routed copies counted)"
    rules = ("fp32 throughout" if prec is Precision.FP32 else
             f"CUDA autocast rules (16-bit matmul inputs, fp32 norms/softmax/loss, {'fp32' if prec is Precision.AMP else 'bf16'} residual)")
    recompute = {"none": "nothing recomputed", "selective": "attention scores recomputed",
                 "selective-op": "per-operator: block inputs, every other matmul output and attention outputs kept "
                                 "+ one block re-run",
                 "full": "full recompute: block inputs kept + one block re-run"}[mode]
    qkv = "fused q/k/v projection" + (" + the KV cache's k/v copies (use_cache)" if block.kv_cache else "")
    return (f"counted per block from the shape: {attn} {kernel}, {mlp}, {block.norm}, "
            f"{qkv if block.fused_qkv else 'separate q/k/v projections'}; {rules}; {recompute}; "
            "fp32 log-softmax of the logits (4·s·b·v), and at the start of backward the loss's two fp32 "
            "gradients beside it (8·s·b·v)")


__all__ = ["CHECKPOINTING", "ATTENTION_KERNELS", "UNFUSED_ACTIVATIONS", "Block", "activation_bytes", "block_from", "block_bytes_per_token",
           "describe", "head_bytes", "layer_activation_bytes", "loss_backward_bytes", "op_saved_bytes_per_token", "parse_checkpointing", "peak_bytes",
           "residual_bytes"]
