"""The real error of a failed job, read from the hosts' logs.

torchrun ends a failed run with its own lines (`traceback : To enable traceback see: ...`,
`ChildFailedError`, `RendezvousClosedError` on the other hosts), which say nothing about the
cause. The cause is in the worker's stderr, which the host log holds: the last line of the
worker's traceback (`ValueError: boom`), or an argparse usage error (`train.py: error: ...`).
torchrun's "Root Cause" block names the failing rank. Errors that other ranks raise *because*
a peer died (gloo's closed connections, rendezvous shutdown) rank below a script's own error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: torchrun (since 2.2) may prefix a worker's lines with "[rankN]:" or "[default0]:".
_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s?)")
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure))(?::\s*(?P<msg>.*))?$")
_ARGPARSE = re.compile(r"^(?P<prog>\S+\.py|\S+): error: (?P<msg>.+)$")
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
#: Exceptions torchrun itself raises, or that a rank raises because a peer went away.
_CONSEQUENCES = ("ChildFailedError", "RendezvousClosedError", "RendezvousError", "DistNetworkError",
                 "SignalException", "DistStoreError", "RendezvousTimeoutError", "KeyboardInterrupt")
_PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "recvBytes", "sendBytes",
              "Socket Timeout", "Timed out waiting", "connection refused")


@dataclass(frozen=True, kw_only=True)
class WorkerError:
    """One error line found in a host's log."""

    host: str
    text: str  # "ValueError: boom at step 3"
    rank: str | None = None
    collateral: bool = False  # raised because another process died

    def line(self) -> str:
        where = f"{self.host}, rank {self.rank}" if self.rank is not None else self.host
        return f"{self.text}  ({where})"


def _clean(lines: Iterable[str]) -> list[str]:
    return [_PREFIX.sub("", line.rstrip()) for line in lines]


def errors_in(host: str, lines: Iterable[str]) -> list[WorkerError]:
    """The errors of one host's log, in order: each traceback's exception line, argparse errors."""
    found: list[WorkerError] = []
    in_traceback = False
    rank = None
    for line in _clean(lines):
        root = _ROOT_RANK.match(line)
        if root:
            rank = root.group(1)
        if line.startswith(_TRACEBACK):
            in_traceback = True
            continue
        if in_traceback and line and not line.startswith((" ", "\t")):
            match = _EXCEPTION.match(line)
            if match:
                found.append(_error(host, match.group("type"), match.group("msg") or ""))
                in_traceback = False
            continue
        usage = _ARGPARSE.match(line)
        if usage and not in_traceback:
            found.append(WorkerError(host=host, text=f"{usage.group('prog')}: error: {usage.group('msg')}"))
    if rank is not None:
        found = [WorkerError(host=e.host, text=e.text, rank=rank, collateral=e.collateral) for e in found]
    return found


def _error(host: str, kind: str, message: str) -> WorkerError:
    short = kind.rsplit(".", 1)[-1]
    collateral = short in _CONSEQUENCES or any(p.lower() in message.lower() for p in _PEER_GONE)
    text = f"{short}: {message}" if message else short
    return WorkerError(host=host, text=text, collateral=collateral)


def real_error(logs: dict[str, Path]) -> WorkerError | None:
    """The error most likely to be the cause: the last non-collateral one (hosts in order; a log
    holds every attempt, the last is the one that failed the job), else the last collateral one;
    None when the logs hold no error line."""
    every: list[WorkerError] = []
    for host, path in logs.items():
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        every.extend(errors_in(host, text.replace("\r", "\n").splitlines()))
    own = [e for e in every if not e.collateral]
    chosen = own or every
    return chosen[-1] if chosen else None
