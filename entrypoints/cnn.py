"""SimpleCNN on synthetic MNIST-shaped data (1x28x28, 10 classes) — the README's main job.

Runs unchanged as a single process, under `torchrun --nproc_per_node=N`, under SageMaker's
torchrun driver and under sm_dist's PID 1:

    python -m torch.distributed.run --nproc_per_node=2 entrypoints/cnn.py --steps 20 --checkpoint-dir /tmp/ck

Common flags (strategy, precision, seed, epochs/steps, batch size, lr, checkpoints): --help.
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
    """The CNN's own flags."""
    group.add_argument("--dataset-size", type=int, default=2048, help="synthetic samples (default 2048)")
    group.add_argument("--dropout", type=float, default=0.0, help="dropout probability (default 0)")
    group.add_argument("--hidden", type=int, default=64, help="width of the first linear layer (default 64)")


def workload(args: argparse.Namespace, ctx: Any) -> Any:
    """SimpleCNN on MNIST-shaped data seeded like the run (built after runtime.init)."""
    from sm_dist.runtime.models.cnn import SimpleCNN
    from sm_dist.runtime.models.synthetic import MnistLike
    from sm_dist.runtime.train import Workload, adamw, classification_loss

    return Workload(
        build_model=lambda: SimpleCNN(hidden=args.hidden, dropout=args.dropout),
        dataset=MnistLike(args.dataset_size, seed=ctx.seed),
        loss=classification_loss,
        optimizer=adamw(args.lr, args.weight_decay),
    )


if __name__ == "__main__":
    sys.exit(run_entrypoint("cnn", add_flags, workload, batch_size=32, lr=1e-3, description=__doc__))
