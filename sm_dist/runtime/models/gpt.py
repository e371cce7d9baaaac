"""A GPT-2-style causal language model built from a small config — no download, no transformers.

Pre-LayerNorm transformer blocks (causal self-attention through
`scaled_dot_product_attention`, a 4x GELU MLP), learned position embeddings and, as in GPT-2, an
output head tied to the token embedding. `GPTConfig.from_shape` builds the config from the
estimator's preset vocabulary (layers, hidden, heads, vocab, seq_len), which is how
`sm-dist measure-memory --model PRESET` gets a real module of the predicted size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from sm_dist.errors import ConfigError, check_int

#: GPT-2's initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 * n_layer)
#: (Radford et al. 2019, section 2.3).
INIT_STD = 0.02
#: Width of the MLP relative to n_embd, as in GPT-2.
MLP_RATIO = 4


@dataclass(frozen=True, kw_only=True)
class GPTConfig:
    """Shape of a GPT-2-style model. The defaults are a tiny model for CPU tests."""

    n_layer: int = 2  #: transformer blocks
    n_embd: int = 64  #: hidden size
    n_head: int = 4  #: attention heads; must divide n_embd
    vocab_size: int = 256  #: tokens (256 = one per byte, what the text loader produces)
    seq_len: int = 64  #: context length (size of the position embedding)
    dropout: float = 0.0  #: dropout on embeddings, attention and residuals
    bias: bool = True  #: biases in Linear and LayerNorm layers, as GPT-2
    tie_weights: bool = True  #: share the token embedding with the output head, as GPT-2

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_embd", "n_head", "vocab_size", "seq_len"):
            check_int(name, getattr(self, name), 1, "use a positive integer")
        if self.n_embd % self.n_head:
            raise ConfigError("n_head", self.n_head, f"must divide n_embd={self.n_embd}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError("dropout", self.dropout, "use a probability in [0, 1)")

    @classmethod
    def from_shape(cls, *, layers: int, hidden: int, heads: int, vocab: int, seq_len: int, dropout: float = 0.0,
                   bias: bool = True, tie_weights: bool = True) -> GPTConfig:
        """Build from the estimator's shape names (layers, hidden, heads, vocab, seq_len)."""
        return cls(n_layer=layers, n_embd=hidden, n_head=heads, vocab_size=vocab, seq_len=seq_len, dropout=dropout,
                   bias=bias, tie_weights=tie_weights)


class CausalSelfAttention(nn.Module):
    """Multi-head attention where each position sees only itself and earlier positions."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.dropout = cfg.dropout
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        shape = (batch, time, self.n_head, width // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        y = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.resid_drop(self.proj(y.transpose(1, 2).contiguous().view(batch, time, width)))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        hidden = MLP_RATIO * cfg.n_embd
        self.mlp = nn.Sequential(
            nn.Linear(cfg.n_embd, hidden, bias=cfg.bias),
            nn.GELU(approximate="tanh"),
            nn.Linear(hidden, cfg.n_embd, bias=cfg.bias),
            nn.Dropout(cfg.dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-2-style LM: `forward(idx)` -> logits of shape (batch, time, vocab_size).

    The blocks are `self.blocks` (an `nn.ModuleList`), the units a sharding strategy wraps;
    the embeddings and the (tied) head stay on the root module.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        residual_std = INIT_STD / math.sqrt(2 * cfg.n_layer)
        for block in self.blocks:
            nn.init.normal_(block.attn.proj.weight, std=residual_std)
            nn.init.normal_(block.mlp[2].weight, std=residual_std)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=INIT_STD)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        time = idx.shape[1]
        if time > self.config.seq_len:
            raise ConfigError("seq_len", time, f"inputs are longer than the model's seq_len={self.config.seq_len}")
        pos = torch.arange(time, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def num_params(self) -> int:
        """Unique parameters (the tied embedding counted once)."""
        return sum(p.numel() for p in self.parameters())


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over every position."""
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
