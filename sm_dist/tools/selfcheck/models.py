"""The models the GPU check kit and `sm-dist calibrate` run: built from the estimator's shape.

A LLaMA-shaped decoder (RMSNorm as Hugging Face writes it, SwiGLU with the shape's own MLP
width, grouped-query attention through `scaled_dot_product_attention`, rotary positions, an
untied head) for gated shapes, sm_dist's GPT-2-style model (sm_dist.runtime.models.gpt) for
the others, so that what runs is what the estimator's activation model describes. `build` takes
what `calibrate --model` takes: a preset, a Hugging Face config.json (read by the estimator's
stdlib parser, no transformers), or module:function (sm_dist.tools.measure.build_model).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from sm_dist.errors import ConfigError
from sm_dist.estimator.shape import ModelShape

#: Rotary base (LLaMA-2's rope_theta).
ROPE_THETA = 10_000.0
#: Token batches are drawn from this generator seed (plus the rank): the same run, the same data.
DATA_SEED = 1234


class RMSNorm(nn.Module):
    """As Hugging Face's LlamaRMSNorm: statistics in fp32, the result back in the input's dtype."""

    def __init__(self, hidden: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Block(nn.Module):
    """Pre-norm block: x + attention(norm(x)), then x + SwiGLU(norm(x))."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        head_dim = shape.head_dim or shape.hidden // shape.heads
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.kv_heads, head_dim
        self.attn_norm, self.mlp_norm = RMSNorm(shape.hidden), RMSNorm(shape.hidden)
        self.q = nn.Linear(shape.hidden, shape.heads * head_dim, bias=False)
        self.k = nn.Linear(shape.hidden, shape.kv_heads * head_dim, bias=False)
        self.v = nn.Linear(shape.hidden, shape.kv_heads * head_dim, bias=False)
        self.o = nn.Linear(shape.heads * head_dim, shape.hidden, bias=False)
        self.gate = nn.Linear(shape.hidden, shape.ffn, bias=False)
        self.up = nn.Linear(shape.hidden, shape.ffn, bias=False)
        self.down = nn.Linear(shape.ffn, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        h = self.attn_norm(x)
        q = _rotate(self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2), cos, sin)
        k = _rotate(self.k(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2), cos, sin)
        v = self.v(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        x = x + self.o(out.transpose(1, 2).reshape(b, s, -1))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LlamaShaped(nn.Module):
    """A LLaMA-style causal LM of `shape` (its layers in `self.layers`, the FSDP units)."""

    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape
        self.embed = nn.Embedding(shape.vocab, shape.hidden)
        self.layers = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.hidden)
        self.lm_head = nn.Linear(shape.hidden, shape.vocab, bias=False)
        head_dim = shape.head_dim or shape.hidden // shape.heads
        inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device, dtype=torch.float32)
        angles = torch.outer(positions, self.inv_freq.to(idx.device))
        angles = torch.cat((angles, angles), dim=-1)
        x = self.embed(idx)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


class Built(NamedTuple):
    """What runs: the module, the shape the estimator reads for it, a name, and a token batch."""

    module: nn.Module
    shape: ModelShape
    name: str
    batch: torch.Tensor | None  #: the user's example input (module:function), else None: tokens are drawn


def from_shape(shape: ModelShape) -> nn.Module:
    """A module of `shape`: LLaMA-shaped when the MLP is gated, sm_dist's GPT-2 otherwise."""
    if shape.gated_mlp:
        return LlamaShaped(shape)
    from sm_dist.runtime.models.gpt import GPT, GPTConfig

    return GPT(GPTConfig.from_shape(layers=shape.layers, hidden=shape.hidden, heads=shape.heads, vocab=shape.vocab,
                                    seq_len=shape.seq_len))


def build(spec: str, *, layers: int | None = None, seq_len: int | None = None) -> Built:
    """`spec`: a preset ("llama2-7b"), a config.json path, or module:function. `layers` keeps only
    that many blocks (to fit one GPU; MFU per block barely moves), `seq_len` sets the context."""
    from sm_dist.estimator import hf_config
    from sm_dist.estimator.models import preset

    if ":" in spec and not os.path.exists(spec):
        from sm_dist.estimator.hf_config import shape_of_module
        from sm_dist.estimator.models import count_module_params
        from sm_dist.tools.measure import build_model

        module, batch = build_model(spec)
        shape, _ = shape_of_module(module, count_module_params(module)[0], seq_len)
        if batch is not None and not isinstance(batch, torch.Tensor):
            raise ConfigError("model", spec, "the example input must be one tensor of token ids (batch, sequence)")
        return Built(module, shape, spec, batch)
    shape = hf_config.read(spec, seq_len) if spec.endswith(".json") or os.path.exists(spec) else preset(spec)
    if layers is not None:
        if layers < 1:
            raise ConfigError("layers", layers, "expected a positive number of blocks")
        shape = shape._replace(layers=min(layers, shape.layers), block_params=0)
    if seq_len is not None:
        shape = shape._replace(seq_len=seq_len)
    name = shape.name + (f" ({shape.layers} layers)" if layers is not None else "")
    return Built(from_shape(shape), shape, name, None)


def tokens(shape: ModelShape, micro_batch: int, seq_len: int, rank: int, device: torch.device) -> torch.Tensor:
    """A fixed batch of token ids for `rank` (each rank its own, every run the same)."""
    generator = torch.Generator().manual_seed(DATA_SEED + rank)
    return torch.randint(0, shape.vocab, (micro_batch, seq_len), generator=generator).to(device)


def loss_of(output: object, batch: torch.Tensor) -> torch.Tensor:
    """Next-token-style cross-entropy of the logits against the batch's own tokens (a fixed batch:
    the loss must fall); a model whose output is not logits over the batch gets a mean square."""
    from sm_dist.tools.saved_tensors import default_loss

    return default_loss(output, batch)


__all__ = ["Built", "LlamaShaped", "build", "from_shape", "loss_of", "tokens"]
