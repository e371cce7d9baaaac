"""Precision modes as the estimator defines them (sm_dist.vocab.Precision).

- fp32: everything fp32, no autocast.
- amp: fp32 parameters, gradients and Adam states; the forward runs under torch.autocast
  (bf16 where supported, else fp16 with a GradScaler).
- mixed: half-precision (bf16) working weights and gradients, fp32 master weights and Adam
  states — FSDP2's MixedPrecisionPolicy for zero2/fsdp/hsdp, MasterWeightOptimizer for
  dp/ddp/zero1 (see strategies/master_weights.py). The forward runs under bf16 autocast so
  fp32 inputs meet bf16 weights.
- bf16: the model (hence gradients and optimizer states) is converted to bf16.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from sm_dist.vocab import Precision


def half_dtype(device_type: str) -> torch.dtype:
    """bf16 on CPU and on GPUs that support it (Ampere+), else fp16."""
    if device_type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16
    return torch.bfloat16


class PrecisionPlugin:
    """autocast, loss scaling and the optimizer step for one precision mode."""

    def __init__(self, precision: Precision, device_type: str) -> None:
        self.precision = precision
        self.device_type = device_type
        self.dtype = half_dtype(device_type) if precision is Precision.AMP else torch.bfloat16
        use_scaler = precision is Precision.AMP and self.dtype is torch.float16
        self.scaler = torch.amp.GradScaler(device_type) if use_scaler else None

    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """Context for the forward pass (and loss)."""
        if self.precision is Precision.FP32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        """loss.backward(), scaled when fp16 autocast needs it."""
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Bring gradients back to their true scale (before clipping)."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """optimizer.step(); with a scaler, skipped on inf/nan and the scale updated."""
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)
        self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        """The loss scaler's state (empty without one)."""
        return self.scaler.state_dict() if self.scaler else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)


__all__ = ["PrecisionPlugin", "half_dtype"]
