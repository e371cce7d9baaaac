"""SimpleCNN: the small MNIST-shaped classifier the README's main job trains.

Two 3x3 convolutions, a max-pool and two linear layers, on 1x28x28 inputs with 10 classes —
the shape of PyTorch's classic MNIST example, narrower by default so a few steps take well under
a second on one CPU core.
"""

from __future__ import annotations

import torch
from torch import nn

from sm_dist.errors import ConfigError

#: Input shape (channels, height, width) and class count the model is built for.
INPUT_SHAPE = (1, 28, 28)
NUM_CLASSES = 10

# Two valid 3x3 convolutions take 28 -> 24, the 2x2 max-pool takes 24 -> 12.
_POOLED_SIDE = 12


class SimpleCNN(nn.Module):
    """conv(3x3) -> relu -> conv(3x3) -> relu -> maxpool(2) -> dropout -> fc -> relu -> dropout -> fc.

    `channels` are the two convolution widths, `hidden` the first linear layer's width; the
    defaults (8, 16, 64) give about 150k parameters. `dropout` (default 0) exists so that
    resume tests exercise the RNG state as well as the weights.
    """

    def __init__(
        self,
        *,
        channels: tuple[int, int] = (8, 16),
        hidden: int = 64,
        num_classes: int = NUM_CLASSES,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if len(channels) != 2 or min(channels) < 1:
            raise ConfigError("channels", channels, "give two positive convolution widths, e.g. (8, 16)")
        if not 0.0 <= dropout < 1.0:
            raise ConfigError("dropout", dropout, "use a probability in [0, 1)")
        c1, c2 = channels
        self.conv1 = nn.Conv2d(INPUT_SHAPE[0], c1, kernel_size=3)
        self.conv2 = nn.Conv2d(c1, c2, kernel_size=3)
        self.drop = nn.Dropout(dropout)
        self.fc1 = nn.Linear(c2 * _POOLED_SIDE * _POOLED_SIDE, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, num_classes) for images of shape (batch, 1, 28, 28)."""
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = self.drop(torch.flatten(nn.functional.max_pool2d(x, 2), 1))
        x = self.drop(torch.relu(self.fc1(x)))
        return self.fc2(x)
