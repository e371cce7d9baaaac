"""Every rank's Python stack, now: `python3 -m sm_dist.container.stacks_now [--host NAME=TMPDIR ...] [--log]`.

The hang watch dumps the stacks on a hang by itself (`hang_watch`); this dumps them on request, on a job
that runs, with the same dump (`stacks.dump`: SIGUSR1 to each rank, which writes through faulthandler)
and the same heuristic (`Stack.waiting`: a rank whose innermost own frame is in torch's collectives
waits for its peers; any other rank is one that stopped). Each host's PID 1 keeps its ranks' records
in its state folder, `<TMPDIR>/sm-dist-worker-*` (`pid1`): `--host` names each host's TMPDIR (local
mode gives every emulated host its own); without it, this host's (`$SM_CURRENT_HOST`, the temp dir).
`--log` also writes the report to PID 1's stderr, which is the host's log stream in the cloud
(docs/PLATFORM.md §1.16). `--slurm-job ID`, run on a Slurm node (`sm_dist.slurm.debug`): only that job's ranks
on this node (`$SLURMD_NODENAME`), named by it: a node may hold other jobs' ranks in the same temp dir.
Exit 0 when some rank answered, 1 when no live rank was found.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path

from sm_dist.container import stacks as stacks_mod
from sm_dist.container.hang_watch import read_ranks
from sm_dist.container.stacks import Rank, Stack

#: PID 1's state folders under a host's TMPDIR (`pid1`'s mkdtemp prefix).
STATE_GLOB = "sm-dist-worker-*"
#: Frames shown per rank, innermost first.
FRAMES_SHOWN = 6


def host_ranks(tmp: Path) -> list[Rank]:
    """The live ranks of the host whose TMPDIR is `tmp` (every state folder: a round restarted keeps one)."""
    return [rank for state in sorted(tmp.glob(STATE_GLOB)) for rank in read_ranks(state)]


def report(stacks: dict[str, list[Stack]]) -> str:
    """Per host, per rank: waiting or stopped, where, and the innermost frames."""
    lines: list[str] = []
    every = [s for found in stacks.values() for s in found]
    for host, found in stacks.items():
        lines.append(f"{host}: {len(found)} rank(s)" if found else f"{host}: no live rank")
        for stack in sorted(found, key=lambda s: int(s.rank.rank) if s.rank.rank.isdigit() else -1):
            where = stack.where
            state = ("no stack written" if not stack.frames else "waiting in a collective" if stack.waiting
                     else "STOPPED here (not in a collective)")
            lines.append(f"  rank {stack.rank.rank} (local {stack.rank.local_rank}, pid {stack.rank.pid}): {state}"
                         + (f" at {where.short()}" if where else ""))
            lines += [f"      {frame.short()}" for frame in stack.frames[:FRAMES_SHOWN]]
    answered = [s for s in every if s.frames]
    if answered and all(s.waiting for s in answered):
        lines.append("every rank waits in a collective: the rank that stopped is not among these (another host?), "
                     "or the ranks disagree on the collective")
    return "\n".join(lines)


def _hosts(argv: list[str]) -> dict[str, Path]:
    named = [a.split("=", 1) for a in argv if "=" in a]
    if named:
        return {name: Path(tmp) for name, tmp in named}
    return {os.environ.get("SM_CURRENT_HOST") or socket.gethostname(): Path(tempfile.gettempdir())}


def _slurm_ranks(job_id: str) -> dict[str, list[Rank]]:
    from sm_dist.container.slurm_host import workers

    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    ours = set(workers(job_id, node))
    return {node: [r for r in host_ranks(Path(tempfile.gettempdir())) if r.pid in ours]}


def main(argv: list[str]) -> int:
    log = "--log" in argv
    if "--slurm-job" in argv and argv.index("--slurm-job") + 1 < len(argv):
        ranks = _slurm_ranks(argv[argv.index("--slurm-job") + 1])
    else:
        hosts = _hosts([a for a in argv if a not in ("--log", "--host")])
        ranks = {host: host_ranks(tmp) for host, tmp in hosts.items()}
    dumped = stacks_mod.dump([r for found in ranks.values() for r in found])
    by_pid = {s.rank.pid: s for s in dumped}
    text = report({host: [by_pid[r.pid] for r in found] for host, found in ranks.items()})
    print(text, flush=True)
    if log:
        try:
            with open("/proc/1/fd/2", "a", encoding="utf-8") as pid1:
                pid1.write("[sm_dist] stacks on request:\n" + text + "\n")
        except OSError as exc:
            print(f"[sm_dist] cannot write to PID 1's log: {exc}", file=sys.stderr)
    return 0 if dumped else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
