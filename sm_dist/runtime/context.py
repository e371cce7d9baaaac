"""init()/shutdown(): process group, device, seed and strategy for one training process.

`init()` takes its defaults from the job spec named by $SM_DIST_JOB_SPEC (written by sm_dist's
PID 1); explicit arguments win; without either: ddp, fp32, seed 0. It returns a RunContext,
also usable as a context manager that tears the process group down on exit.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import gc
import logging
import os
import random
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn

from sm_dist.container.env import RunEnv, detect_env
from sm_dist.contract import torch_support
from sm_dist.errors import ConfigError, RuntimeEnvError, check_int
from sm_dist.jobspec import load_job_spec
from sm_dist.runtime.precision import PrecisionPlugin
from sm_dist.runtime.protocols import OptimizerFactory
from sm_dist.runtime.strategies import get_strategy
from sm_dist.vocab import Precision, Strategy, parse_enum

if TYPE_CHECKING:
    from sm_dist.runtime.strategies.base import Strategy as StrategyPlugin

_log = logging.getLogger(__name__)

#: Process-group timeout. torch's default is 30 min (10 min for NCCL); a dead peer then hangs
#: the job that long. docs/PLATFORM.md §2.3 recommends short timeouts so torchrun can restart quickly;
#: 5 min still covers a slow first connect of many hosts and a long checkpoint barrier.
DEFAULT_TIMEOUT_S = 300.0

_current: RunContext | None = None

#: Strategy options that mean something only to some strategies. Elsewhere they are refused,
#: not ignored: zero2 *is* fsdp without resharding after forward, so reshard_after_forward=True
#: would silently turn it into fsdp; ddp has no shard units to choose.
OPTION_STRATEGIES: dict[str, frozenset[Strategy]] = {
    "reshard_after_forward": frozenset({Strategy.FSDP, Strategy.HSDP}),
    "shard_units": frozenset({Strategy.ZERO2, Strategy.FSDP, Strategy.HSDP}),
}


class RunContext:
    """What a training script needs after init(): ranks, device and strategy helpers."""

    def __init__(self, *, env: RunEnv, strategy: StrategyPlugin, precision: Precision, seed: int,
                 device: torch.device, owns_group: bool) -> None:
        self.env = env
        self.strategy = strategy
        self.precision = precision
        self.seed = seed
        self.device = device
        self.amp = PrecisionPlugin(precision, device.type)
        self._owns_group = owns_group

    # -- who am I ------------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        """This process's global rank."""
        return self.env.rank

    @property
    def world_size(self) -> int:
        """The number of processes in the job."""
        return self.env.world_size

    @property
    def local_rank(self) -> int:
        """This process's rank on its host (its GPU index)."""
        return self.env.local_rank

    @property
    def is_main(self) -> bool:
        """Rank 0."""
        return self.env.rank == 0

    # -- strategy ------------------------------------------------------------------------------
    def wrap_model(self, model: nn.Module) -> nn.Module:
        """Move, convert and wrap `model` for the strategy; every rank starts from rank 0's weights."""
        return self.strategy.wrap_model(model, self)

    def build_optimizer(self, model: nn.Module, factory: OptimizerFactory) -> torch.optim.Optimizer:
        """`factory(params) -> Optimizer`, wrapped as the strategy and precision require."""
        return self.strategy.build_optimizer(model, factory, self)

    def state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict[str, Any]:
        """{"model", "optim"} without `module.` prefixes. Collective: call on every rank."""
        return self.strategy.state_dict(model, optimizer)

    def load_state_dict(self, model: nn.Module, optimizer: torch.optim.Optimizer | None,
                        state: Mapping[str, Any]) -> None:
        """Load a state from state_dict() (any strategy, any world size for sharded ones)."""
        self.strategy.load_state_dict(model, optimizer, dict(state))

    def no_sync(self, model: nn.Module, enabled: bool = True) -> contextlib.AbstractContextManager[None]:
        """Skip gradient sync on accumulation micro-steps: `with ctx.no_sync(m, i % k != k - 1)`."""
        return self.strategy.no_sync(model) if enabled else contextlib.nullcontext()

    # -- precision-aware step ------------------------------------------------------------------
    def autocast(self) -> contextlib.AbstractContextManager[None]:
        """Context for the forward pass and loss."""
        return self.amp.autocast()

    def backward(self, loss: torch.Tensor) -> None:
        """loss.backward() (scaled for fp16 amp)."""
        self.amp.backward(loss)

    def clip_grad_norm_(self, model: nn.Module, max_norm: float,
                        optimizer: torch.optim.Optimizer | None = None) -> torch.Tensor:
        """Clip by the global gradient norm over all ranks' shards; returns that norm."""
        if optimizer is not None:
            self.amp.unscale_(optimizer)
        return self.strategy.clip_grad_norm_(model, max_norm)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """optimizer.step() (through the loss scaler when there is one)."""
        self.amp.step(optimizer)

    # -- collectives ---------------------------------------------------------------------------
    def barrier(self) -> None:
        """Wait for every rank (nothing when no process group is joined)."""
        if dist.is_initialized():
            dist.barrier()

    def shutdown(self, barrier: bool = True) -> None:
        """Destroy the process group init() created (idempotent).

        `barrier=False` on the failure path: a rank that raised must not wait for peers that
        may never reach the barrier (torchrun then sees the failure at once, not after the
        process-group timeout).
        """
        global _current
        if self._owns_group and dist.is_initialized():
            # Barrier first: no rank closes its sockets while a peer's last collective is in
            # flight. gc after destroy: process groups no longer referenced are destructed
            # (their gloo threads joined) while the interpreter is alive, not during
            # finalization, where a gloo thread that needs the GIL aborts the process
            # ("terminate called without an active exception", seen in ~1 of 5 2-rank runs).
            if barrier:
                with contextlib.suppress(RuntimeError):
                    dist.barrier()
            dist.destroy_process_group()
            gc.collect()
        self._owns_group = False
        if _current is self:
            _current = None

    def __enter__(self) -> RunContext:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.shutdown(barrier=exc_type is None)

    def __repr__(self) -> str:
        return (f"RunContext(rank={self.rank}/{self.world_size}, strategy={self.strategy.name}, "
                f"precision={self.precision.value}, device={self.device}, launcher={self.env.launcher})")


def init(strategy: str | Strategy | None = None, precision: str | Precision | None = None,
         seed: int | None = None, *, timeout: float = DEFAULT_TIMEOUT_S,
         environ: Mapping[str, str] | None = None, sync_batchnorm: bool = False,
         reshard_after_forward: bool | None = None,
         shard_units: Iterable[type[nn.Module]] | None = None) -> RunContext:
    """Set the device, join the process group (with `timeout`), seed every rank identically.

    None arguments come from the job spec ($SM_DIST_JOB_SPEC), else ddp / fp32 / 0.
    """
    global _current
    check_torch_version(torch.__version__)
    spec = load_job_spec(environ)
    strategy = parse_enum(Strategy, strategy or (spec.strategy if spec else Strategy.DDP), "strategy")
    precision = parse_enum(Precision, precision or (spec.precision if spec else Precision.FP32), "precision")
    seed = seed if seed is not None else (spec.seed if spec else 0)
    check_int("seed", seed, 0)
    env = detect_env(environ, num_gpus=torch.cuda.device_count())
    if strategy is Strategy.DP and env.world_size > 1:
        raise ConfigError("strategy", "dp", f"nn.DataParallel runs in one process on one instance, but this run "
                          f"has {env.world_size} processes; use ddp")
    check_strategy_options(strategy, reshard_after_forward=reshard_after_forward, shard_units=shard_units)
    device = _device(env)
    agent_store = (os.environ if environ is None else environ).get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    owns = _init_process_group(env, timeout, agent_store)
    seed_everything(seed)
    plugin = get_strategy(strategy, sync_batchnorm=sync_batchnorm,
                          reshard_after_forward=reshard_after_forward, shard_units=shard_units)
    _current = RunContext(env=env, strategy=plugin, precision=precision, seed=seed, device=device, owns_group=owns)
    if owns:
        atexit.register(_shutdown_at_exit, _current)  # scripts that never call shutdown()
    _log.debug("initialised %r", _current)
    return _current


def check_torch_version(version: str) -> None:
    """Refuse a torch below the supported range (RuntimeEnvError); warn above the newest tested."""
    refused = torch_support.refusal(version)
    if refused:
        raise RuntimeEnvError(refused)
    newer = torch_support.untested(version)
    if newer:
        _log.warning("%s; report problems with the torch version", newer)


def check_strategy_options(strategy: Strategy, **options: object) -> None:
    """Refuse an option given (not None) to a strategy it does not apply to (see OPTION_STRATEGIES)."""
    for name, value in options.items():
        allowed = OPTION_STRATEGIES[name]
        if value is not None and strategy not in allowed:
            names = ", ".join(sorted(s.value for s in allowed))
            raise ConfigError(name, value, f"applies to {names} only, not strategy={strategy.value}; "
                              f"drop it or use one of those strategies")


def shutdown() -> None:
    """Tear down the context init() returned last (no-op if none)."""
    if _current is not None:
        _current.shutdown()


def _shutdown_at_exit(ctx: RunContext) -> None:
    """atexit hook: tear the group down before interpreter finalization (no barrier: the
    process may be exiting on an error while its peers still train)."""
    ctx.shutdown(barrier=False)


def current() -> RunContext | None:
    """The context of the last init() that was not shut down."""
    return _current


def seed_everything(seed: int) -> None:
    """Same seed on every rank: identical model init and identical random ops."""
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed % 2**32)


def _device(env: RunEnv) -> torch.device:
    if env.device_type == "cuda":
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def _init_process_group(env: RunEnv, timeout_s: float, agent_store: bool) -> bool:
    """Join the group; True if this call created it (and shutdown() should destroy it)."""
    if dist.is_initialized():
        if dist.get_world_size() != env.world_size:
            raise RuntimeEnvError(f"an existing process group has world size {dist.get_world_size()}, but "
                                  f"WORLD_SIZE={env.world_size}; destroy it or launch with a matching WORLD_SIZE")
        return False
    timeout = datetime.timedelta(seconds=timeout_s)
    if env.world_size == 1:
        store: dist.Store = dist.HashStore()
    elif agent_store:
        # torchrun's agent hosts the store; env:// joins it as a client (a TCPStore of our own
        # on MASTER_PORT would collide with the agent's, docs/PLATFORM.md §2.3).
        dist.init_process_group(env.backend, init_method="env://", timeout=timeout)
        return True
    else:
        if env.master_addr is None or env.master_port is None:
            raise RuntimeEnvError(f"{env.world_size} processes but no MASTER_ADDR/MASTER_PORT: launch with torchrun "
                                  "(or set both)")
        store = dist.TCPStore(env.master_addr, env.master_port, env.world_size,
                              is_master=env.rank == 0, timeout=timeout)
    dist.init_process_group(env.backend, store=store, rank=env.rank, world_size=env.world_size, timeout=timeout)
    return True


__all__ = ["DEFAULT_TIMEOUT_S", "OPTION_STRATEGIES", "RunContext", "check_strategy_options", "check_torch_version", "current", "init",
           "seed_everything", "shutdown"]
