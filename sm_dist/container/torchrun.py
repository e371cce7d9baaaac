"""torchrun as PID 1's child: started in its own process group, its output read line by line.

`Supervisor` runs ``python -m torch.distributed.run`` for `sm_dist.container.pid1`: it relays
SIGTERM/SIGINT to torchrun's group (the kernel drops a default-disposition signal sent to PID 1,
docs/PLATFORM.md §1.3), keeps the tail of its stderr for the failure message, and hands every line
to the watches — `failure_watch` (restart or stop), `hang_watch` (no progress), `end_watch` (every
rank finished, or torchrun lost the stop signal) — stopping torchrun when one says so; once it sent a
signal, torchrun's own `SignalException` traceback is left out (`stop_noise`). As PID 1 it waits for
the orphans it adopts, never for torchrun (`reaper`). Standard library only.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from io import BufferedReader
from pathlib import Path
from typing import cast

from sm_dist.container import reaper
from sm_dist.container.end_watch import Action, EndWatch, live_children
from sm_dist.container.failure_watch import FailureWatch
from sm_dist.container.hang_watch import HangWatch
from sm_dist.container.stop_noise import StopNoise
from sm_dist.contract.log_lines import restart_line

_log = logging.getLogger("sm_dist.pid1")

#: Lines of torchrun's stderr kept for the failure reason.
STDERR_TAIL_LINES = 60
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Seconds between two looks at torchrun's workers and the ranks' marks (sm_dist.container.end_watch).
WATCH_EVERY_S = 1.0


class Supervisor:
    """Runs torchrun in its own process group, relays signals, keeps the tail of its stderr, and
    stops it when `watch` says a restart cannot help or `ends` that the job is done or torchrun
    lost the stop signal (`sm_dist.container.end_watch`); `hangs` reads its output (stdout too: the
    step lines) and, when the ranks stop making progress, restarts or stops them (`hang_watch`)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, watch: FailureWatch | None = None,
                 stop_file: Path | None = None, ends: EndWatch | None = None, reap: bool = False,
                 hangs: HangWatch | None = None) -> None:
        self.argv, self.env, self.cwd = argv, env, cwd
        self.hangs = hangs
        self.reap = reap  # wait for adopted orphans while torchrun runs (sm_dist.container.reaper)
        self.stop_file = stop_file  # tells workers torchrun starts again not to run the script
        self.signals: list[int] = []
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.watch = watch
        self.ends = ends
        self.gave_up: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._forwarded = False  # torchrun handles one signal; a second would cut its shutdown short
        self._noise: StopNoise | None = None  # from the first signal sent to torchrun (stop_noise)
        self._raw_pending = 0  # bytes of the unfinished output line already written as they came
        self._lock = threading.Lock()
        self._held = False  # torchrun's group stopped while the failure watch asks the checkpoint URI
        if watch is not None:
            watch.hold = self.hold

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signals.append(signum)
        _log.info("received %s, forwarding to torchrun", signal.Signals(signum).name)
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        if self._proc is None or self._proc.poll() is not None or self._forwarded:
            return  # not started yet (run() forwards it then), already gone, or already told
        self._forwarded = True
        self._send(signum)
        if self.ends is not None:
            self.ends.signalled()

    def _send(self, signum: int) -> None:
        assert self._proc is not None  # only called once started
        if self._noise is None:
            self._noise = StopNoise()
        try:
            os.killpg(self._proc.pid, signum)
        except ProcessLookupError:
            pass
        self.hold(False)  # a stopped group acts on the signal once continued

    def hold(self, on: bool) -> None:
        """Stop torchrun's process group (SIGSTOP) while the failure watch asks whether a restart can help, so that
        it starts no workers meanwhile (a restart begun is a restart counted); continue it (SIGCONT)."""
        if self._proc is None or self._proc.poll() is not None or on == self._held:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGSTOP if on else signal.SIGCONT)
        self._held = on

    def _stop(self, why: str) -> None:
        """Stop torchrun for good: workers it starts meanwhile exit before the script."""
        if self.stop_file is not None:  # first: torchrun may restart the workers before the signal lands
            with contextlib.suppress(OSError):
                self.stop_file.write_text(why, encoding="utf-8")
        self._forward(signal.SIGTERM)
        self.hold(False)  # the signal was forwarded before (not sent again): torchrun must still go on to end

    def _act(self, action: Action) -> None:
        with self._lock:
            if action.kind == "done":
                _log.info("%s; stopping torchrun", action.why)
                self._stop(action.why)
            elif action.kind == "term":
                _log.warning("%s", action.why)
                self._send(signal.SIGTERM)
            else:
                (_log.info if self.ends is not None and self.ends.done else _log.error)("%s; killing torchrun",
                                                                                         action.why)
                if self.stop_file is not None:
                    with contextlib.suppress(OSError):
                        self.stop_file.write_text(action.why, encoding="utf-8")
                self._send(signal.SIGKILL)

    def _pump(self, stream: BufferedReader) -> None:
        """Pass torchrun's stderr on as it comes (a progress bar redraws its line after a carriage
        return: waiting for a newline would hold every redraw until the bar ends) and read it line by line."""
        pending = b""
        progress = self.hangs.reader() if self.hangs is not None else None
        for chunk in iter(lambda: stream.read1(65536), b""):
            if progress is not None:
                progress(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            self._write(chunk, lines, pending)
            for raw in lines:
                self._line(raw.decode("utf-8", "replace"))
        if pending:
            self._line(pending.decode("utf-8", "replace"))
        if self._noise is not None:
            self._write(b"", [pending] if pending else [], b"", flush=True)

    def _write(self, chunk: bytes, lines: list[bytes], pending: bytes, flush: bool = False) -> None:
        """Pass torchrun's output on: as it comes until torchrun got a signal, then whole lines less
        torchrun's own traceback (`stop_noise`; the line begun before the switch is finished as it is)."""
        noise = self._noise
        if noise is None:
            out, self._raw_pending = chunk, len(pending)
        else:
            kept: list[str] = []
            for index, raw in enumerate(lines):
                if index == 0 and self._raw_pending:
                    kept.append(raw[self._raw_pending:].decode("utf-8", "surrogateescape"))
                    self._raw_pending = 0
                    continue
                kept.extend(noise.feed(raw.decode("utf-8", "surrogateescape")))
            if flush:
                kept.extend(noise.flush())
            out = "".join(line + "\n" for line in kept).encode("utf-8", "surrogateescape")
        if out:
            sys.stderr.buffer.write(out)
            sys.stderr.buffer.flush()

    def _line(self, line: str) -> None:
        self.tail.append(line)
        action = self.ends.feed(line) if self.ends is not None else None
        if action is not None:
            self._act(action)
        verdict = self.watch.feed(line) if self.watch is not None else None
        if verdict is not None and self.gave_up is None and (self.ends is None or self.ends.done is None):
            self.gave_up = verdict
            _log.error("%s; stopping torchrun", verdict)
            with self._lock:
                self._stop(verdict)
        while self.watch is not None and self.watch.restarts:  # the cause of a restart, where the user looks
            why = self.watch.restarts.pop(0)
            if self.gave_up is None and not self.signals and (self.ends is None or self.ends.done is None):
                print(restart_line(self.watch.host, why), file=sys.stderr, flush=True)

    def _pump_stdout(self, stream: BufferedReader) -> None:
        """torchrun's stdout (rank 0's step lines) passed on as it comes, read by the hang watch."""
        assert self.hangs is not None  # piped for it only
        progress = self.hangs.reader()
        for chunk in iter(lambda: stream.read1(65536), b""):
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
            progress(chunk)

    def _watchdog(self) -> None:
        assert self._proc is not None and self.ends is not None
        while self._proc.poll() is None:
            time.sleep(WATCH_EVERY_S)
            action = self.ends.tick(live_children(self._proc.pid))
            if action is not None and self._proc.poll() is None:
                self._act(action)
            hung = self.hangs.check() if self.hangs is not None and self._proc.poll() is None else None
            if hung is not None and self.hangs is not None:
                if hung.give_up and self.gave_up is None:  # the stop file first: restarted workers must not run
                    self.gave_up = hung.verdict
                    with self._lock:
                        self._stop(hung.verdict)
                elif self.watch is not None:  # the failure the kill causes is this hang
                    self.watch.hung(hung.verdict.split("; restarting the workers", 1)[0].split("\n", 1)[0])
                self.hangs.kill()

    def run(self) -> int:
        """Start torchrun, wait for it, return its exit code (negative: killed by a signal)."""
        previous = {s: signal.signal(s, self._on_signal) for s in FORWARDED_SIGNALS}
        try:
            self._proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stderr=subprocess.PIPE, start_new_session=True,
                stdout=subprocess.PIPE if self.hangs is not None else None,
            )
            if self.signals:  # a signal that arrived while torchrun was being started
                self._forward(self.signals[0])
            pump = threading.Thread(target=self._pump, args=(cast(BufferedReader, self._proc.stderr),), daemon=True)
            pump.start()
            if self.hangs is not None:
                threading.Thread(target=self._pump_stdout, args=(cast(BufferedReader, self._proc.stdout),),
                                 daemon=True).start()
            if self.ends is not None:
                threading.Thread(target=self._watchdog, daemon=True).start()
            # never torchrun: its exit status is this wait's
            orphans = reaper.Reaper(keep={self._proc.pid}).start() if self.reap else None
            code = self._proc.wait()
            if orphans is not None:
                orphans.stop()
            pump.join(timeout=10)
            return code
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
