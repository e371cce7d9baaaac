"""Imports a package this environment does not have."""

import torch
import torchvision_not_installed_here  # noqa: F401

print(torch.__version__)
