"""A host agent: runs one emulated instance's container command as its first process.

The agent plays the part of the SageMaker platform on one instance: it starts the container
command (PID 1 in the cloud), streams its output with a host prefix, and stops it the way
SageMaker does (docs/PLATFORM.md §1.3): SIGTERM to the first process only, a grace period, then SIGKILL
to everything in the "container". When the first process exits, the container is gone, so any
process it left behind is killed too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from io import BufferedReader
from pathlib import Path
from typing import cast

from sm_dist.errors import LaunchError
from sm_dist.local import procs

#: Called with (host, line) for every output line of the host, without the trailing newline.
LineSink = Callable[[str, str], None]
_log = logging.getLogger(__name__)


class HostAgent:
    """One emulated instance: its first process, its log and its teardown."""

    def __init__(self, host: str, argv: Sequence[str], env: dict[str, str], *, cwd: Path, log_path: Path,
                 on_line: LineSink) -> None:
        self.host = host
        self.token = f"{host}-{uuid.uuid4().hex[:12]}"
        self._argv = list(argv)
        self._env = {**env, procs.TOKEN_VAR: self.token}
        self._cwd = cwd
        self._log_path = log_path
        self._on_line = on_line
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._terminated = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        """Start the first process; its stdout and stderr go to the log and `on_line`."""
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._proc = subprocess.Popen(
                self._argv, env=self._env, cwd=self._cwd, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            )
        except OSError as exc:
            raise LaunchError(f"{self.host}: cannot start the container command {self._argv[0]!r}: "
                              f"{exc.strerror}; check Plan.container_command") from None
        self._reader = threading.Thread(target=self._pump, name=f"log-{self.host}", daemon=True)
        self._reader.start()
        _log.debug("%s: started pid %d: %s", self.host, self._proc.pid, " ".join(self._argv))

    def _pump(self) -> None:
        """Copy the output to the log as it comes; hand on lines ended by a newline or a carriage
        return (a progress bar redraws its line after a CR: each redraw is a line here; the log
        keeps the bytes as written)."""
        assert self._proc is not None and self._proc.stdout is not None  # set by start()
        stream = cast(BufferedReader, self._proc.stdout)  # Popen(stdout=PIPE) without text: buffered
        pending = b""
        with open(self._log_path, "ab") as log:
            for chunk in iter(lambda: stream.read1(65536), b""):
                log.write(chunk)
                log.flush()
                *lines, pending = re.split(rb"\r\n|\r|\n", pending + chunk)
                for raw in lines:
                    self._on_line(self.host, raw.decode("utf-8", errors="replace"))
            if pending:
                self._on_line(self.host, pending.decode("utf-8", errors="replace"))

    def poll(self) -> int | None:
        """Exit code of the first process, or None while it runs."""
        return None if self._proc is None else self._proc.poll()

    def wait_exit(self, timeout: float) -> None:
        """Return once the first process exited, or after `timeout` seconds (nothing torn down)."""
        if self._proc is None:
            time.sleep(timeout)
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the first process; on exit tear the container down. None on timeout."""
        assert self._proc is not None, "start() first"
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.teardown()
        return code

    def terminate(self) -> None:
        """SIGTERM to the first process, once (a second one would cut its shutdown short)."""
        assert self._proc is not None, "start() first"
        if not self._terminated and self._proc.poll() is None:
            self._terminated = True
            os.kill(self._proc.pid, signal.SIGTERM)

    def stop(self, grace: float) -> int:
        """SageMaker's stop: SIGTERM to the first process, `grace` seconds, then SIGKILL all."""
        assert self._proc is not None, "start() first"
        self.terminate()
        code = self.wait(grace)
        if code is None:
            _log.warning("%s: still running %.0f s after SIGTERM; SIGKILL", self.host, grace)
            self.teardown()
            code = self._proc.wait()
        return code

    def teardown(self) -> None:
        """Kill whatever is left of the container (every process carrying its token)."""
        for _ in range(3):  # processes may fork while we kill; a few passes settle it
            if procs.signal_tagged(self.token, signal.SIGKILL) == 0:
                break
            time.sleep(0.05)
        if self._reader is not None:
            self._reader.join(timeout=5)
