"""The hang watch's contract (stdlib): what a rank leaves for its PID 1, and the lines a hang prints.

Three parts meet here. Each rank (`sm_dist.runtime.liveness`, started by run_script before the script)
leaves in PID 1's per-host state folder, under RANKS_DIR:

    <local rank>.json       {"pid", "rank", "round", "thread"} (thread: the main thread's id, as
                            faulthandler prints it), written once the stack dump below is armed
    <local rank>.progress   touched whenever the collectives the rank's process groups issued went up
    <local rank>.stacks     where faulthandler writes every thread's stack on DUMP_SIGNAL

PID 1 (`sm_dist.container.hang_watch`) reads them, and on a hang prints HANG_PREFIX lines (a rank
stuck outside a collective, named with its line) or HANG_WAITING_PREFIX lines (every rank of the host
waits in a collective: the one that stopped is elsewhere) and, when it stops the job, starts
`output/failure` with FAILURE_PREFIX (or FAILURE_WAITING_PREFIX). Local mode reads those (the summary's
warning and error) and rehearses a hang with chaos `hang:STEP`: CHAOS_HANG_SIGNAL to one rank whose
process was started with CHAOS_HANG_ENV=1, whose handler then never returns.
"""

from __future__ import annotations

from pathlib import Path

#: PID 1's per-host state folder's sub-folder holding each rank's files.
RANKS_DIR = "ranks"
RECORD_SUFFIX = ".json"
PROGRESS_SUFFIX = ".progress"
STACKS_SUFFIX = ".stacks"
#: The signal on which a rank's faulthandler dumps every thread's stack (a name: Linux only).
DUMP_SIGNAL = "SIGUSR1"
#: Set to "1" in a rank's environment by local mode when chaos `hang:STEP` may pick it.
CHAOS_HANG_ENV = "SM_DIST_CHAOS_HANG"
#: What chaos `hang:STEP` sends to the rank it picks: its handler sleeps for ever (a rank that stopped).
CHAOS_HANG_SIGNAL = "SIGUSR2"
#: A rank stuck outside any collective, named with its line: the hang's cause, as far as a host can tell.
HANG_PREFIX = "[sm_dist] hang: "
#: Every rank of a host waits in a collective: the rank that stopped is on another host.
HANG_WAITING_PREFIX = "[sm_dist] hang (waiting): "
#: How `output/failure` starts when PID 1 stopped the job on a hang: naming a stuck rank, or
#: (on a host whose ranks all waited in a collective) not.
FAILURE_PREFIX = "hang: "
FAILURE_WAITING_PREFIX = "hang (waiting): "


def rank_paths(state: str | Path, local_rank: str) -> tuple[Path, Path, Path]:
    """(record, progress, stacks) of one local rank in PID 1's state folder."""
    folder = Path(state) / RANKS_DIR
    return (folder / f"{local_rank}{RECORD_SUFFIX}", folder / f"{local_rank}{PROGRESS_SUFFIX}",
            folder / f"{local_rank}{STACKS_SUFFIX}")


def hang_text(line: str) -> tuple[str, bool] | None:
    """(the hang's text, whether it names a stuck rank) of a hang line, wherever it stands in `line`; else None."""
    for prefix, stuck in ((HANG_PREFIX, True), (HANG_WAITING_PREFIX, False)):
        at = line.find(prefix)
        if at >= 0:
            return line[at + len(prefix):].strip(), stuck
    return None


__all__ = [
    "CHAOS_HANG_ENV",
    "CHAOS_HANG_SIGNAL",
    "DUMP_SIGNAL",
    "FAILURE_PREFIX",
    "FAILURE_WAITING_PREFIX",
    "HANG_PREFIX",
    "HANG_WAITING_PREFIX",
    "PROGRESS_SUFFIX",
    "RANKS_DIR",
    "RECORD_SUFFIX",
    "STACKS_SUFFIX",
    "hang_text",
    "rank_paths",
]
