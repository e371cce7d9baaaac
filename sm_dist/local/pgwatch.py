"""What local mode can tell of a job's process groups: the workers' world size and who trained alone.

Two kinds of evidence, neither a guess from timing:
- torchrun gives every worker `WORLD_SIZE`, seen in /proc while it runs; it must be the plan's
  process count;
- a rank whose script finished says so when it trained alone (`[sm_dist] rank R trained alone:
  ...`, printed by `sm_dist.runtime.run_script` from what its process groups did: none joined, one
  smaller than WORLD_SIZE, or no collective run). A script that crashed, or ran its collectives
  in groups torch does not let it read, says nothing: no warning is better than a wrong one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sm_dist.local.procs import ProcInfo


@dataclass
class GroupWatch:
    """The world sizes the workers got, and the ranks that said they trained alone (by host)."""

    expected_world_size: int | None = None
    world_sizes: set[str] = field(default_factory=set)
    alone: dict[tuple[str, int], str] = field(default_factory=dict)

    def sample(self, host: str, worker: ProcInfo) -> None:
        """Look at one live worker's environment."""
        self.world_sizes.add(worker.env.get("WORLD_SIZE", "?"))

    def trained_alone(self, host: str, rank: int, why: str) -> None:
        """A rank's `trained alone` line (its latest one counts)."""
        self.alone[(host, rank)] = why

    def warnings(self) -> list[str]:
        """What the job may not have proven; empty when nothing looked wrong (or nothing was seen)."""
        out = []
        expected = str(self.expected_world_size) if self.expected_world_size else None
        other = sorted(w for w in self.world_sizes if expected and w != expected)
        if other:
            out.append(f"workers got WORLD_SIZE={','.join(other)}, the plan has {expected} processes")
        if self.alone:
            ranks = sorted(self.alone, key=lambda key: key[1])
            whys = sorted(set(self.alone.values()))
            out.append(f"{', '.join(f'rank {rank} on {host}' for host, rank in ranks)} trained alone "
                       f"({'; '.join(whys)}): this run does not prove distributed training")
        return out
