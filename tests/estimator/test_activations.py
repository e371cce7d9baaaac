"""The activation model per block type (standard library side; measured in tests/runtime)."""

from __future__ import annotations

import pytest

import sm_dist
from sm_dist.errors import ConfigError
from sm_dist.estimator import grid, timing
from sm_dist.estimator.activations import (
    activation_bytes,
    block_from,
    describe,
    layer_activation_bytes,
    op_saved_bytes_per_token,
    parse_checkpointing,
)
from sm_dist.estimator.models import PRESETS
from sm_dist.vocab import Precision

S, B = 2048, 1


def _per_layer(shape_name: str, precision: str = "mixed", checkpointing: str = "selective") -> float:
    """Bytes per layer in units of s·b·h."""
    shape = PRESETS[shape_name]
    block = block_from(shape, hidden=shape.hidden, heads=shape.heads)
    return layer_activation_bytes(S, B, shape.hidden, shape.heads, checkpointing, precision, block) / (S * B * shape.hidden)


def test_gpt2_block_counted_tensor_by_tensor() -> None:
    """LN 4+2, qkv 6, output 2, LN 4+2, GELU MLP 2·4h·2 = 36 s·b·h, plus mean/rstd and log-sum-exp."""
    h, a = 768, 12
    per_token = 36 * h + 2 * 8 + 4 * a
    assert layer_activation_bytes(S, B, h, a, "selective", "mixed") == S * B * per_token
    assert layer_activation_bytes(S, B, h, a, "full", "mixed") == 2 * S * B * h
    assert layer_activation_bytes(S, B, h, a, "full", "amp") == 4 * S * B * h  # the fp32 residual


def test_architecture_moves_the_figure() -> None:
    gpt2, llama7, llama70 = _per_layer("gpt2"), _per_layer("llama2-7b"), _per_layer("llama2-70b")
    # GPT-2's config names "gelu_new", Hugging Face's GELU as tensor arithmetic: 4 + 16·4 bytes per h
    # in the MLP instead of a fused kernel's 4·4 (36 s·b·h in all)
    assert gpt2 == pytest.approx(84, abs=0.2)
    fused = layer_activation_bytes(S, B, 768, 12, "selective", "mixed", block_from(hidden=768, heads=12))
    assert fused / (S * B * 768) == pytest.approx(36, abs=0.2)
    # RMSNorm keeps input and result, SwiGLU 4 tensors of 2.69h: well above GPT-2's 36
    assert 40 < llama7 < 46 < gpt2
    assert llama70 > llama7  # FFN/h 3.5 outweighs GQA's smaller k, v
    assert _per_layer("llama2-7b", "fp32") > 1.7 * llama7
    assert _per_layer("llama2-7b", "amp") > llama7  # three 16-bit copies of the fp32 norm output for q, k, v


def test_gqa_keeps_less_than_mha() -> None:
    kw = dict(layers=4, hidden=4096, heads=32, vocab=32000, seq_len=S, micro_batch=B, norm="rmsnorm", gated=True,
              ffn=11008)
    assert activation_bytes(**kw, kv_heads=8) < activation_bytes(**kw, kv_heads=32)
    assert activation_bytes(**kw, kv_heads=32) - activation_bytes(**kw, kv_heads=8) == 4 * 2 * 24 * 128 * 2 * S * B  # layers, k and v, heads dropped, head_dim, bf16


def test_a_kv_cache_adds_k_and_v_copies_only_beside_a_fused_projection() -> None:
    """With use_cache the cache's k and v are concatenated copies: on top of GPT-2's fused qkv output
    (which q keeps alive), instead of k and v for separate projections (nothing added)."""
    kw = dict(layers=3, hidden=1024, heads=16, vocab=1000, seq_len=S, micro_batch=B)
    for precision, width in (("mixed", 2), ("fp32", 4)):
        extra = activation_bytes(**kw, precision=precision, kv_cache=True) - activation_bytes(**kw, precision=precision)
        assert extra == 3 * 2 * 1024 * width * S * B  # layers, k and v, kv width, bytes
    llama = dict(kw, norm="rmsnorm", gated=True, ffn=2816, kv_heads=4)
    assert activation_bytes(**llama, kv_cache=True) == activation_bytes(**llama)
    gpt2 = PRESETS["gpt2"]
    assert not gpt2.kv_cache  # presets describe the model, not a cache; an HF config says use_cache
    assert "KV cache" in describe(block_from(gpt2._replace(kv_cache=True), hidden=768, heads=12), "mixed", "selective")


def test_eager_attention_adds_scores_only_without_recompute() -> None:
    kw = dict(layers=2, hidden=1024, heads=16, vocab=1000, seq_len=S, micro_batch=B)
    flash_none = activation_bytes(**kw, checkpointing="none")
    assert flash_none == activation_bytes(**kw, checkpointing="selective")
    eager_none = activation_bytes(**kw, checkpointing="none", attention="eager")
    assert eager_none - flash_none > 2 * 6 * 16 * S * S * B * 0.99  # fp32 softmax + its bf16 copy, per layer
    assert activation_bytes(**kw, checkpointing="selective", attention="eager") == flash_none


def test_full_recompute_keeps_inputs_and_one_block() -> None:
    kw = dict(layers=10, hidden=1024, heads=16, vocab=1000, seq_len=S, micro_batch=B)
    full = activation_bytes(**kw, checkpointing="full", precision="mixed")
    selective = activation_bytes(**kw, checkpointing="selective", precision="mixed")
    one_block = (selective - activation_bytes(**{**kw, "layers": 9}, checkpointing="selective", precision="mixed"))
    head = selective - 10 * one_block
    assert full == 10 * 2 * S * B * 1024 + one_block + head


def test_moe_uses_the_width_a_token_passes_through() -> None:
    dense = PRESETS["mistral-7b"]
    moe = dense._replace(experts=8, experts_per_token=2, active_ffn=2 * dense.ffn)
    kw = dict(layers=dense.layers, hidden=dense.hidden, heads=dense.heads, vocab=dense.vocab, seq_len=S, micro_batch=B)
    assert activation_bytes(**kw, shape=moe) > activation_bytes(**kw, shape=dense)


def test_grid_passes_the_shape() -> None:
    shape = PRESETS["llama2-7b"]
    work = grid.Workload(shape=shape, tokens=10**9, seq_len=S, global_batch=64, micro_batch=B, precision=Precision.MIXED,
                         optimizer="adamw", checkpointing="selective")
    gpt_like = activation_bytes(layers=shape.layers, hidden=shape.hidden, heads=shape.heads, vocab=shape.vocab,
                                seq_len=S, micro_batch=B)
    # what autograd saves, and the loss's backward beside it (the fp32 logits' two gradients)
    assert grid._activations(work) == activation_bytes(layers=shape.layers, hidden=shape.hidden, heads=shape.heads,
                                                       vocab=shape.vocab, seq_len=S, micro_batch=B,
                                                       shape=shape) + 8 * shape.vocab * S * B
    assert grid._activations(work) > 1.1 * gpt_like


def test_bad_input_is_named() -> None:
    kw = dict(layers=2, hidden=64, heads=4, vocab=100, seq_len=32, micro_batch=2)
    with pytest.raises(ConfigError, match="activation_checkpointing"):
        activation_bytes(**kw, checkpointing="some")
    with pytest.raises(ConfigError, match="attention"):
        activation_bytes(**kw, attention="paged")
    with pytest.raises(ConfigError, match="norm"):
        activation_bytes(**kw, norm="batchnorm")
    with pytest.raises(ConfigError, match="kv_head"):
        activation_bytes(**kw, kv_head=2)
    assert parse_checkpointing(True) == "full" and parse_checkpointing(None) == "none"


def test_assumptions_are_printable() -> None:
    shape = PRESETS["llama2-70b"]
    text = describe(block_from(shape, hidden=shape.hidden, heads=shape.heads), "amp", "full")
    assert "GQA kv=8" in text and "gated" in text and "rmsnorm" in text and "fp32 residual" in text
    assert "block inputs kept" in text


def test_dropout_masks_are_one_byte_each() -> None:
    kw = dict(layers=3, hidden=256, heads=4, vocab=100, seq_len=128, micro_batch=2)
    tokens = 128 * 2
    assert activation_bytes(**kw, dropout=True) - activation_bytes(**kw) == 3 * tokens * 2 * 256
    eager = dict(kw, checkpointing="none", attention="eager")
    # eager, bf16 autocast: + the s×s bool mask; the matmul keeps the dropped bf16 probabilities
    # instead of a plain bf16 copy, so that term is unchanged
    assert activation_bytes(**eager, dropout=True) - activation_bytes(**eager) == 3 * tokens * (2 * 256 + 4 * 128)


def test_per_operator_recompute_keeps_every_other_matmul() -> None:
    """torchtitan's "op" policy: the block's input, the 1st, 3rd, 5th and 7th matmul outputs of a Llama block
    (wq, wv, the gate, the down projection), the attention output and its fp32 log-sum-exp."""
    shape = PRESETS["llama3-8b"]
    block = block_from(shape, hidden=shape.hidden, heads=shape.heads)
    h, q, kv, ffn = 4096, 4096, 1024, 14336
    assert op_saved_bytes_per_token(block, Precision.MIXED) == 2 * (h + q + kv + q + ffn + h) + 4 * 32
    per_layer = layer_activation_bytes(S, B, h, 32, "selective-op", "mixed", block)
    assert per_layer == S * B * op_saved_bytes_per_token(block, Precision.MIXED)
    assert layer_activation_bytes(S, B, h, 32, "full", "mixed", block) < per_layer < \
        layer_activation_bytes(S, B, h, 32, "selective", "mixed", block)
    assert parse_checkpointing("op") == "selective-op"
    assert timing.flops_per_token(1, "selective-op") == pytest.approx(6.74)


def test_torchtitan_llama3_8b_per_operator_memory() -> None:
    """torchtitan's published Llama 3.1 8B run (docs/performance.md, Table 1: FSDP on 8 H100s, local batch 2,
    sequence 8192, selective op AC, bf16 parameters with fp32 reduction, AdamW): 82.4 GiB, the peak reserved
    memory its logger reports. The estimate counts tensors (the allocator's slack is the 10% margin)."""
    est = sm_dist.estimate(model="llama3-8b", tokens=1e9, seq_len=8192, micro_batch=2, global_batch=16,
                           activation_checkpointing="selective-op", instance_types=["ml.p5.48xlarge"],
                           instance_counts=[1], strategies=["fsdp"])
    (row,) = est.rows
    assert row.memory is not None
    assert row.memory.total / 2**30 == pytest.approx(82.4, rel=0.15)
    selective = sm_dist.estimate(model="llama3-8b", tokens=1e9, seq_len=8192, micro_batch=2, global_batch=16,
                                 activation_checkpointing="selective", instance_types=["ml.p5.48xlarge"],
                                 instance_counts=[1], strategies=["fsdp"]).rows[0]
    assert selective.memory is not None and selective.memory.total / 2**30 > 1.5 * 82.4  # every activation kept
