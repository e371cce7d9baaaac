"""GPT-2-style causal language model on local text (byte-level) or a synthetic token stream.

The model is built from --n-layer/--n-embd/--n-head/--vocab-size/--seq-len (no download); the
defaults are a tiny 2-layer model for CI. `--text` reads a local file, or every *.txt file of
a folder such as a SageMaker channel (/opt/ml/input/data/train), one token per byte.

    python -m torch.distributed.run --nproc_per_node=2 entrypoints/gpt.py --strategy fsdp --steps 5
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

try:
    import sm_dist  # noqa: F401
except ImportError:
    # SageMaker's torchrun driver runs `cd <code dir>; torchrun <script>`, so sys.path[0] is this
    # script's folder: add the code dir (cwd) and the bundle root (sm_dist/_entrypoints/../..).
    sys.path[:0] = [os.getcwd(), str(Path(__file__).resolve().parents[2])]

from sm_dist.runtime.entry import run_entrypoint


def add_flags(group: Any) -> None:
    """The GPT's shape and data flags."""
    group.add_argument("--n-layer", type=int, default=2, help="transformer blocks (default 2)")
    group.add_argument("--n-embd", type=int, default=64, help="hidden size (default 64)")
    group.add_argument("--n-head", type=int, default=4, help="attention heads (default 4)")
    group.add_argument("--vocab-size", type=int, default=256, help="vocabulary (default 256 = bytes)")
    group.add_argument("--seq-len", type=int, default=64, help="context length (default 64)")
    group.add_argument("--dropout", type=float, default=0.0, help="dropout probability (default 0)")
    group.add_argument("--text", default=None, help="local text file, or folder of *.txt files (default: synthetic)")
    group.add_argument("--dataset-tokens", type=int, default=65536, help="synthetic tokens (default 65536)")


def _tokens(args: argparse.Namespace, seed: int) -> Any:
    import torch

    from sm_dist.errors import ConfigError
    from sm_dist.runtime.models.synthetic import synthetic_tokens, text_tokens

    if args.text is None:
        return synthetic_tokens(args.dataset_tokens, vocab_size=args.vocab_size, seed=seed)
    path = Path(args.text)
    if not path.is_dir():
        return text_tokens(path, vocab_size=args.vocab_size)
    files = sorted(path.glob("*.txt"))
    if not files:
        raise ConfigError("text", args.text, "the folder has no *.txt files; give a text file or a folder of them")
    return torch.cat([text_tokens(f, vocab_size=args.vocab_size) for f in files])


def workload(args: argparse.Namespace, ctx: Any) -> Any:
    """GPT-2-style LM on windows of the token stream (built after runtime.init)."""
    from sm_dist.runtime.models.gpt import GPT, GPTConfig
    from sm_dist.runtime.models.synthetic import TokenWindows
    from sm_dist.runtime.train import Workload, adamw, next_token_loss

    cfg = GPTConfig(n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head, vocab_size=args.vocab_size,
                    seq_len=args.seq_len, dropout=args.dropout)
    return Workload(
        build_model=lambda: GPT(cfg),
        dataset=TokenWindows(_tokens(args, ctx.seed), args.seq_len),
        loss=next_token_loss,
        optimizer=adamw(args.lr, args.weight_decay),
    )


if __name__ == "__main__":
    sys.exit(run_entrypoint("gpt", add_flags, workload, batch_size=8, lr=3e-4, description=__doc__))
