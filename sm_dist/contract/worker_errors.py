"""What a worker's error looks like in torchrun's output: the contract between the container's
PID 1 (which writes output/failure and decides whether a restart can help) and local mode's
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
from dataclasses import dataclass, replace

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
#: Of those, the ones torchrun itself raises (its traceback ends the host's output after a stop).
_TORCHRUN_OWN = ("ChildFailedError", "SignalException", "RendezvousClosedError", "RendezvousError",
                 "RendezvousConnectionError", "RendezvousStateError", "RendezvousTimeoutError")
_PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "recvBytes", "sendBytes",
              "Socket Timeout", "Timed out waiting", "connection refused")


@dataclass(frozen=True, kw_only=True)
class WorkerError:
    """One error line found in a host's log."""

    host: str
    text: str  # "ValueError: boom at step 3"
    rank: str | None = None
    collateral: bool = False  # raised because another process died
    at: str | None = None
    """The innermost frame in the user's code: "train.py:22 in check_batch" (None: no traceback, or none of its
    frames is the user's)."""
    source: str | None = None
    """That frame's line of code, as the traceback printed it."""
    trace: tuple[str, ...] = ()
    """The traceback as printed (rank prefix, carets and site-packages folders left out), ending with `text`."""
    hint: str | None = None
    """What to do about a known cause (`hint_for`), one line."""

    @property
    def kind(self) -> str:
        """The exception's type ("ValueError"), or the text before its first colon."""
        return self.text.split(":", 1)[0]

    @property
    def torchruns(self) -> bool:
        """torchrun's own exception (ChildFailedError, SignalException, a rendezvous error): never a worker's."""
        return self.kind in _TORCHRUN_OWN

    @property
    def message(self) -> str:
        return self.text.split(": ", 1)[1] if ": " in self.text else ""

    def line(self) -> str:
        """One line: the error, where in the user's code, then host and rank."""
        where = f"{self.host}, rank {self.rank}" if self.rank is not None else self.host
        hint = f"  {self.hint}" if self.hint else ""
        return f"{self.text}  {'at ' + self.at + '  ' if self.at else ''}({where}){hint}"

    def to_dict(self) -> dict[str, object]:
        """The fields a program reads (the summary's JSON `error_detail`)."""
        file, _, rest = (self.at or "").partition(":")
        line, _, function = rest.partition(" in ")
        return {"type": self.kind, "message": self.message, "file": file or None,
                "line": int(line) if line.isdigit() else None, "function": function or None, "code": self.source,
                "host": self.host, "rank": int(self.rank) if self.rank is not None and self.rank.isdigit() else None,
                "text": self.text, "hint": self.hint}


#: The line the in-job restore prints when the hosts' files outside the synced checkpoint folder differ:
#: a split resume, which shows later as a hang or a rendezvous error (read as the cause, not collateral).
SPLIT_RESUME_PREFIX = "[sm_dist worker] split resume: "

#: Errors no restart can fix: the script cannot start (a bad flag, a missing module, a syntax error).
_CANNOT_RECOVER = ("SyntaxError", "IndentationError", "TabError", "ImportError", "ModuleNotFoundError")


def cannot_recover(error: WorkerError) -> bool:
    """Whether restarting the workers would only fail again the same way (a split resume too: the
    files outside the synced folder that split the hosts are still there after a restart)."""
    return error.text.startswith((*_CANNOT_RECOVER, "split resume: ")) or ": error: " in error.text


#: The checkpoint folder's container path (CheckpointConfig.LocalPath's default); local mode's host
#: folders end the same (`contract.container.remap`).
_CHECKPOINTS = "/opt/ml/checkpoints"
_NOT_EMPTY = re.compile(r"Directory not empty: '(?P<path>[^']+)'")
#: A rotation deleting an old checkpoint folder while SageMaker's uploader writes its markers in it
#: (docs/PLATFORM.md §1.4, the markers' hazard).
MARKERS_HINT = ("hint: SageMaker's checkpoint upload writes <file>.sagemaker-uploaded markers into the checkpoint "
                "folder, so deleting an old checkpoint there (Accelerate's ProjectConfiguration(total_limit=...), "
                "a script's own rotation) can meet a folder that is not empty: keep rotation off in the checkpoint "
                "folder, or save and rotate elsewhere and copy the newest checkpoint in")


def hint_for(error: WorkerError, checkpoint_dir: str | None = None) -> str | None:
    """A one-line hint for a cause sm_dist knows: an `OSError: ... Directory not empty: 'P'` with P
    under the checkpoint folder (`checkpoint_dir`, else any path through /opt/ml/checkpoints)."""
    found = _NOT_EMPTY.search(error.message) if error.kind.endswith("OSError") else None
    if found is None:
        return None
    path = found.group("path").rstrip("/") + "/"
    folders = [checkpoint_dir.rstrip("/") + "/"] if checkpoint_dir else []
    if any(path.startswith(f) for f in folders) or f"{_CHECKPOINTS}/" in path:
        return MARKERS_HINT
    return None


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
_FILE_LINE = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?')
#: Where the code channel is unpacked (SageMaker's /opt/ml/input/data/code; local mode's host folder ends the same).
_CODE_DIR = "/input/data/code/"
#: Folders that hold installed packages and the standard library: frames there are not the user's code.
_NOT_USER = re.compile(r"/(?:site|dist)-packages/|/lib/python\d\.\d+/|^<")


class _Traceback:
    """One traceback being read: its lines and its frames (file, line, function, code)."""

    def __init__(self) -> None:
        self.lines: list[str] = [_TRACEBACK]
        self.frames: list[list[str]] = []
        self.users: list[bool] = []  # per frame: the user's code (judged on the full path)

    def add(self, line: str) -> None:
        frame = _FILE_LINE.match(line)
        if frame:
            shown = _shown_path(frame.group("file"))
            self.frames.append([shown, frame.group("line"), frame.group("func") or "", ""])
            self.users.append(users_frame(frame.group("file")))  # installed packages' frames are not
            self.lines.append(f'  File "{shown}", line {frame.group("line")}' +
                              (f", in {frame.group('func')}" if frame.group("func") else ""))
        elif set(line.strip()) <= set("^~ "):  # Python 3.11's carets under the failing expression
            return
        else:
            if self.frames and not self.frames[-1][3]:
                self.frames[-1][3] = line.strip()
            self.lines.append(line)

    def error(self, found: WorkerError) -> WorkerError:
        """`found` with where it happened in the user's code and the traceback."""
        mine = [f for f, users in zip(self.frames, self.users, strict=True) if users]
        at = source = None
        if mine:
            file, number, function, code = mine[-1]
            at, source = f"{file}:{number}" + (f" in {function}" if function else ""), code or None
        return replace(found, at=at, source=source, trace=(*self.lines, found.text))


def _shown_path(path: str) -> str:
    """A frame's file as the user knows it: relative to the code folder, or to site-packages."""
    if _CODE_DIR in path:
        return path.split(_CODE_DIR, 1)[1]
    for folder in ("/site-packages/", "/dist-packages/"):
        if folder in path:
            return path.split(folder, 1)[1]
    return path


def users_frame(path: str) -> bool:
    """Whether a traceback frame's file is the user's code (see `_is_users`); an installed package's
    file is not, though it is shown relative to site-packages (`accelerate/accelerator.py`)."""
    if _CODE_DIR not in path and _NOT_USER.search(path):
        return False
    return _is_users(_shown_path(path))


def torchruns_own(line: str) -> bool:
    """Whether an output line is the exception line of one of torchrun's own exceptions."""
    return line.split(":", 1)[0].rsplit(".", 1)[-1] in _TORCHRUN_OWN


def _is_users(shown: str) -> bool:
    """A frame in the user's code: the code channel, or a file outside installed packages and the
    standard library (sm_dist's own modules, bundled in the code channel, are not)."""
    if shown.startswith(("sm_dist/", "torch/", "<")):
        return False
    return not _NOT_USER.search(shown)


def errors_in(host: str, lines: Iterable[str], checkpoint_dir: str | None = None) -> list[WorkerError]:
    """The errors of one host's log, in order: each traceback's exception line (with the innermost
    frame in the user's code, and `hint_for` it: `checkpoint_dir` is the host's checkpoint folder),
    a syntax error in the script, argparse errors. Several ranks' lines may interleave: each
    `[rankN]:` prefix has its own traceback."""
    found: list[WorkerError] = []
    open_traces: dict[str | None, _Traceback] = {}
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
            open_traces[prefix_rank] = _Traceback()
            continue
        trace = open_traces.get(prefix_rank)
        if trace is not None and line and not line.startswith((" ", "\t")):
            match = _EXCEPTION.match(line)
            if match:
                error = trace.error(_error(host, match.group("type"), _message(match, where), prefix_rank))
                found.append(replace(error, hint=hint_for(error, checkpoint_dir)))
                del open_traces[prefix_rank]
            continue
        if trace is not None:
            trace.add(line)
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
        if usage and not open_traces:
            found.append(WorkerError(host=host, text=f"{usage.group('prog')}: error: {usage.group('msg')}",
                                     rank=prefix_rank))
    if rank is not None:
        found = [replace(e, rank=rank) for e in found]
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
    from), else the last one a peer's death did not cause, else the last one a worker raised (a peer
    gone), else the last one (torchrun's own); None when there is none."""
    every = list(errors)
    split = [e for e in every if e.text.startswith("split resume: ")]
    if split:
        return split[-1]
    own = [e for e in every if not e.collateral]
    workers = [e for e in every if e.kind not in _TORCHRUN_OWN]  # torchrun's own never stands in for a worker's
    chosen = own or workers or every
    return chosen[-1] if chosen else None
