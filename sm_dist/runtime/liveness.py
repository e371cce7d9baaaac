"""A rank's part in PID 1's hang watch: its stack on demand, its collectives counted.

`sm_dist.runtime.run_script` calls `start(env)` before the script runs, in every rank PID 1
starts (the state folder in SM_DIST_WORKER_STATE says so). It

- registers `faulthandler` on SIGUSR1 (`contract.hang.DUMP_SIGNAL`): every thread's Python stack is
  written to the rank's `.stacks` file from a C signal handler, which works while the main thread is
  blocked in a collective or in the script's own code (the GIL is not needed);
- writes the rank's record (pid, rank, rendezvous round, main thread id) once that is armed, so PID 1
  signals only a rank that will not die of SIGUSR1's default action;
- starts a daemon thread that, once a second, adds up the collectives issued on the script's process
  groups (torch's per-group sequence numbers, read without importing torch: only when the script did)
  and touches the rank's `.progress` file when the sum went up. A rank blocked in a collective, or
  stopped in its own code while the others block, stops touching it: that is what PID 1 sees;
- under local mode's chaos `hang:STEP` (`CHAOS_HANG_ENV`), installs the handler that stops the rank:
  on SIGUSR2 it says so and sleeps for ever in the main thread, as a rank stuck in its own code would.

Nothing here may get in the script's way: every failure is silent (the watch then sees no progress
from this rank's collectives, only from the output lines).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from sm_dist.container import worker
from sm_dist.contract import hang

#: Seconds between two counts of the collectives.
BEAT_S = 1.0
#: Where torch keeps the process groups (read only when the script imported it).
C10D = "torch.distributed.distributed_c10d"
_open_files: list[IO[str]] = []  # faulthandler writes to their descriptors: they stay open
#: Ends the counting thread (it is a daemon: a rank never needs it; a test in one process does).
STOP = threading.Event()


def collectives() -> int | None:
    """The collectives issued so far on the script's live process groups; None before it made one."""
    c10d = sys.modules.get(C10D)
    if c10d is None:
        return None
    try:
        if not c10d.is_initialized():
            return None
        return sum(int(pg._get_sequence_number_for_group()) for pg in list(c10d._world.pg_map))
    except Exception:  # noqa: BLE001 - another torch, or a group going away: no count this time
        return None


def _beat(progress: Path) -> None:
    last = None
    while not STOP.wait(BEAT_S):
        count = collectives()
        if count is None or count == last:
            continue
        last = count
        try:
            os.utime(progress)
        except OSError:  # PID 1's folder is gone: it is ending
            return


def _hang(signum: int, _frame: object) -> None:
    print(f"[sm_dist] chaos hang: rank {os.environ.get('RANK', '?')} stops making progress here "
          f"(signal {signum}); PID 1's hang watch must find it", file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)


def start(env: Mapping[str, str]) -> bool:
    """Arm the stack dump, record the rank and start counting its collectives; False when not under
    sm_dist's PID 1 (no state folder) or the folder cannot be written."""
    state = env.get(worker.STATE_ENV)
    if not state:
        return False
    record, progress, stacks = hang.rank_paths(state, env.get("LOCAL_RANK", "0"))
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        dump = open(stacks, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life
        faulthandler.register(signal.Signals[hang.DUMP_SIGNAL], file=dump, all_threads=True)
        _open_files.append(dump)
        progress.touch()
        tmp = record.with_name(f".{record.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"pid": os.getpid(), "rank": env.get("RANK", "?"), "round": worker.round_id(env),
                                   "thread": threading.main_thread().ident}), encoding="utf-8")
        os.replace(tmp, record)
    except (OSError, ValueError, RuntimeError):
        return False
    if env.get(hang.CHAOS_HANG_ENV) == "1":
        signal.signal(signal.Signals[hang.CHAOS_HANG_SIGNAL], _hang)
    threading.Thread(target=_beat, args=(progress,), name="sm_dist-liveness", daemon=True).start()
    return True


__all__ = ["BEAT_S", "STOP", "collectives", "start"]
