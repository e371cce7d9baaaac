"""torchrun's own tracebacks after a stop signal, left out of the host's log (standard library only).

torchrun turns SIGTERM into a `SignalException` raised in its main thread: it shuts its workers
down, then the exception ends torchrun with a ~60-line traceback of its own frames
(docs/PLATFORM.md §2.6). Raised inside a logging call instead, the logging module prints it as a
`--- Logging error ---` block and goes on (`sm_dist.container.end_watch` sends the signal again).
Either is the first thing a user sees at the end of the log of a job that succeeded, or printed
after the script's own error, and says nothing about the job: PID 1 stopped torchrun on
purpose, or passed on SageMaker's stop. Once PID 1 has sent torchrun a signal, `StopNoise`
holds each block that begins like one and drops it when it ends in `SignalException`, a chain of
tracebacks whole when one of its blocks does (the signal landing while torchrun handled another
error: "During handling of the above exception ..."); any other block (a worker's traceback before
its `[rankN]:` prefix exists) is written unchanged, in order, once the line after it shows no chain.

torchrun's other threads (the rendezvous keep-alive) log while its main thread prints the traceback, to the
same stream: a whole record line lands inside the block, or one lands in the middle of the exception line
(`torch.distributed.elastic.multiprocessing.api.` + `W1129 02:33:41.508000 23391 ...:1346] ...` on one
line, `SignalException: ...` on the next). A record inside a held block is held with it, and the text
before it is the start of the line that follows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TRACEBACK = "Traceback (most recent call last):"
#: logging.Handler.handleError's block: the header, the traceback, "Call stack:", then the record.
_LOGGING_ERROR = "--- Logging error ---"
_LOGGING_END = ("Arguments: ", "Use the traceback above to help find the error.")
_SIGNAL = "SignalException"
#: The lines between two tracebacks of one chain.
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
#: A log record of torch's (glog's layout: level and date, time, pid, file:line]) and the text before it.
_RECORD = re.compile(r"(?P<before>.*?)(?P<record>[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] .*)")
#: A block longer than this is written as it is (a block is ~60 lines; a chained one twice that).
MAX_HELD = 400


class StopNoise:
    """Feed it output lines (without their newline); it returns the lines to write."""

    def __init__(self) -> None:
        self._held: list[str] = []
        self._kind: str | None = None  # "traceback" | "after" (a block ended: a chain may go on) | "logging"
        self._signal = False  # a block of the held chain ended in SignalException
        self._split = ""  # the start of a line another thread's record cut in two

    def feed(self, line: str) -> list[str]:
        if self._kind is None:
            if line.rstrip() in (_TRACEBACK, _LOGGING_ERROR):
                self._kind = "logging" if line.rstrip() == _LOGGING_ERROR else "traceback"
                self._held = [line]
                return []
            return [line]
        if self._kind == "after":  # Python prints a chain oldest first: the signal may be any block's
            if not line.strip() or line.startswith(_CHAINED) or line.rstrip() == _TRACEBACK:
                self._held.append(line)
                self._kind = "traceback" if line.rstrip() == _TRACEBACK else "after"
                return []
            return self._end(drop=self._signal) + self.feed(line)
        self._held.append(line)
        if self._kind == "traceback":
            record = _RECORD.fullmatch(line)
            if record:  # another thread's log line inside the traceback: held with it
                self._split += record["before"]
                return []
            line, self._split = self._split + line, ""
        if self._kind == "traceback" and line[:1] not in ("", " ", "\t"):  # its exception line ends the block
            self._signal = self._signal or line.split(":", 1)[0].endswith(_SIGNAL)
            self._kind = "after"
            return []
        if self._kind == "logging" and line.startswith(_LOGGING_END):
            return self._end(drop=any(_SIGNAL in held for held in self._held))
        return self._end(drop=False) if len(self._held) > MAX_HELD else []

    def flush(self) -> list[str]:
        """What is still held (the output ended inside a block; a whole chain with the signal is dropped)."""
        return self._end(drop=self._kind == "after" and self._signal)

    def _end(self, drop: bool) -> list[str]:
        held, self._held, self._kind, self._signal, self._split = self._held, [], None, False, ""
        return [] if drop else held


def without_stop_noise(lines: Iterable[str]) -> list[str]:
    """`lines` less torchrun's SignalException tracebacks and logging-error blocks."""
    noise = StopNoise()
    out = [kept for line in lines for kept in noise.feed(line)]
    return out + noise.flush()
