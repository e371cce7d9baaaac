"""A small shared training loop, so a training script is a model, a dataset and a loss.

`fit(ctx, workload, config, checkpointer)` wraps the model for the strategy, shards the data with
the resumable sampler, accumulates gradients (skipping the sync on all but the last micro-batch),
clips, prints one metric line per logged step, checkpoints every N steps, resumes from the
newest committed checkpoint, stops cleanly on SIGTERM (through the Checkpointer), and writes the
final model on rank 0 as a plain state dict (keys without `module.`) to the model directory,
followed by exactly one line `[sm_dist] final step=N model_sha256=<hex>`.

Determinism: the data order is a pure function of (seed, epoch), the model starts from rank 0's
weights, and a checkpoint is taken only at an optimizer-step boundary, so the same seed gives the
same final weights — also across a kill and resume (CPU, gloo).
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.data import Dataset

from sm_dist.contract.log_lines import final_line, resumed_line
from sm_dist.errors import ConfigError, check_int
from sm_dist.runtime.data import ResumableLoader, build_dataloader
from sm_dist.runtime.metrics import AvgMetric, log_metrics, rank0_print
from sm_dist.runtime.model_output import write_model
from sm_dist.runtime.protocols import OptimizerFactory
from sm_dist.runtime.schedules import SchedulerFactory

if TYPE_CHECKING:
    from sm_dist.runtime.checkpoint.checkpointer import Checkpointer
    from sm_dist.runtime.context import RunContext

_log = logging.getLogger(__name__)

#: One micro-batch as the loop hands it to the loss: the dataset item's tensors, on the device.
Batch = Sequence[torch.Tensor]
LossFn = Callable[[nn.Module, Batch], torch.Tensor]


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """How long and how to train. Checkpoint settings belong to the Checkpointer."""

    epochs: int | None = 1
    """Passes over the data; ignored when `steps` is set."""
    steps: int | None = None
    """Stop after this many optimizer steps in total (counting steps before a resume)."""
    batch_size: int = 32
    """Micro-batch per rank; the global batch is batch_size x grad_accum x world size."""
    grad_accum: int = 1
    """Micro-batches per optimizer step."""
    clip: float | None = 1.0
    """Maximum global gradient norm; None disables clipping."""
    log_every: int = 1
    """Print a metric line every N optimizer steps (and after the last one)."""
    model_dir: str | None = None
    """Where rank 0 writes the final model; None = the run's model dir (SM_MODEL_DIR)."""
    step_sleep_s: float = 0.0
    """Seconds to sleep after each optimizer step: paces a rehearsal (e.g. a chain's links) to a known rate."""

    def __post_init__(self) -> None:
        for name in ("batch_size", "grad_accum", "log_every"):
            check_int(name, getattr(self, name), 1, "use an integer >= 1")
        if self.steps is None and (self.epochs is None or self.epochs < 1):
            raise ConfigError("epochs", self.epochs, "give --epochs >= 1 or --steps >= 1")
        if self.steps is not None and self.steps < 1:
            raise ConfigError("steps", self.steps, "use an integer >= 1 (or null to train by epochs)")
        if not self.step_sleep_s >= 0:
            raise ConfigError("step_sleep_s", self.step_sleep_s, "use a number of seconds >= 0")
        if self.clip is not None and not self.clip > 0:
            raise ConfigError("clip", self.clip, "use a positive max gradient norm, or null to disable clipping")


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What a script supplies: built after runtime.init(), so every rank seeds it identically."""

    build_model: Callable[[], nn.Module]
    """Returns the plain (unwrapped) model on CPU."""
    dataset: Dataset
    """Map-style dataset; each item a tuple of tensors (inputs..., target)."""
    loss: LossFn
    """loss(model, batch) -> scalar tensor; `batch` is already on the device."""
    optimizer: OptimizerFactory
    """optimizer(params) -> torch.optim.Optimizer."""
    scheduler: SchedulerFactory | None = None
    """scheduler(optimizer, total_steps) -> LR scheduler, stepped after every optimizer step."""


@dataclass(frozen=True)
class TrainResult:
    """What fit() did: the last step, and on rank 0 the model file and its weights' sha256."""

    step: int
    epoch: int
    loss: float | None
    model_path: str | None
    model_sha256: str | None


def train_config(args: argparse.Namespace) -> TrainConfig:
    """TrainConfig from the entrypoints' common flags (sm_dist.runtime.train_args)."""
    return TrainConfig(epochs=args.epochs, steps=args.steps, batch_size=args.batch_size, grad_accum=args.grad_accum,
                       clip=args.clip, log_every=args.log_every, model_dir=args.model_dir,
                       step_sleep_s=args.step_sleep_s)


def adamw(lr: float, weight_decay: float = 0.0) -> OptimizerFactory:
    """An optimizer factory: AdamW(params, lr, weight_decay) (the estimator's 2-state Adam)."""
    if not lr > 0:
        raise ConfigError("lr", lr, "use a positive learning rate, e.g. 1e-3")
    if weight_decay < 0:
        raise ConfigError("weight_decay", weight_decay, "use a weight decay >= 0")
    return lambda params: torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def classification_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Cross-entropy of model(inputs) against integer class targets: batch = (inputs, targets)."""
    inputs, targets = batch
    return nn.functional.cross_entropy(model(inputs), targets)


def next_token_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Mean next-token cross-entropy: batch = (tokens, tokens shifted by one)."""
    inputs, targets = batch
    logits = model(inputs)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


def fit(ctx: RunContext, workload: Workload, config: TrainConfig, checkpointer: Checkpointer | None = None) -> TrainResult:
    """Train `workload` under `ctx` (from runtime.init()); see the module docstring. Collective."""
    model = ctx.wrap_model(workload.build_model())
    optimizer = ctx.build_optimizer(model, workload.optimizer)
    loader = _loader(ctx, workload.dataset, config)
    scheduler = workload.scheduler(optimizer, total_steps(len(workload.dataset), ctx.world_size, config)) \
        if workload.scheduler else None
    objects = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": ctx.amp.scaler,
               "sampler": loader.sampler}
    _log.info("%d samples, %d ranks, global batch %d, %d steps per epoch", len(workload.dataset), ctx.world_size,
              config.batch_size * config.grad_accum * ctx.world_size,
              steps_per_epoch(len(workload.dataset), ctx.world_size, config))
    step, epoch = 0, 0
    if checkpointer is not None:
        resumed = checkpointer.resume(**objects)
        if resumed is not None:
            step, epoch = resumed.step, resumed.epoch
            rank0_print(resumed_line(step, epoch))
    loop = _Loop(ctx, workload, config, model, optimizer, scheduler, start_step=step)
    while not _done(config, step, epoch):
        loader.set_epoch(epoch)  # keeps the restored position when resuming into the same epoch
        for group in _groups(loader, config.grad_accum):
            step += 1
            loop.step(group, step)
            if checkpointer is not None:
                checkpointer.maybe_save(step, epoch=epoch, **objects)
            if _done(config, step, epoch):
                break
        else:
            epoch += 1
    loop.flush(step, epoch)
    if checkpointer is not None:
        checkpointer.wait()  # a background save of this very step sets last_step when it commits
        if checkpointer.storage is not None and checkpointer.last_step != step:
            checkpointer.save(step, epoch=epoch, **objects)  # a re-run of a finished job resumes at the end
        checkpointer.close()
    return write_final_model(ctx, model, optimizer, config.model_dir, step=step, epoch=epoch, loss=loop.last_loss)


class _Loop:
    """One optimizer step over a group of micro-batches, and the metric lines."""

    def __init__(self, ctx: RunContext, workload: Workload, config: TrainConfig, model: nn.Module,
                 optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler | None, *,
                 start_step: int) -> None:
        self.ctx, self.workload, self.config = ctx, workload, config
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.loss = AvgMetric()  # since the last metric line
        self.last_loss: float | None = None
        self.grad_norm: float | None = None
        self.lr = 0.0
        self.logged_step = start_step
        self.logged_at = time.perf_counter()

    def step(self, group: list[Any], step: int) -> None:
        """Forward/backward every micro-batch (gradient sync on the last only), clip, step."""
        ctx, model = self.ctx, self.model
        for i, batch in enumerate(group):
            batch = [t.to(ctx.device, non_blocking=True) for t in batch]
            with ctx.no_sync(model, enabled=i < len(group) - 1), ctx.autocast():
                loss = self.workload.loss(model, batch)
            ctx.backward(loss / len(group))
            self.loss.update(loss, n=len(batch[0]))
        if self.config.clip is not None:
            self.grad_norm = float(ctx.clip_grad_norm_(model, self.config.clip, self.optimizer))
        self.lr = float(self.optimizer.param_groups[0]["lr"])  # the rate this step used
        ctx.step(self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None:
            self.scheduler.step()
        if step % self.config.log_every == 0:
            self.log(step)
        if self.config.step_sleep_s:
            time.sleep(self.config.step_sleep_s)

    def log(self, step: int) -> None:
        """Mean loss over every sample of every rank since the last line (collective)."""
        self.last_loss = self.loss.compute()
        samples = self.loss.last_count
        self.loss.reset()
        now = time.perf_counter()
        seconds, self.logged_at = now - self.logged_at, now
        self.logged_step = step
        metrics: dict[str, object] = {"loss": self.last_loss, "lr": self.lr}
        if seconds > 0:  # every rank's samples since the last line, over rank 0's wall clock
            metrics["samples_per_s"] = samples / seconds
        if self.grad_norm is not None:
            metrics["grad_norm"] = self.grad_norm
        log_metrics(step, metrics)

    def flush(self, step: int, epoch: int) -> None:
        """Log the steps since the last metric line (every rank reaches this together)."""
        if step != self.logged_step:
            self.log(step)


def _done(config: TrainConfig, step: int, epoch: int) -> bool:
    if config.steps is not None:
        return step >= config.steps
    return epoch >= (config.epochs or 0)


def _loader(ctx: RunContext, dataset: Dataset, config: TrainConfig) -> ResumableLoader:
    """This rank's resumable shard. drop_last: no padding samples (a resumed epoch would pad with
    other ones) and no short last batch. A private generator: creating a DataLoader iterator draws
    a base seed, and from the global RNG that draw would make a resumed run's dropout masks
    differ from an uninterrupted run's."""
    share = len(dataset) // ctx.world_size
    if share < config.batch_size:
        raise ConfigError("batch_size", config.batch_size, f"each of the {ctx.world_size} ranks gets {share} "
                          f"samples of {len(dataset)} per epoch; use a batch size <= {share} or more data")
    return build_dataloader(dataset, config.batch_size, ctx=ctx, seed=ctx.seed, drop_last=True, num_workers=0,
                            generator=torch.Generator().manual_seed(ctx.seed))


def _groups(loader: ResumableLoader, grad_accum: int) -> Iterator[list[Any]]:
    """The rest of this epoch as lists of up to grad_accum micro-batches (one optimizer step each)."""
    group: list[Any] = []
    for batch in loader:
        group.append(batch)
        if len(group) == grad_accum:
            yield group
            group = []
    if group:
        yield group


def write_final_model(ctx: RunContext, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                      model_dir: str | None = None, *, step: int = 0, epoch: int = 0,
                      loss: float | None = None) -> TrainResult:
    """Gather the full weights (collective), write them on rank 0 to `model_dir` (None: the run's
    model dir), print the final line `[sm_dist] final step=N model_sha256=<hex>`."""
    weights = full_model_state(ctx, model, optimizer)
    path = sha = None
    if ctx.rank == 0:
        path, sha = write_model(weights, model_dir or ctx.env.model_dir)
        print(final_line(step, sha), flush=True)
    return TrainResult(step=step, epoch=epoch, loss=loss, model_path=path, model_sha256=sha)


def full_model_state(ctx: RunContext, model: nn.Module,
                     optimizer: torch.optim.Optimizer | None = None) -> dict[str, torch.Tensor]:
    """The complete weights as plain CPU tensors, keys without `module.` (collective; empty off rank 0
    for sharded strategies). For "mixed" on replicated strategies these are the fp32 master weights."""
    if getattr(ctx.strategy, "sharded", False):
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return dict(get_model_state_dict(model, options=options))
    state = ctx.state_dict(model, optimizer)["model"]
    return {name: t.detach().cpu() for name, t in state.items()}


def steps_per_epoch(dataset_len: int, world_size: int, config: TrainConfig) -> int:
    """Optimizer steps in one full epoch (full micro-batches only; a short last group still steps)."""
    micro = (dataset_len // world_size) // config.batch_size
    return math.ceil(micro / config.grad_accum)


def total_steps(dataset_len: int, world_size: int, config: TrainConfig) -> int:
    """Optimizer steps of the whole run: --steps, else epochs x steps per epoch."""
    if config.steps is not None:
        return config.steps
    return (config.epochs or 0) * steps_per_epoch(dataset_len, world_size, config)
