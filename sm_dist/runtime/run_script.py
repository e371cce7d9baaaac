"""`python -u -m sm_dist.runtime.run_script SCRIPT ARGS...`: a worker's training script, then its end.

`sm_dist.container.worker` (torchrun's `--module`) execs this once its own step is done (same pid).
It runs SCRIPT as `python -u SCRIPT ARGS` would (as `__main__`, `sys.argv` = SCRIPT ARGS, the
script's folder first on `sys.path`) and, when the script returns (or exits 0), ends the rank in
a way a multi-host job can count on:

1. **closes the process group the script left open** (destroy + gc while the interpreter is alive):
   a gloo group destructed during interpreter finalization can abort the process after the last
   step ("terminate called without an active exception", exit code -6), which made torchrun
   restart a job whose training was over;
2. **marks the rank finished** in PID 1's state folder (`worker.mark_finished`):
   PID 1 then knows the script's own exit, whatever torchrun reports after it;
3. **says when the rank trained alone** (`[sm_dist] rank R trained alone: ...`, the log-line
   contract), from what its process groups did: the largest group's size against WORLD_SIZE and
   the collectives they ran (torch's per-group sequence numbers, read when the script destroys a
   group and at its end). Local mode turns it into the summary's warning; a script that crashed,
   or whose groups cannot be read, says nothing;
4. **waits for every rank of the round** on algo-1's rendezvous store. A host whose workers have
   all exited is done for torchrun (its agent sits in the exit barrier) and never joins another
   round; were a worker elsewhere killed after its own last step, its restart could meet nobody
   (minutes in torchrun's exit barrier, then a rendezvous error). Waiting here keeps every host's
   agent in the round, so such a restart brings every host back, and the script resumes from its
   checkpoints. When the wait is over, PID 1's state folder says the job's scripts all
   finished (`worker.FINISHED_ALL`).

The script's own failure (an exception, a non-zero exit) is left alone: Python prints it and the
process exits as it would have. Outside sm_dist's PID 1 (no state folder) only the script runs.
"""

from __future__ import annotations

import functools
import gc
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import signal
import sys
import time
import weakref
from collections.abc import Callable, Mapping
from datetime import timedelta
from types import ModuleType, TracebackType
from typing import Protocol, cast

from sm_dist.container import worker
from sm_dist.contract.log_lines import alone_line
from sm_dist.runtime import liveness

#: How long a finished rank's first connection to the rendezvous store may take.
CONNECT_TIMEOUT_S = 30.0
#: The longest single wait on the store while a finished rank waits; it returns as soon as the last
#: rank counts in (a 1 s poll here made every job end up to a second late). The wait has no end when
#: the script's process groups are gone (a slow rank is waited for, as torchrun's exit barrier would).
WAIT_SLICE_S = 3600.0
#: The wait's bound when a group outlived the script (torch keeps a DDP model's until the process
#: ends; gloo's shutdown() does not close its connections): a rank that ran more steps than this one
#: would sit in a collective with it until the group's timeout (30 min by default), so this rank
#: then ends as before, at most this much later.
WAIT_WITH_LIVE_GROUPS_S = 30.0
#: The wait's bound after a split resume (the hosts resumed from different files): the other ranks
#: not finishing by then ran other steps; the rank then fails with the reason.
WAIT_AFTER_SPLIT_S = 10.0
#: What a rank prints then: PID 1 stops the job at once (an `prog: error:` line no restart can
#: fix, sm_dist.contract.worker_errors), the split resume above it the reason.
SPLIT_ERROR = ("sm_dist.runtime.run_script: error: rank {rank} finished its script and other ranks did not within "
               "{seconds:.0f} s after the hosts resumed from different states (split resume): they ran other steps")


#: Where torch keeps the process groups (imported by the script, or by `not_restoring` just before it).
C10D = "torch.distributed.distributed_c10d"


class _Group(Protocol):
    """What is read of a torch ProcessGroup."""

    def size(self) -> int: ...

    def _get_sequence_number_for_group(self) -> int: ...


class GroupEvidence:
    """What the script's process groups did: the largest group, the collectives they ran."""

    def __init__(self) -> None:
        self.largest = 0
        self.collectives = 0
        self.readable = True
        self._groups: list[weakref.ref[_Group]] = []

    def note(self, c10d: ModuleType, group: object = None) -> None:
        """Read `group` (None: every live group) before it is destroyed, or at the script's end."""
        try:
            if not c10d.is_initialized():
                return
            groups: list[_Group] = list(c10d._world.pg_map) if group is None else [cast(_Group, group)]
            for pg in groups:
                self.largest = max(self.largest, pg.size())
                self.collectives += pg._get_sequence_number_for_group()
                self._groups.append(weakref.ref(pg))
        except Exception:  # noqa: BLE001 - another torch: say nothing rather than something wrong
            self.readable = False

    def groups_alive(self) -> bool:
        """Whether a group the script destroyed is still alive (its sockets open): torch keeps a
        DDP model's group after destroy_process_group, until the process ends. Read after a full
        collection (`close_process_group` runs one: a second one cost a rank's end ~0.3 s more)."""
        return any(ref() is not None for ref in self._groups)

    def alone(self, world_size: int) -> str | None:
        """Why this rank trained alone in a job of `world_size` processes, or None."""
        if not self.readable or world_size <= 1:
            return None
        if self.largest == 0:
            return f"it joined no process group (WORLD_SIZE={world_size})"
        if self.largest < world_size:
            return f"its largest process group had {self.largest} of WORLD_SIZE={world_size} processes"
        if self.collectives == 0:
            return f"its process group of {self.largest} ran no collective"
        return None


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `then(module)` once `name` has been imported (by the script), without importing it."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            try:
                self.then(module)
            except Exception:  # noqa: BLE001 - never in the script's way
                pass

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def watch_groups(evidence: GroupEvidence) -> None:
    """Note each process group the script destroys (torch wipes them then) into `evidence`."""

    def wrap(c10d: ModuleType) -> None:
        original = c10d.destroy_process_group

        @functools.wraps(original)
        def destroy_process_group(group: object = None, *args: object, **kwargs: object) -> object:
            evidence.note(c10d, group)
            return original(group, *args, **kwargs)

        setattr(c10d, "destroy_process_group", destroy_process_group)  # noqa: B010 - a module's attribute

    if C10D in sys.modules:  # already imported (not_restoring talked to the store before the script)
        wrap(sys.modules[C10D])
    else:
        sys.meta_path.insert(0, _AfterImport(C10D, wrap))


def run(script: str, args: list[str]) -> None:
    """Run `script` as `__main__`, as `python SCRIPT ARGS` would; return when it finished (returned,
    or exited 0). A non-zero exit propagates; an exception is printed as Python prints it (from
    the script's own frame on: this module's and runpy's are left out) and exits 1."""
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python SCRIPT` sets it
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    except Exception as exc:
        tb = _from_script(exc.__traceback__, script)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # the hook may read either
        raise SystemExit(1) from None


def _from_script(tb: TracebackType | None, script: str) -> TracebackType | None:
    """The traceback from the script's first frame on (None for an error compiling it: Python
    then prints the file, line and caret without a "Traceback" header, as for `python SCRIPT`)."""
    target = os.path.abspath(script)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    return tb


def close_process_group(evidence: GroupEvidence) -> None:
    """Destroy the default process group the script left initialized (and every other group), then
    collect the garbage: what is left of a group is then alive for good (`groups_alive`)."""
    c10d = sys.modules.get(C10D)
    if c10d is None:  # the script never imported it: nothing to close
        return
    try:
        if c10d.is_initialized():
            c10d.destroy_process_group()  # noted by watch_groups
    except Exception as exc:  # noqa: BLE001 - the script's work is done; say why and go on
        worker.say(f"could not close the script's process group: {type(exc).__name__}: {exc}")
    gc.collect()


def wait_for_every_rank(env: Mapping[str, str], limit: float | None) -> bool | None:
    """Count this rank in on the rendezvous store and wait until every rank of the round has: True.
    False when the store is gone (the host that held it ended: nothing left to wait for); None
    when `limit` seconds passed first."""
    world = int(env.get("WORLD_SIZE", "1") or 1)
    endpoint = env.get(worker.RDZV_ENDPOINT_ENV, "")
    if world <= 1 or not endpoint:
        return True
    from torch.distributed import TCPStore

    host, _, port = endpoint.rpartition(":")
    key = f"sm_dist/finished/{worker.round_id(env)}"
    deadline = None if limit is None else time.monotonic() + limit
    try:
        store = TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=CONNECT_TIMEOUT_S))
        if store.add(f"{key}/count", 1) >= world:
            store.set(f"{key}/all", "1")
        while not store.check([f"{key}/all"]):
            left = WAIT_SLICE_S if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return None
            try:  # torch's wait ends when the key is set; a timeout raises (and c10d logs one line)
                store.wait([f"{key}/all"], timedelta(seconds=min(left, WAIT_SLICE_S)))
            except Exception:  # noqa: BLE001 - the time is up, or the store is gone: check() says which
                pass
        return True
    except Exception as exc:  # noqa: BLE001
        worker.say(f"the rendezvous store {endpoint} is gone ({type(exc).__name__}); not waiting for the other ranks")
        return False


def end(env: Mapping[str, str], evidence: GroupEvidence) -> None:
    """After the script finished: close its group, say whether it trained alone, mark the rank,
    wait for every rank."""
    if not env.get(worker.STATE_ENV):
        return
    # the script's handlers (a SIGTERM vote, a checkpoint on SIGINT) have nothing left to act on:
    # torchrun stopping this process (a restart elsewhere, a stop) must end it at once
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    close_process_group(evidence)
    alone = evidence.alone(int(env.get("WORLD_SIZE", "1") or 1))
    if alone:
        print(alone_line(int(env.get("RANK", "0") or 0), alone), file=sys.stderr, flush=True)
    worker.mark_finished(env)
    split = worker.split(env)
    limit = WAIT_AFTER_SPLIT_S if split else WAIT_WITH_LIVE_GROUPS_S if evidence.groups_alive() else None
    started = time.monotonic()
    met = wait_for_every_rank(env, limit)
    if met:
        worker.mark_finished(env, every_rank=True)
        if time.monotonic() - started >= 30:
            worker.say(f"every rank finished (this one waited {time.monotonic() - started:.0f} s for the others)")
    elif met is None and split:
        print(SPLIT_ERROR.format(rank=env.get("RANK", "?"), seconds=limit), file=sys.stderr, flush=True)
        raise SystemExit(1)


def not_restoring(env: Mapping[str, str], round_key: str) -> None:
    """Tell the hosts' restore meeting of `round_key` that this host does not restore (its workers
    start for the first time): a host that restores in the same round does not wait for it."""
    endpoint = env.get(worker.RDZV_ENDPOINT_ENV, "")
    if not endpoint or not env.get("SM_CURRENT_HOST"):
        return
    from torch.distributed import TCPStore

    host, _, port = endpoint.rpartition(":")
    try:
        store = TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=CONNECT_TIMEOUT_S))
        key = f"{worker.MEET_PREFIX}/{round_key}/{env['SM_CURRENT_HOST']}"
        if not store.check([key]):
            store.set(key, worker.NOT_RESTORING)
    except Exception as exc:  # noqa: BLE001 - a restoring host then waits as before; never in the script's way
        worker.say(f"could not tell the restore meeting at {endpoint} that this host does not restore "
                   f"({type(exc).__name__})")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m sm_dist.runtime.run_script SCRIPT [ARGS...]", file=sys.stderr)
        raise SystemExit(2)
    round_key = os.environ.pop(worker.NOT_RESTORING_ENV, None)  # sm_dist's, not the script's
    environ = dict(os.environ)  # as PID 1 gave it: the script may change os.environ
    evidence = GroupEvidence()
    watch_groups(evidence)
    if round_key:
        not_restoring(environ, round_key)
    liveness.start(environ)  # PID 1's hang watch: this rank's stack on demand, its collectives counted
    run(args[0], args[1:])
    end(environ, evidence)


if __name__ == "__main__":
    main()
