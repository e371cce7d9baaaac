"""What autograd really keeps for backward: saved-tensor bytes of one forward, per block, on CPU.

`measure_saved(model, batch, precision=..., checkpointing=...)` runs one forward (and the loss)
under `torch.autograd.graph.saved_tensors_hooks` and counts the bytes of the *storages* behind
every saved tensor, each storage once (views such as q/k/v split from one projection share
one). Parameters, and the 16-bit copies autocast makes of them, are weights, not activations:
they are left out. A backward then runs to check the graph is whole.

Attribution: a storage belongs to the block (an entry of the model's largest `nn.ModuleList`)
that first saves it; anything saved outside the blocks (embedding, final norm, head, loss) is
`other`. In a pre-norm transformer a block thus owns its input, as the estimator counts it.

Precision, as `sm_dist.runtime.precision` runs it (amp: fp32 weights under autocast; mixed and
bf16: bf16 weights under autocast; fp32: no autocast). CPU autocast's policy is not CUDA's: on
CPU layer_norm, softmax, pow and rsqrt follow a bf16 input, on CUDA they run in fp32. To
measure what a GPU would keep, the forward runs under `torch.autocast("cpu", bfloat16)` (which
casts matmuls, linear and SDPA to bf16 as CUDA does) plus `CudaFp32Policy`, a function mode
that upcasts the inputs of CUDA autocast's fp32 ops that transformers use (norms, softmax,
log_softmax, losses, pow, rsqrt, exp, log, sum, reciprocal). Other ops of CUDA's fp32 list are
not emulated.
SDPA on CPU runs a flash-like kernel (q, k, v, output and log-sum-exp saved, no s×s scores),
as CUDA's flash and memory-efficient kernels do.

Full checkpointing (`checkpointing="full"`): every block runs under non-reentrant
`torch.utils.checkpoint`, whose saved tensors are recomputed, not packed; what it holds is each
block's input, counted here from the block's forward pre-hook. The peak adds one block re-run
in backward: `SavedBytes.recompute` is the largest block's saved bytes measured without
checkpointing in a second forward, less the input the checkpoint already holds.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils.checkpoint import checkpoint

from sm_dist.errors import ConfigError
from sm_dist.vocab import Precision, parse_enum

log = logging.getLogger(__name__)

#: Functions CUDA autocast runs in fp32 (aten/src/ATen/autocast_mode.cpp, the CUDA fp32 and
#: fp32_set_opt_dtype lists) that CPU autocast leaves in bf16; the ones transformer code calls.
_FP32_FUNCTIONS = frozenset({
    F.layer_norm, F.group_norm, F.rms_norm, F.softmax, F.log_softmax, F.cross_entropy, F.nll_loss, F.mse_loss,
    torch.layer_norm, torch.group_norm, torch.rms_norm, torch.softmax, torch.log_softmax, torch.rsqrt, torch.pow,
    torch.exp, torch.log, torch.sum, torch.reciprocal, torch.Tensor.softmax, torch.Tensor.log_softmax,
    torch.Tensor.pow, torch.Tensor.rsqrt, torch.Tensor.exp, torch.Tensor.log, torch.Tensor.__pow__,
    torch.Tensor.sum, torch.Tensor.reciprocal,
})
#: The aten ops behind them, each with an AutocastCUDA kernel (tests check it against this torch).
CUDA_FP32_OPS = ("aten::layer_norm", "aten::group_norm", "aten::rms_norm", "aten::softmax.int",
                 "aten::log_softmax.int", "aten::nll_loss", "aten::mse_loss", "aten::rsqrt", "aten::pow.Tensor_Scalar",
                 "aten::exp", "aten::log", "aten::sum", "aten::reciprocal")


class CudaFp32Policy(TorchFunctionMode):
    """Upcast 16-bit floating inputs of CUDA autocast's fp32 ops (see the module docstring)."""

    def __torch_function__(self, func: Callable[..., object], types: tuple[type, ...], args: tuple[object, ...] = (),
                           kwargs: dict[str, object] | None = None) -> object:
        kwargs = kwargs or {}
        if func in _FP32_FUNCTIONS:
            args = tuple(_up(a) for a in args)
            kwargs = {k: _up(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)


def _up(value: object) -> object:
    if isinstance(value, torch.Tensor) and value.dtype in (torch.bfloat16, torch.float16):
        return value.float()
    return value


class SavedBytes(NamedTuple):
    """Saved-tensor bytes of one forward, storages counted once."""

    per_layer: tuple[int, ...]  #: by block, in order
    other: int  #: embedding, final norm, head and loss
    recompute: int = 0  #: full checkpointing: one block's saved bytes while it is recomputed

    @property
    def total(self) -> int:
        """The peak the estimator describes: every block, the rest, and one re-run block."""
        return sum(self.per_layer) + self.other + self.recompute


def find_blocks(model: nn.Module) -> nn.ModuleList:
    """The model's transformer blocks: its largest nn.ModuleList (by parameters)."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m)]
    if not lists:
        raise ConfigError("model", type(model).__name__, "no nn.ModuleList of blocks found; keep the transformer "
                          "blocks in an nn.ModuleList (as Hugging Face and torchtitan models do)")
    return max(lists, key=lambda m: sum(p.numel() for p in m.parameters()))


def default_loss(output: object, batch: object) -> torch.Tensor:
    """Next-token cross-entropy when the output looks like logits over the batch's tokens, else a mean."""
    found = getattr(output, "logits", output)
    logits: torch.Tensor = found[0] if isinstance(found, (tuple, list)) else found
    if isinstance(batch, torch.Tensor) and not batch.is_floating_point() and logits.dim() == batch.dim() + 1:
        return F.cross_entropy(logits.flatten(0, -2), batch.flatten())
    return logits.float().pow(2).mean()


@contextlib.contextmanager
def _precision(precision: Precision) -> Iterator[None]:
    if precision is Precision.FP32:
        yield
        return
    with torch.autocast("cpu", dtype=torch.bfloat16), CudaFp32Policy():
        yield


class _Recorder:
    """Pack hook and block pre-hooks: saved storages, first saver wins."""

    def __init__(self, model: nn.Module, blocks: nn.ModuleList) -> None:
        self.weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.seen: set[int] = set()
        self.bytes: dict[int, int] = {}
        self.current = -1
        self.index = {id(b): i for i, b in enumerate(blocks)}
        self.keep: list[torch.Tensor] = []  # holds the recorded tensors alive, so addresses stay unique

    def enter(self, block: nn.Module, args: tuple[Any, ...]) -> None:
        self.current = self.index[id(block)]

    def leave(self, block: nn.Module, args: tuple[object, ...], output: object) -> None:
        self.current = -1

    def add(self, tensor: torch.Tensor, owner: int) -> None:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in self.seen or ptr in self.weights or storage.nbytes() == 0 or _weight_cast(tensor, self.weights):
            return
        self.seen.add(ptr)
        self.keep.append(tensor)
        self.bytes[owner] = self.bytes.get(owner, 0) + storage.nbytes()

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        self.add(tensor, self.current)
        return tensor

    def block_inputs(self, block: nn.Module, args: tuple[Any, ...]) -> None:
        """Full checkpointing: the checkpoint keeps the block's tensor inputs."""
        for arg in args:
            if isinstance(arg, torch.Tensor) and arg.is_floating_point():
                self.add(arg, self.index[id(block)])

    def skip_inputs(self, block: nn.Module, args: tuple[Any, ...]) -> None:
        """The re-run block: its inputs are already held by the checkpoint, not counted again."""
        for arg in args:
            if isinstance(arg, torch.Tensor):
                self.seen.add(arg.untyped_storage().data_ptr())


def _weight_cast(tensor: torch.Tensor, weights: set[int]) -> bool:
    """A 16-bit copy of a parameter made by autocast (ToCopy of a parameter), or a view of one
    (linear saves the transposed weight)."""
    fn = (tensor._base if tensor._base is not None else tensor).grad_fn
    if fn is None or "ToCopy" not in type(fn).__name__:
        return False
    leaves = [getattr(nxt, "variable", None) for nxt, _ in fn.next_functions if nxt is not None]
    return any(leaf is not None and leaf.untyped_storage().data_ptr() in weights for leaf in leaves)


def _forward(model: nn.Module, batch: object, loss_fn: Callable[[Any, Any], torch.Tensor], full: bool,
             precision: Precision, skip_inputs: bool = False) -> tuple[_Recorder, torch.Tensor]:
    blocks = find_blocks(model)
    rec = _Recorder(model, blocks)
    handles = []
    originals = {}
    for block in blocks:
        handles.append(block.register_forward_pre_hook(rec.enter))
        handles.append(block.register_forward_hook(rec.leave))
        if full or skip_inputs:
            handles.append(block.register_forward_pre_hook(rec.block_inputs if full else rec.skip_inputs))
        if full:
            originals[block] = block.__dict__.get("forward")  # an instance-level forward, if the user set one
            block.forward = _checkpointed(block.forward, precision)
    try:
        with _precision(precision), torch.autograd.graph.saved_tensors_hooks(rec.pack, lambda t: t):
            loss = loss_fn(model(batch), batch)
    finally:
        for handle in handles:
            handle.remove()
        for block, forward in originals.items():
            if forward is None:
                del block.forward  # back to the class's forward
            else:
                block.forward = forward
    return rec, loss


def _checkpointed(forward: Callable[..., Any], precision: Precision) -> Callable[..., Any]:
    """`forward` under non-reentrant checkpoint; the recompute in backward runs under the same
    fp32 policy as the forward (checkpoint restores autocast itself, not function modes)."""
    def contexts() -> tuple[Any, Any]:
        policy = contextlib.nullcontext() if precision is Precision.FP32 else CudaFp32Policy()
        return contextlib.nullcontext(), policy

    def run(*args: object, **kwargs: object) -> object:
        return checkpoint(forward, *args, use_reentrant=False, context_fn=contexts, **kwargs)
    return run


def measure_saved(model: nn.Module, batch: object, *, precision: object = Precision.AMP, checkpointing: str = "selective",
                  loss_fn: Callable[[Any, Any], torch.Tensor] = default_loss) -> SavedBytes:
    """Saved-tensor bytes of one training forward of `model` on `batch` (see the module docstring).

    `checkpointing`: "none" and "selective" measure the model as written (its attention kernel
    decides whether s×s scores are kept); "full" checkpoints every block. `mixed`/`bf16` convert
    the model to bf16 in place.
    """
    prec = parse_enum(Precision, precision, "precision")
    if checkpointing not in ("none", "selective", "full"):
        raise ConfigError("checkpointing", checkpointing, "expected none, selective or full")
    model.train()
    if prec in (Precision.MIXED, Precision.BF16):
        model.to(torch.bfloat16)  # the working weights are bf16 (FSDP2 param_dtype / the bf16 model)
    rec, loss = _forward(model, batch, loss_fn, checkpointing == "full", prec)
    loss.backward()  # the graph is whole and backward runs; the figures are from the forward
    layers = tuple(rec.bytes.get(i, 0) for i in range(len(rec.index)))
    recompute = 0
    if checkpointing == "full":
        model.zero_grad(set_to_none=True)
        plain, plain_loss = _forward(model, batch, loss_fn, False, prec, skip_inputs=True)
        recompute = max((plain.bytes.get(i, 0) for i in range(len(plain.index))), default=0)
        del plain_loss
    log.debug("saved bytes per layer %s, other %d, recompute %d", layers, rec.bytes.get(-1, 0), recompute)
    return SavedBytes(per_layer=layers, other=rec.bytes.get(-1, 0), recompute=recompute)


__all__ = ["CUDA_FP32_OPS", "CudaFp32Policy", "SavedBytes", "default_loss", "find_blocks", "measure_saved"]
