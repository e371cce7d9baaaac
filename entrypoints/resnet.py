"""ResNet-18-style classifier on synthetic ImageNet-shaped data (no torchvision, no download).

Defaults are CI-sized (32 px images, 10 classes, base width 16); `--resolution 224
--num-classes 1000 --width 64` is the real ResNet-18 on ImageNet-shaped inputs. Images of at
most SMALL_INPUT_MAX_SIDE pixels use the 3x3 CIFAR-style stem.

    python -m torch.distributed.run --nproc_per_node=2 entrypoints/resnet.py --strategy fsdp --steps 5
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

#: Up to this side, the 7x7/stride-2 stem + max-pool would leave too little for four stages.
SMALL_INPUT_MAX_SIDE = 64


def add_flags(group: Any) -> None:
    """The ResNet's own flags."""
    group.add_argument("--dataset-size", type=int, default=512, help="synthetic images (default 512)")
    group.add_argument("--resolution", type=int, default=32, help="image side in pixels (default 32; ImageNet 224)")
    group.add_argument("--num-classes", type=int, default=10, help="classes (default 10; ImageNet 1000)")
    group.add_argument("--width", type=int, default=16, help="base channel width (default 16; ResNet-18 64)")


def workload(args: argparse.Namespace, ctx: Any) -> Any:
    """ResNet-18 on ImageNet-shaped data seeded like the run (built after runtime.init)."""
    from sm_dist.runtime.models.resnet import ResNet18
    from sm_dist.runtime.models.synthetic import ImageNetLike
    from sm_dist.runtime.train import Workload, adamw, classification_loss

    small = args.resolution <= SMALL_INPUT_MAX_SIDE
    return Workload(
        build_model=lambda: ResNet18(num_classes=args.num_classes, width=args.width, small_input=small),
        dataset=ImageNetLike(args.dataset_size, seed=ctx.seed, resolution=args.resolution,
                             num_classes=args.num_classes),
        loss=classification_loss,
        optimizer=adamw(args.lr, args.weight_decay),
    )


if __name__ == "__main__":
    sys.exit(run_entrypoint("resnet", add_flags, workload, batch_size=16, lr=1e-3, description=__doc__))
