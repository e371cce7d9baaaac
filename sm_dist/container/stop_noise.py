"""torchrun's own tracebacks after a stop signal, left out of the host's log (standard library only).

torchrun turns SIGTERM into a `SignalException` raised in its main thread: it shuts its workers
down, then the exception ends torchrun with a ~60-line traceback of its own frames
(docs/PLATFORM.md §2.6). Raised inside a logging call instead, the logging module prints it as a
`--- Logging error ---` block and goes on (`sm_dist.container.end_watch` sends the signal again).
Either is the first thing a user sees at the end of the log of a job that succeeded, or printed
after the script's own error, and says nothing about the job: the launcher stopped torchrun on
purpose, or passed on SageMaker's stop. Once the launcher has sent torchrun a signal, `StopNoise`
holds each block that begins like one and drops it when it ends in `SignalException`; any other
block (a worker's traceback before its `[rankN]:` prefix exists) is written unchanged, in order.
"""

from __future__ import annotations

from collections.abc import Iterable

_TRACEBACK = "Traceback (most recent call last):"
#: logging.Handler.handleError's block: the header, the traceback, "Call stack:", then the record.
_LOGGING_ERROR = "--- Logging error ---"
_LOGGING_END = ("Arguments: ", "Use the traceback above to help find the error.")
_SIGNAL = "SignalException"
#: A block longer than this is written as it is (a block is ~60 lines; a chained one twice that).
MAX_HELD = 400


class StopNoise:
    """Feed it output lines (without their newline); it returns the lines to write."""

    def __init__(self) -> None:
        self._held: list[str] = []
        self._kind: str | None = None  # "traceback" | "logging" while a block is held

    def feed(self, line: str) -> list[str]:
        if self._kind is None:
            if line.rstrip() in (_TRACEBACK, _LOGGING_ERROR):
                self._kind = "logging" if line.rstrip() == _LOGGING_ERROR else "traceback"
                self._held = [line]
                return []
            return [line]
        self._held.append(line)
        if self._kind == "traceback" and line[:1] not in ("", " ", "\t"):
            return self._end(drop=line.split(":", 1)[0].endswith(_SIGNAL))  # its exception line ends it
        if self._kind == "logging" and line.startswith(_LOGGING_END):
            return self._end(drop=any(_SIGNAL in held for held in self._held))
        return self._end(drop=False) if len(self._held) > MAX_HELD else []

    def flush(self) -> list[str]:
        """What is still held (the output ended inside a block)."""
        return self._end(drop=False)

    def _end(self, drop: bool) -> list[str]:
        held, self._held, self._kind = self._held, [], None
        return [] if drop else held


def without_stop_noise(lines: Iterable[str]) -> list[str]:
    """`lines` less torchrun's SignalException tracebacks and logging-error blocks."""
    noise = StopNoise()
    out = [kept for line in lines for kept in noise.feed(line)]
    return out + noise.flush()
