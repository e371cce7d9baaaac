"""The public Checkpointer: save, save in the background, resume, stop on SIGTERM.

Collective: every rank constructs it at the same point (it creates two gloo process groups of
its own, so background saves and the per-step stop vote never interleave with training's
collectives), and every rank calls ``save``/``maybe_save``/``resume``/``close`` in the same order.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

import torch
import torch.distributed as dist

from sm_dist.contract.checkpoint import DEFAULT_KEEP, CheckpointMode, CheckpointSettings, Manifest, parse_mode
from sm_dist.errors import CheckpointError, ConfigError
from sm_dist.runtime.checkpoint.config import (
    open_storage,
    run_identity,
)
from sm_dist.runtime.checkpoint.faults import FaultHook, parse_faults
from sm_dist.runtime.checkpoint.load import (
    ResumeState,
    fetch_checkpoint,
    load_model_state,
    restore_common,
)
from sm_dist.runtime.checkpoint.payload import collect_payload
from sm_dist.runtime.checkpoint.save import Group, SavePayload, write_checkpoint
from sm_dist.runtime.checkpoint.signals import (
    StopSignal,
    final_save_fits,
    grace_seconds,
)
from sm_dist.runtime.checkpoint.state import has_dtensor, resolve_strategy
from sm_dist.runtime.checkpoint.storage import Storage
from sm_dist.runtime.protocols import RunIdentity, Stateful, StateStrategy

if TYPE_CHECKING:
    from torch import nn
    from torch.distributed import ProcessGroup
    from typing_extensions import Unpack  # typing.Unpack is 3.11+; annotations are strings here

_log = logging.getLogger(__name__)


class SettingsChanges(TypedDict, total=False):
    """Fields of CheckpointSettings that `Checkpointer.from_env` may replace."""

    mode: CheckpointMode
    uri: str | None
    local_path: str | None
    keep: int | None
    interval_steps: int | None
    async_checkpoint: bool


class Checkpointer:
    """Crash-safe checkpoints for one training run (the contract: `sm_dist.runtime.checkpoint`).

    env_or_ctx: a RunContext (its strategy saves and loads the state) or RunEnv; None reads the
    ranks from torch.distributed. settings: where, how often and how many (CheckpointSettings,
    e.g. the job spec's); or, instead of the record, its fields one by one: uri/mode/local_path
    (where; see config.py for "auto"), keep (committed checkpoints kept, >= 2, None = all),
    interval_steps (maybe_save's period), async_checkpoint (maybe_save writes in the background).
    storage/strategy: explicit objects, mostly for tests. handle_signals: record SIGTERM for the
    per-step stop vote. async_save: async_checkpoint's old name, refused in one line naming it.
    """

    def __init__(self, env_or_ctx: RunIdentity | None = None, settings: CheckpointSettings | None = None, *,
                 uri: str | None = None, mode: str | CheckpointMode = CheckpointMode.AUTO,
                 keep: int | None = DEFAULT_KEEP, interval_steps: int | None = None, async_checkpoint: bool = False,
                 local_path: str | None = None, storage: Storage | None = None, strategy: StateStrategy | None = None,
                 handle_signals: bool = True, async_save: None = None) -> None:
        if async_save is not None:  # its old name, refused: one name from sm-dist fit to here
            raise ConfigError("async_save", async_save, "renamed: use async_checkpoint= (its name from sm-dist fit to "
                              "the job spec)")
        fields = CheckpointSettings(mode=parse_mode(mode), uri=uri, local_path=local_path, keep=keep,
                                  interval_steps=interval_steps, async_checkpoint=async_checkpoint)
        if settings is not None and fields != CheckpointSettings():
            raise ConfigError("settings", settings, "give the settings record or its fields (uri=, mode=, keep=, "
                              "...), not both")
        self.config = settings if settings is not None else fields
        self._ctx = env_or_ctx
        self.rank, self.world_size = run_identity(env_or_ctx)
        self._strategy = resolve_strategy(env_or_ctx, strategy)
        self.storage = storage if storage is not None else open_storage(self.config, env_or_ctx, self.rank)
        self._group, self._vote_pg = self._make_groups()
        self._faults = FaultHook(parse_faults(), self.rank, self.world_size)
        self._signal = StopSignal()
        self._thread: threading.Thread | None = None
        self._thread_error: BaseException | None = None
        self._stop_agreed: tuple[bool, float] = (False, 0.0)
        self.last_step: int | None = None  # newest step committed or resumed in this process
        self.last_save_seconds: float | None = None  # duration of the last write (predicts the final one)
        self.last_stall_seconds: float | None = None  # how long the last save() blocked the caller
        self._closed = False
        self._check_access()
        if handle_signals:
            self._signal.install()

    @classmethod
    def from_env(cls, ctx: RunIdentity | None = None, **overrides: Unpack[SettingsChanges]) -> Checkpointer:
        """The job spec's settings ($SM_DIST_JOB_SPEC; the defaults without one) and the run
        environment; `overrides` (CheckpointSettings fields, e.g. keep=4) replace the spec's."""
        settings = job_settings()
        return cls(ctx, dataclasses.replace(settings, **overrides) if overrides else settings)

    def _make_groups(self) -> tuple[Group, ProcessGroup | None]:
        if self.world_size == 1:
            return Group(rank=0, world_size=1), None
        if not dist.is_initialized():
            raise CheckpointError(f"world size is {self.world_size} but torch.distributed is not initialized; "
                                  "create the Checkpointer after runtime.init() / init_process_group")
        # gloo for both: CPU tensors on any backend, and a PG of our own per thread of use
        save_pg = dist.new_group(backend="gloo")
        vote_pg = dist.new_group(backend="gloo")
        return Group(rank=self.rank, world_size=self.world_size, pg=save_pg), vote_pg

    def _check_access(self) -> None:
        if self.storage is None:
            return
        problem = None
        if self.rank == 0:
            try:
                self.storage.check_access()
            except CheckpointError as exc:
                problem = str(exc)
        box = [problem]
        if self._group.pg is not None:
            dist.broadcast_object_list(box, src=0, group=self._group.pg)
        if box[0]:
            raise CheckpointError(box[0])

    # -- saving ---------------------------------------------------------------------------------
    def save(self, step: int, *, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
             scheduler: Stateful | None = None, scaler: Stateful | None = None, sampler: Stateful | None = None,
             epoch: int = 0, extras: dict[str, Any] | None = None, blocking: bool = True) -> Manifest | None:
        """Write and commit a checkpoint of `step` (collective).

        blocking=False copies the state to CPU and returns; the write, upload and commit run in
        the background. The next save/resume/close waits for it and raises CheckpointError if
        it failed (a failed save is never committed). Returns the manifest when blocking.
        """
        if self.storage is None:
            return None
        self.wait()
        start = time.monotonic()
        payload = collect_payload(step, epoch=epoch, strategy=self._strategy, model=model, optimizer=optimizer,
                                  scheduler=scheduler, scaler=scaler, sampler=sampler, extras=extras,
                                  rank=self.rank, copy=not blocking, precision=_precision(self._ctx))
        if blocking:
            manifest = write_checkpoint(payload, self.storage, self._group, self._faults, self.config.keep)
            self.last_save_seconds = self.last_stall_seconds = time.monotonic() - start
            self.last_step = step
            return manifest
        self._thread = threading.Thread(target=self._background, args=(payload, self.storage), name=f"sm_dist-ckpt-{step}",
                                        daemon=True)
        self._thread.start()
        self.last_stall_seconds = time.monotonic() - start
        return None

    def _background(self, payload: SavePayload, storage: Storage) -> None:
        start = time.monotonic()
        try:
            write_checkpoint(payload, storage, self._group, self._faults, self.config.keep)
        except BaseException as exc:  # reported by wait(); DCP failures are BaseExceptions
            _log.error("background checkpoint of step %d failed: %s", payload.step, exc)
            self._thread_error = exc
            return
        self.last_save_seconds = time.monotonic() - start
        self.last_step = payload.step

    @property
    def saving(self) -> bool:
        """True while a background save is still writing."""
        return self._thread is not None and self._thread.is_alive()

    def wait(self) -> None:
        """Block until a background save finished; raise CheckpointError if it failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._thread_error is not None:
            error, self._thread_error = self._thread_error, None
            raise CheckpointError(f"a background checkpoint failed and was not committed: {error}") from error

    def maybe_save(self, step: int, *, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                   scheduler: Stateful | None = None, scaler: Stateful | None = None, sampler: Stateful | None = None,
                   epoch: int = 0, extras: dict[str, Any] | None = None) -> Manifest | None:
        """Call once per step on every rank (the state as for save): votes on a stop, then saves
        every `interval_steps`.

        After an agreed stop (SIGTERM) it saves a final checkpoint if it fits in the grace time,
        closes, and raises SystemExit(EXIT_INTERRUPTED).
        """
        save = functools.partial(self.save, step, model=model, optimizer=optimizer, scheduler=scheduler,
                                 scaler=scaler, sampler=sampler, epoch=epoch, extras=extras)
        if self.stop_requested():
            self._stop(step, save)
        every = self.config.interval_steps
        if every and step % every == 0 and step != self.last_step:
            return save(blocking=not self.config.async_checkpoint)
        return None

    # -- stopping -------------------------------------------------------------------------------
    def stop_requested(self) -> bool:
        """True on every rank once any rank got SIGTERM (collective: call it at step boundaries)."""
        if self._stop_agreed[0]:
            return True
        vote = torch.tensor([1.0 if self._signal.requested else 0.0, self._signal.elapsed()], dtype=torch.float64)
        if self._vote_pg is not None:
            dist.all_reduce(vote, op=dist.ReduceOp.MAX, group=self._vote_pg)
        self._stop_agreed = (bool(vote[0] > 0), float(vote[1]))
        return self._stop_agreed[0]

    def request_stop(self) -> None:
        """Behave as if this rank received SIGTERM now."""
        self._signal.trigger()

    def _stop(self, step: int, save: Callable[..., Manifest | None]) -> None:
        from sm_dist.jobspec import EXIT_INTERRUPTED, INTERRUPT_MARKER_ENV

        committed = self._final_save(step, save)
        marker = os.environ.get(INTERRUPT_MARKER_ENV)
        # One writer per host (its local rank 0): every host's PID 1 reads its own marker to
        # exit EXIT_INTERRUPTED; the file names the host's own container path.
        if committed and marker and int(os.environ.get("LOCAL_RANK", self.rank)) == 0:
            with open(marker, "w", encoding="utf-8") as handle:
                handle.write(f"{self.last_step}\n")
        self.close(raise_errors=False)
        _log.warning("stopped after step %d on request; exit code %d", step, EXIT_INTERRUPTED)
        raise SystemExit(EXIT_INTERRUPTED)

    def _final_save(self, step: int, save: Callable[..., Manifest | None]) -> bool:
        """Save `step` if it fits in the grace time left; True if the latest state is committed."""
        if self.storage is None:
            return False
        try:
            self.wait()
        except CheckpointError as exc:
            _log.error("%s", exc)
        if step == self.last_step:
            return True
        predicted = torch.tensor([self.last_save_seconds if self.last_save_seconds is not None else -1.0],
                                 dtype=torch.float64)
        if self._vote_pg is not None:
            dist.all_reduce(predicted, op=dist.ReduceOp.MAX, group=self._vote_pg)
        guess = float(predicted[0]) if predicted[0] >= 0 else None
        elapsed, grace = self._stop_agreed[1], grace_seconds()
        if not final_save_fits(elapsed, guess, grace):
            _log.warning("no final checkpoint: %.1fs since SIGTERM, a save takes ~%.1fs, grace %.0fs; "
                         "the last committed step is %s", elapsed, guess, grace, self.last_step)
            return False
        try:
            save(blocking=True)
        except CheckpointError as exc:
            _log.error("final checkpoint failed: %s", exc)
            return False
        return True

    # -- resuming -------------------------------------------------------------------------------
    def resume(self, *, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
               scheduler: Stateful | None = None, scaler: Stateful | None = None,
               sampler: Stateful | None = None) -> ResumeState | None:
        """Restore the newest good checkpoint into the given objects (collective); None if there is none."""
        if self.storage is None:
            return None
        self.wait()
        fetched = fetch_checkpoint(self.storage, rank=self.rank, world_size=self.world_size, pg=self._group.pg,
                                   template=lambda: self._strategy.state_dict(model, optimizer))
        if fetched is None:
            _log.info("no committed checkpoint in %s; starting from scratch", self.storage.uri)
            return None
        step, manifest, folder = fetched.step, fetched.manifest, fetched.folder
        sharded_now = bool(getattr(self._strategy, "sharded", False)) or has_dtensor(dict(model.state_dict()))
        load_model_state(folder, manifest, self._strategy, sharded_now, model, optimizer, self._group,
                         fetched.template)
        extras = restore_common(folder, manifest, self.rank, self.world_size, scheduler=scheduler,
                                scaler=scaler, sampler=sampler)
        self.storage.release(step)
        self.last_step = step
        _log.info("resumed from %s at step %d", self.storage.uri, step)
        return ResumeState(step=manifest.step, epoch=manifest.epoch, extras=extras, location=str(folder),
                           saved_world_size=manifest.world_size)

    # -- shutdown -------------------------------------------------------------------------------
    def close(self, raise_errors: bool = True) -> None:
        """Wait for a background save and put the signal handler back (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._signal.uninstall()
        try:
            self.wait()
        except CheckpointError:
            if raise_errors:
                raise
            _log.exception("while closing the checkpointer")

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(raise_errors=exc[0] is None)


def job_settings() -> CheckpointSettings:
    """The job spec's checkpoint settings ($SM_DIST_JOB_SPEC), or the defaults when there is none."""
    from sm_dist.jobspec import load_job_spec

    spec = load_job_spec()
    return spec.checkpoint if spec is not None else CheckpointSettings()


def _precision(ctx: RunIdentity | None) -> str | None:
    """The run context's precision, for the manifest (None for a RunEnv or no context)."""
    precision = getattr(ctx, "precision", None)
    return None if precision is None else str(precision)


__all__ = ["Checkpointer", "ResumeState", "job_settings"]
