"""Activation memory per GPU, after Korthikanti et al. 2022 ("Reducing Activation Recomputation
in Large Transformer Models", arXiv:2205.05198, §4, no tensor/sequence parallelism).

Per transformer layer and micro-batch of b sequences of length s, hidden size h, a heads, with
16-bit activations: s·b·h·(34 + 5·a·s/h) bytes stored; 34·s·b·h with selective recompute (the
attention scores are recomputed — what PyTorch's fused SDPA/flash attention gives anyway);
2·s·b·h with full checkpointing (only each layer's input is kept, plus one layer's activations
while it is recomputed).
"""

from __future__ import annotations

from sm_dist.errors import ConfigError
from sm_dist.vocab import Precision, parse_enum

#: Activation checkpointing modes, from most to least memory.
CHECKPOINTING = ("none", "selective", "full")

#: The Korthikanti byte counts assume 16-bit activations; fp32 training stores them in 4 bytes.
#: amp/mixed/bf16 store matmul inputs in 16 bits (autocast keeps a few fp32 norms: ignored).
ACTIVATION_SCALE = {Precision.FP32: 2.0, Precision.AMP: 1.0, Precision.MIXED: 1.0, Precision.BF16: 1.0}
#: Bytes per logit kept for the loss: fp32 logits for cross-entropy (Korthikanti §4.3 counts the
#: output layer as 4·s·b·v bytes).
LOGIT_BYTES = 4


def parse_checkpointing(value: object) -> str:
    """Normalise an --activation-checkpointing value ("none", "selective", "full")."""
    text = "none" if value in (None, False) else ("full" if value is True else str(value).strip().lower())
    if text not in CHECKPOINTING:
        raise ConfigError("activation_checkpointing", value, f"expected one of {', '.join(CHECKPOINTING)}")
    return text


def layer_activation_bytes(seq_len: int, micro_batch: int, hidden: int, heads: int, checkpointing: str) -> float:
    """Bytes one layer keeps for backward (16-bit activations)."""
    sbh = seq_len * micro_batch * hidden
    if checkpointing == "none":
        return sbh * (34 + 5 * heads * seq_len / hidden)
    if checkpointing == "selective":
        return sbh * 34.0
    return sbh * 2.0


def activation_bytes(
    *, layers: int, hidden: int, heads: int, vocab: int, seq_len: int, micro_batch: int,
    checkpointing: str = "selective", precision: object = Precision.MIXED,
) -> int:
    """Activation bytes per GPU for one micro-batch (the peak, at the start of backward)."""
    mode = parse_checkpointing(checkpointing)
    prec = parse_enum(Precision, precision, "precision")
    per_layer = layer_activation_bytes(seq_len, micro_batch, hidden, heads, mode)
    total = layers * per_layer
    if mode == "full":  # the layer being recomputed holds its full activations for a moment
        total += layer_activation_bytes(seq_len, micro_batch, hidden, heads, "selective")
    total *= ACTIVATION_SCALE[prec]
    total += LOGIT_BYTES * seq_len * micro_batch * vocab
    return int(total)


__all__ = ["CHECKPOINTING", "activation_bytes", "layer_activation_bytes", "parse_checkpointing"]
