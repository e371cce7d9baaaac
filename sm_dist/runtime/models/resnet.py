"""A ResNet-18-style image classifier, written out so torchvision is not needed.

The layout is He et al. 2016's ResNet-18 (four stages of two BasicBlocks, widths w, 2w, 4w, 8w
with w = 64 by default). `small_input=True` swaps the 7x7/stride-2 stem and its max-pool for a
3x3/stride-1 stem, the usual adaptation for 32x32 images, so that a tiny CI run on small
synthetic images still has spatial extent in the last stage. `width` scales every stage, so
tests can train a structurally complete ResNet-18 with a few thousand parameters.
"""

from __future__ import annotations

import torch
from torch import nn

from sm_dist.errors import ConfigError

#: ResNet-18: two BasicBlocks per stage, four stages (He et al. 2016, Table 1).
BLOCKS_PER_STAGE = (2, 2, 2, 2)
#: ImageNet-1k classes, the default head.
IMAGENET_CLASSES = 1000


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with an identity (or 1x1 projection) shortcut."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


def _stem(width: int, small_input: bool) -> nn.Sequential:
    if small_input:
        return nn.Sequential(
            nn.Conv2d(3, width, 3, stride=1, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()
        )
    return nn.Sequential(
        nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
    )


class ResNet18(nn.Module):
    """ResNet-18 on 3-channel images of any size ≥ 32 px (global average pooling before the head).

    `layers` holds the four stages as an `nn.ModuleList` of `nn.Sequential`s of blocks, so
    sharding strategies can treat each BasicBlock as a unit.
    """

    def __init__(self, *, num_classes: int = IMAGENET_CLASSES, width: int = 64, small_input: bool = False) -> None:
        super().__init__()
        if num_classes < 2:
            raise ConfigError("num_classes", num_classes, "a classifier needs at least 2 classes")
        if width < 1:
            raise ConfigError("width", width, "use a positive base width (64 is ResNet-18's)")
        self.stem = _stem(width, small_input)
        stages, in_ch = [], width
        for i, n_blocks in enumerate(BLOCKS_PER_STAGE):
            out_ch = width * 2**i
            blocks = [BasicBlock(in_ch if b == 0 else out_ch, out_ch, 2 if (b == 0 and i > 0) else 1) for b in range(n_blocks)]
            stages.append(nn.Sequential(*blocks))
            in_ch = out_ch
        self.layers = nn.ModuleList(stages)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, num_classes) for images of shape (batch, 3, H, W)."""
        x = self.stem(x)
        for stage in self.layers:
            x = stage(x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))
