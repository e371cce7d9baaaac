"""The ranks' Python stacks on a hang: dumped, read, and which rank stopped (standard library only: PID 1).

Each rank armed `faulthandler` on SIGUSR1 (`sm_dist.runtime.liveness`); `dump` sends it and reads what
every rank wrote: every thread's stack, most recent call first, in faulthandler's format

    Thread 0x00007f0e8a7fc640 (most recent call first):
      File "/usr/lib/python3.12/threading.py", line 320 in wait
    Current thread 0x00007f0e8f3f4740 (most recent call first):
      File "/opt/ml/code/train.py", line 41 in train_step

`Stack.waiting` is the heuristic that names the rank that stopped, kept simple: when one rank stops
(a data loader that never returns, a `time.sleep`, a branch only it takes), the others block in the
next collective. A rank whose main thread's innermost frame outside the standard library is in
torch.distributed, torch.autograd (a backward waits there for DDP's all-reduce) or
torch.nn.parallel waits in a collective; any other rank is the one that stopped, named with that frame.
Every rank waiting means the rank that stopped is on another host (or the ranks disagree on the
collective itself).
"""

from __future__ import annotations

import os
import re
import signal
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from sm_dist.contract import hang

#: How long the ranks get to write their stacks (faulthandler writes from the signal handler itself).
DUMP_WAIT_S = 5.0
_POLL_S = 0.05
#: Where a rank that waits for its peers sits: torch's collectives, and a backward waiting for DDP's all-reduce.
WAITING_PARTS = ("/torch/distributed/", "/torch/autograd/", "/torch/nn/parallel/")
#: sm_dist's own frame under chaos `hang:STEP`: the rank stopped where this handler interrupted it.
_CHAOS_FRAME = "/sm_dist/runtime/liveness.py"
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)\b.*\(most recent call first\):")
_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<func>.*)$')
_STDLIB = tuple({os.path.realpath(sysconfig.get_paths()[key]) + os.sep for key in ("stdlib", "platstdlib")})


@dataclass(frozen=True)
class Frame:
    """One line of a stack."""

    file: str
    line: int
    func: str

    def short(self) -> str:
        return f"{os.path.basename(self.file)}, line {self.line}, in {self.func}"

    @property
    def stdlib(self) -> bool:
        path = os.path.realpath(self.file)
        return self.file.startswith("<frozen ") or (path.startswith(_STDLIB) and "-packages" not in path)


@dataclass(frozen=True)
class Rank:
    """A live rank of this host, as its record in the state folder says."""

    local_rank: str
    rank: str
    pid: int
    thread: int
    stacks: Path


@dataclass(frozen=True)
class Stack:
    """What a rank's dump says: its main thread's frames (innermost first) and the whole dump."""

    rank: Rank
    frames: tuple[Frame, ...]
    text: str

    @property
    def waiting(self) -> bool:
        """Whether the rank waits in a collective (see the module's heuristic); False without frames."""
        own = [f for f in self.frames if not f.stdlib]
        return bool(own) and any(part in own[0].file for part in WAITING_PARTS)

    @property
    def where(self) -> Frame | None:
        """The frame to name: the innermost outside the standard library and sm_dist's chaos handler."""
        own = [f for f in self.frames if not f.stdlib and _CHAOS_FRAME not in f.file]
        return own[0] if own else (self.frames[0] if self.frames else None)

    @property
    def chaos(self) -> bool:
        """Whether the rank was stopped by local mode's chaos `hang:STEP` (sm_dist's handler is its innermost frame)."""
        return bool(self.frames) and _CHAOS_FRAME in self.frames[0].file

    def excerpt(self, frames: int = 4) -> str:
        """The innermost frames, compact: `train.py, line 41, in step < train.py, line 80, in main`."""
        return " < ".join(f.short() for f in self.frames[:frames]) or "no Python frame"


def parse_dump(text: str, thread: int | None) -> tuple[Frame, ...]:
    """The frames of `thread` (the main thread's id) in a faulthandler dump, innermost first; that of the
    thread the signal landed in ("Current thread") when `thread` is not there."""
    blocks: dict[int, list[Frame]] = {}
    current: int | None = None
    block: list[Frame] | None = None
    for line in text.splitlines():
        head = _THREAD.match(line)
        if head:
            ident = int(head.group(2), 16)
            block = blocks.setdefault(ident, [])
            if head.group(1) == "Current thread":
                current = ident
            continue
        frame = _FRAME.match(line)
        if frame and block is not None:
            block.append(Frame(frame.group("file"), int(frame.group("line")), frame.group("func")))
    chosen = thread if thread in blocks else current
    return tuple(blocks.get(chosen, [])) if chosen is not None else ()


def dump(ranks: list[Rank], wait_s: float = DUMP_WAIT_S) -> list[Stack]:
    """Ask every rank for its stacks and read them (a rank that wrote nothing in `wait_s` has none)."""
    sent = []
    for rank in ranks:
        try:
            rank.stacks.write_text("", encoding="utf-8")  # the rank appends: only this dump is read
            os.kill(rank.pid, signal.Signals[hang.DUMP_SIGNAL])
            sent.append(rank)
        except OSError:
            continue
    texts: dict[int, str] = {}  # a rank's dump, once it stopped growing
    seen: dict[int, str] = {}
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and len(texts) < len(sent):
        time.sleep(_POLL_S)
        for rank in sent:
            text = _read(rank.stacks)
            if text and text == seen.get(rank.pid):  # unchanged for one poll: written
                texts[rank.pid] = text
            seen[rank.pid] = text
    out = []
    for rank in ranks:
        text = texts.get(rank.pid) or _read(rank.stacks)
        out.append(Stack(rank, parse_dump(text, rank.thread), text))
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


__all__ = ["DUMP_WAIT_S", "WAITING_PARTS", "Frame", "Rank", "Stack", "dump", "parse_dump"]
