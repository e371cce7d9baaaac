"""What a worker's error looks like in torchrun's output: the contract between the container's
launcher (which writes output/failure and decides whether a restart can help) and local mode's
summary (which reads the hosts' logs).

torchrun ends a failed run with its own lines (`traceback : To enable traceback see: ...`,
`ChildFailedError`, `RendezvousClosedError` on the other hosts), which say nothing about the
cause. The cause is in the worker's stderr: the last line of the worker's traceback
(`ValueError: boom`), or an argparse usage error (`train.py: error: ...`). torchrun's "Root
Cause" block, or its `[rankN]:` line prefix, names the failing rank. Errors that other ranks raise
*because* a peer died (gloo's closed connections, rendezvous shutdown) rank below a script's own.
Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: torchrun (since 2.2) may prefix a worker's lines with "[rankN]:" or "[default0]:".
_PREFIX = re.compile(r"^(?:\[(?:rank|default)(?P<rank>\d+)\]:\s?)")
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure))(?::\s*(?P<msg>.*))?$")
_ARGPARSE = re.compile(r"^(?P<prog>\S+\.py|\S+): error: (?P<msg>.+)$")
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
#: Exceptions torchrun itself raises, or that a rank raises because a peer went away.
_CONSEQUENCES = ("ChildFailedError", "RendezvousClosedError", "RendezvousError", "RendezvousConnectionError",
                 "RendezvousStateError", "DistNetworkError",
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


#: The line the in-job restore prints when the hosts' files outside the synced checkpoint folder differ:
#: a split resume, which shows later as a hang or a rendezvous error (read as the cause, not collateral).
SPLIT_RESUME_PREFIX = "[sm_dist worker] split resume: "

#: Errors no restart can fix: the script cannot start (a bad flag, a missing module, a syntax error).
_CANNOT_RECOVER = ("SyntaxError", "IndentationError", "TabError", "ImportError", "ModuleNotFoundError")


def cannot_recover(error: WorkerError) -> bool:
    """Whether restarting the workers would only fail again the same way (a split resume too: the
    files outside the synced folder that split the hosts are still there after a restart)."""
    return error.text.startswith((*_CANNOT_RECOVER, "split resume: ")) or ": error: " in error.text


def _clean(lines: Iterable[str]) -> list[tuple[str, str | None]]:
    """Each line without torchrun's `[rankN]:` prefix, with the rank that prefix named."""
    out = []
    for line in lines:
        match = _PREFIX.match(line)
        out.append((line[match.end():].rstrip() if match else line.rstrip(), match.group("rank") if match else None))
    return out


#: Python prints an error compiling the script itself (`python SCRIPT`) without a "Traceback" header:
#: `  File "train.py", line 3`, the line, a caret, then the error.
_COMPILE_ERRORS = ("SyntaxError", "IndentationError", "TabError")
_FILE_LINE = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+)')


def errors_in(host: str, lines: Iterable[str]) -> list[WorkerError]:
    """The errors of one host's log, in order: each traceback's exception line, a syntax error in
    the script, argparse errors."""
    found: list[WorkerError] = []
    in_traceback = False
    rank = None
    since_file_line: int | None = None  # lines since the last `  File "...", line N`
    where = ""  # that line's file and line number, for a compile error
    for line, prefix_rank in _clean(lines):
        file_line = _FILE_LINE.match(line)
        if file_line:
            where = f"{file_line.group('file').rsplit('/', 1)[-1]}, line {file_line.group('line')}"
        since_file_line = 0 if file_line else None if since_file_line is None else since_file_line + 1
        root = _ROOT_RANK.match(line)
        if root:
            rank = root.group(1)
        if line.startswith(_TRACEBACK):
            in_traceback = True
            continue
        if in_traceback and line and not line.startswith((" ", "\t")):
            match = _EXCEPTION.match(line)
            if match:
                found.append(_error(host, match.group("type"), _message(match, where), prefix_rank))
                in_traceback = False
            continue
        compiled = _EXCEPTION.match(line) if since_file_line is not None and since_file_line <= 3 else None
        if compiled and compiled.group("type").startswith(_COMPILE_ERRORS):
            found.append(_error(host, compiled.group("type"), _message(compiled, where), prefix_rank))
            since_file_line = None
            continue
        if line.startswith(SPLIT_RESUME_PREFIX):
            found.append(WorkerError(host=host, text="split resume: " + line[len(SPLIT_RESUME_PREFIX):],
                                     rank=prefix_rank))
            continue
        usage = _ARGPARSE.match(line)
        if usage and not in_traceback:
            found.append(WorkerError(host=host, text=f"{usage.group('prog')}: error: {usage.group('msg')}",
                                     rank=prefix_rank))
    if rank is not None:
        found = [WorkerError(host=e.host, text=e.text, rank=rank, collateral=e.collateral) for e in found]
    return found


def _message(match: re.Match[str], where: str) -> str:
    """The exception's message; a compile error's gets its file and line (its message has neither)."""
    message = match.group("msg") or ""
    if match.group("type").startswith(_COMPILE_ERRORS) and where and "line" not in message:
        return f"{message} ({where})"
    return message


def _error(host: str, kind: str, message: str, rank: str | None = None) -> WorkerError:
    short = kind.rsplit(".", 1)[-1]
    collateral = short in _CONSEQUENCES or any(p.lower() in message.lower() for p in _PEER_GONE)
    text = f"{short}: {message}" if message else short
    return WorkerError(host=host, text=text, rank=rank, collateral=collateral)


def cause(errors: Iterable[WorkerError]) -> WorkerError | None:
    """The error most likely to be the cause: a split resume (what the errors after it follow
    from), else the last one a peer's death did not cause, else the last one; None when there is none."""
    every = list(errors)
    split = [e for e in every if e.text.startswith("split resume: ")]
    if split:
        return split[-1]
    own = [e for e in every if not e.collateral]
    chosen = own or every
    return chosen[-1] if chosen else None
