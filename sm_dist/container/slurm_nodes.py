"""Slurm's compressed host lists and per-node task counts (standard library only).

`expand("gpu[01-03,7],login1")` -> ["gpu01", "gpu02", "gpu03", "gpu7", "login1"], the same
hosts `scontrol show hostnames` prints, so the runtime can pick the first one as the
rendezvous address without calling scontrol (which is not on every compute node's PATH).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sm_dist.errors import RuntimeEnvError

_BRACKET = re.compile(r"\[([^\]]*)\]")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside [...]."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _range(item: str, nodelist: str) -> list[str]:
    lo, sep, hi = item.partition("-")
    if not lo.isdigit() or (sep and not hi.isdigit()):
        raise RuntimeEnvError(f"SLURM_JOB_NODELIST={nodelist!r}: cannot read range {item!r}")
    if not sep:
        return [lo]
    width = len(lo)
    return [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]


def _expand_one(pattern: str, nodelist: str) -> list[str]:
    match = _BRACKET.search(pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end():]
    out = []
    for item in match.group(1).split(","):
        for number in _range(item.strip(), nodelist):
            out.extend(_expand_one(head + number + tail, nodelist))
    return out


def expand(nodelist: str) -> list[str]:
    """Expand a Slurm host list expression, keeping Slurm's order."""
    if nodelist.count("[") != nodelist.count("]"):
        raise RuntimeEnvError(f"SLURM_JOB_NODELIST={nodelist!r}: unbalanced brackets")
    hosts: list[str] = []
    for part in _split_top(nodelist.replace(" ", ",")):
        hosts.extend(_expand_one(part, nodelist))
    return hosts


def tasks_on_node(env: Mapping[str, str], world_size: int, num_nodes: int) -> int:
    """Tasks on this node: SLURM_NTASKS_PER_NODE ("4" or "4(x2),3"), else an even split."""
    raw = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    counts: list[int] = []
    for part in filter(None, raw.split(",")):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if match is None:
            raise RuntimeEnvError(f"SLURM_TASKS_PER_NODE={raw!r}: cannot read {part!r}")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    if counts:
        node = int(env.get("SLURM_NODEID") or 0)
        return counts[node] if node < len(counts) else counts[-1]
    if world_size > 1 and num_nodes > 1 and world_size % num_nodes:
        raise RuntimeEnvError(
            f"SLURM_NTASKS={world_size} over {num_nodes} nodes is uneven and SLURM_TASKS_PER_NODE "
            "is not set: pass --ntasks-per-node to sbatch/srun"
        )
    return max(1, world_size // max(num_nodes, 1))
