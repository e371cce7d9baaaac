"""The estimator's activation bytes against what autograd really saves, on small CPU models.

Each case builds a real model (tests/runtime/act_models.py), measures the storages its forward
saves for backward (sm_dist.tools.saved_tensors: deduplicated, weights and their autocast
copies excluded, CUDA autocast's fp32 ops emulated on CPU) and compares the estimator's figure,
computed from the shape the model's `config` describes, within ±15% — total and per layer.
"""

from __future__ import annotations

import act_models
import pytest
import torch

from sm_dist.estimator.activations import activation_bytes, block_from, layer_activation_bytes
from sm_dist.estimator.hf_config import shape_from_config
from sm_dist.estimator.shape import ModelShape
from sm_dist.tools.saved_tensors import CUDA_FP32_OPS, SavedBytes, measure_saved

TOLERANCE = 0.15
MODELS = {"gpt2": act_models.gpt2, "gpt2_fused": act_models.gpt2_fused, "llama": act_models.llama,
          "llama70b": act_models.llama70b, "qwen2": act_models.qwen2, "mixtral": act_models.mixtral}


def _estimate_shape(shape: ModelShape, precision: str, checkpointing: str) -> tuple[int, float]:
    """(total, per layer) activation bytes the estimator gives for `shape` at the test batch."""
    total = activation_bytes(layers=shape.layers, hidden=shape.hidden, heads=shape.heads, vocab=shape.vocab,
                             seq_len=act_models.SEQ, micro_batch=act_models.BATCH, checkpointing=checkpointing,
                             precision=precision, shape=shape)
    block = block_from(shape, hidden=shape.hidden, heads=shape.heads)
    per_layer = layer_activation_bytes(act_models.SEQ, act_models.BATCH, shape.hidden, shape.heads, checkpointing,
                                       precision, block)
    return total, per_layer


def _estimate(model: torch.nn.Module, precision: str, checkpointing: str) -> tuple[int, float]:
    # the plain-torch models build no KV cache (Hugging Face configs default use_cache to True)
    return _estimate_shape(shape_from_config({**model.config, "use_cache": False}, "<test model>"), precision,
                           checkpointing)


@pytest.mark.parametrize("checkpointing", ["selective", "full"])
@pytest.mark.parametrize("precision", ["fp32", "amp", "mixed"])
@pytest.mark.parametrize("name", list(MODELS))
def test_estimate_within_15_percent_of_saved_tensors(name: str, precision: str, checkpointing: str) -> None:
    model, batch = MODELS[name]()
    measured = measure_saved(model, batch, precision=precision, checkpointing=checkpointing)
    total, per_layer = _estimate(model, precision, checkpointing)
    ratio = total / measured.total
    print(f"{name} {precision} {checkpointing}: estimated/measured {ratio:.3f}")
    assert abs(ratio - 1) <= TOLERANCE, (measured, total)
    for layer in measured.per_layer:
        assert abs(per_layer / layer - 1) <= TOLERANCE, (measured.per_layer, per_layer)


def test_architectures_really_differ() -> None:
    """The measurement itself tells the blocks apart: per s·b·h, LLaMA and Qwen2 keep more than GPT-2."""
    def per_sbh(name: str) -> float:
        model, batch = MODELS[name]()
        hidden = model.config.get("n_embd") or model.config["hidden_size"]
        saved = measure_saved(model, batch, precision="mixed")
        return saved.per_layer[0] / (act_models.SEQ * act_models.BATCH * hidden)

    gpt2, llama, qwen2 = per_sbh("gpt2_fused"), per_sbh("llama"), per_sbh("qwen2")
    assert 34 < gpt2 < 38 and llama > 1.1 * gpt2 and qwen2 > 1.3 * llama
    assert per_sbh("gpt2") > 2 * gpt2  # the same block with GELU as tensor arithmetic keeps every intermediate


def test_full_recompute_keeps_block_inputs() -> None:
    """Under amp the checkpoint holds the fp32 residual (4 bytes per element); mixed holds bf16."""
    for precision, width in (("amp", 4), ("mixed", 2)):
        model, batch = act_models.llama()
        saved = measure_saved(model, batch, precision=precision, checkpointing="full")
        hidden = model.config["hidden_size"]
        assert saved.per_layer == (width * act_models.SEQ * act_models.BATCH * hidden,) * 2
        assert saved.recompute > 10 * saved.per_layer[0]
        assert all("forward" not in vars(block) for block in model.layers)  # the checkpoint wrapper is gone


def test_weights_and_their_casts_are_not_activations() -> None:
    class Wrap(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(64, 64)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layers[0](x)

    x = torch.randn(8, 64, requires_grad=True)  # an input that wants a gradient is still no weight
    saved = measure_saved(Wrap(), x, precision="amp", loss_fn=lambda out, _: out.float().pow(2).mean())
    assert isinstance(saved, SavedBytes)
    # the Linear keeps its input's bf16 copy (8·64·2) and its weight's bf16 copy, which is left out;
    # pow keeps the fp32 output of the Linear in the loss (outside the blocks)
    assert saved.per_layer == (8 * 64 * 2,)
    assert saved.other == 8 * 64 * 4


@pytest.mark.parametrize("precision", ["fp32", "mixed"])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_eager_attention_without_recompute_keeps_the_scores(name: str, precision: str) -> None:
    """matmul-softmax-matmul keeps the fp32 softmax (and its 16-bit copy): the estimator's "none" with eager."""
    model, batch = MODELS[name](eager=True)
    measured = measure_saved(model, batch, precision=precision, checkpointing="none")
    shape = shape_from_config(dict(model.config), "<test model>")
    total = activation_bytes(layers=shape.layers, hidden=shape.hidden, heads=shape.heads, vocab=shape.vocab,
                             seq_len=act_models.SEQ, micro_batch=act_models.BATCH, checkpointing="none",
                             precision=precision, shape=shape, attention="eager")
    flash = measure_saved(MODELS[name]()[0], batch, precision=precision, checkpointing="none")
    shape = shape._replace(kv_cache=False)  # the plain-torch models build no KV cache
    softmax = shape.layers * 4 * shape.heads * act_models.SEQ ** 2 * act_models.BATCH
    assert measured.total - flash.total >= 0.9 * softmax  # the fp32 s×s probabilities are kept (no log-sum-exp)
    assert abs(total / measured.total - 1) <= TOLERANCE, (measured, total)


def test_emulated_ops_are_cuda_autocast_ops() -> None:
    """The CPU emulation upcasts what CUDA autocast upcasts, as this torch registers it."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    assert all(has(op, "AutocastCUDA") for op in CUDA_FP32_OPS)
    assert not has("aten::layer_norm", "AutocastCPU")  # why CPU autocast alone would keep norms in bf16
    assert has("aten::linear", "AutocastCPU") and has("aten::scaled_dot_product_attention", "AutocastCPU")
    assert not has("aten::_grouped_mm", "AutocastCUDA")  # why MoE experts keep fp32 under amp


def _hf_gpt2(use_cache: bool) -> tuple[torch.nn.Module, torch.Tensor]:
    """transformers' own GPT2LMHeadModel (Conv1D projections, NewGELUActivation, SDPA), built from a
    tiny GPT2Config (no download), without dropout."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=128, n_layer=2, n_head=4, vocab_size=act_models.VOCAB, n_positions=128,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=use_cache,
                                     attn_implementation="sdpa", bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    assert type(model.transformer.h[0].mlp.act).__name__ == "NewGELUActivation"  # "gelu_new" as arithmetic
    return model, torch.randint(0, act_models.VOCAB, (act_models.BATCH, act_models.SEQ))


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("checkpointing", ["selective", "full"])
@pytest.mark.parametrize("precision", ["fp32", "amp", "mixed"])
def test_hugging_face_gpt2_matches_saved_tensors(precision: str, checkpointing: str, use_cache: bool) -> None:
    """The real GPT2LMHeadModel, read from its own config as `estimate(hf_config=...)` reads it.

    gelu_new (NewGELUActivation) keeps, per MLP element under CUDA autocast rules: the fp32 copy
    of its input that pow runs on, tanh's fp32 output, 1 + tanh (fp32), 0.5·x (16-bit) and the
    16-bit cast of the fp32 product for the down projection: 16 bytes (20 in fp32). With
    use_cache (transformers' default, built in training too) the cache's k and v are concatenated
    copies, on top of the fused qkv output that q keeps alive. Both are counted, so the figure is
    exact: within 1% per layer, and the issue's ±15% in total."""
    model, batch = _hf_gpt2(use_cache)
    measured = measure_saved(model, batch, precision=precision, checkpointing=checkpointing,
                             loss_fn=lambda out, b: torch.nn.functional.cross_entropy(out.logits.flatten(0, -2),
                                                                                      b.flatten()))
    shape = shape_from_config(model.config.to_dict(), "<GPT2Config>")
    assert shape.activation == "gelu_new" and shape.kv_cache is use_cache
    total, per_layer = _estimate_shape(shape, precision, checkpointing)
    print(f"HF gpt2 use_cache={use_cache} {precision} {checkpointing}: estimated/measured {total / measured.total:.3f}")
    assert abs(total / measured.total - 1) <= TOLERANCE, (measured, total)
    for layer in measured.per_layer:
        assert abs(per_layer / layer - 1) <= 0.01, (measured.per_layer, per_layer)

