"""Seed workloads: small models and deterministic synthetic datasets.

`cnn` (SimpleCNN, 1x28x28 -> 10 classes), `resnet` (ResNet-18-style classifier, no torchvision),
`gpt` (GPT-2-style causal LM from a `GPTConfig`) and `synthetic` (MNIST-shaped, ImageNet-shaped
and token-stream datasets). Submodules import torch; this file imports nothing, so that
`import sm_dist.runtime.models` stays cheap until a model is actually built.
"""
