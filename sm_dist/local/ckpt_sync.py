"""Checkpoint sync as SageMaker documents it (docs/PLATFORM.md §1.4), between host folders and a store.

- At job start, everything under the URI is copied into *every* host's checkpoint folder.
- During the run, new or changed files are uploaded; a file counts as written once its size and
  mtime have not changed over one poll interval (SageMaker's agent also works per file,
  asynchronously). Marker and temp names (*.sagemaker-ignore, *.sagemaker-uploading,
  *.sagemaker-uploaded) are never uploaded.
- After an upload, `<file>.sagemaker-uploaded` is written next to the file, as SageMaker does.
- A file deleted locally (after it was restored or uploaded from that host) is deleted at the URI.
- When the job's processes have stopped, a last pass uploads whatever is left.

Upload order is oldest-first and a pass stops at the first error, so a commit marker written
last is never uploaded before the files it commits (a property of this emulation; SageMaker
does not document an order). Errors are logged and retried on the next pass; a file or folder the
job deletes while it is listed or uploaded is skipped. Nothing stops the uploads silently: the
thread survives any error of a pass, `ensure_running` restarts it should it die all the same, and
`problems()` says what went wrong for the summary (uploads failing for a while, a restarted thread).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sm_dist.contract.container import SYNC_SKIPPED_SUFFIXES, SYNC_UPLOADED_SUFFIX, sync_skipped, synced_files
from sm_dist.errors import CheckpointError
from sm_dist.local.stores import Store

#: Name suffixes SageMaker's uploader skips or writes itself (the contract's; docs/PLATFORM.md §1.4).
IGNORED_SUFFIXES = SYNC_SKIPPED_SUFFIXES
#: What SageMaker's uploader writes next to a file once it is in S3; the runtime's sagemaker-sync
#: storage reads it to know an old checkpoint may be deleted.
UPLOADED_SUFFIX = SYNC_UPLOADED_SUFFIX
#: Seconds between two scans of the checkpoint folders (SageMaker's own interval is undocumented).
DEFAULT_INTERVAL = 0.5
#: How long the start-of-job restore keeps retrying a failing store before the job fails.
RESTORE_TIMEOUT = 120.0
#: Uploads failing for at least this long are named in the summary (shorter hiccups are only logged).
OUTAGE_REPORT_S = 5.0
_log = logging.getLogger(__name__)
Signature = tuple[int, int]  # (size, mtime_ns)


def _mark(path: Path, suffix: str, create: bool) -> None:
    """Write (or remove) SageMaker's marker next to `path`; a vanished folder is no error."""
    marker = path.with_name(path.name + suffix)
    try:
        if create:
            marker.touch()
        else:
            marker.unlink(missing_ok=True)
    except OSError:
        pass


def ignored(rel: str) -> bool:
    """True for paths the uploader must skip (any component with a SageMaker temp suffix)."""
    return sync_skipped(rel)


def scan(folder: Path) -> dict[str, Signature]:
    """Files under `folder` (relative POSIX paths) -> (size, mtime_ns), skipping ignored names."""
    return {rel: (st.st_size, st.st_mtime_ns) for rel, st in synced_files(folder).items()}


@dataclass
class _HostState:
    folder: Path
    synced: dict[str, Signature] = field(default_factory=dict)  # what the store has from this host
    seen: dict[str, Signature] = field(default_factory=dict)  # last scan


class CheckpointSync:
    """Mirrors every host's checkpoint folder into one store, in a background thread."""

    def __init__(self, store: Store, folders: dict[str, Path], interval: float = DEFAULT_INTERVAL, *,
                 what: str = "checkpoint", markers: bool = True, wait_stable: bool = True) -> None:
        """`what` names the folder in logs and problems; `markers`: write SageMaker's `.sagemaker-uploaded`
        next to each upload (the checkpoint sync's); `wait_stable`: upload a file once it is unchanged over a
        poll (off: as it grows, as a TensorBoard event file does, `local.tb_sync`)."""
        self.store = store
        self.interval = interval
        self.what, self.markers, self.wait_stable = what, markers, wait_stable
        self._hosts = {host: _HostState(folder) for host, folder in folders.items()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.uploads = 0
        self.deletes = 0
        self.errors = 0
        self.last_error: str | None = None
        self._failing_since: float | None = None  # first failed pass of the current run of failures
        self._longest_outage = 0.0
        self._outage_error: str | None = None
        self.thread_restarts: list[str] = []

    def restore(self, timeout: float = RESTORE_TIMEOUT) -> int:
        """Copy everything at the URI into every host folder; return the number of files."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._restore_once()
            except Exception as exc:  # any store error: SageMaker retries downloads too
                self.errors += 1
                if time.monotonic() > deadline:
                    raise CheckpointError(f"cannot restore checkpoints from {self.store.uri}: {exc}") from exc
                _log.warning("checkpoint restore from %s failed (%s); retrying", self.store.uri, exc)
                time.sleep(self.interval)

    def _restore_once(self) -> int:
        keys = sorted(self.store.list())
        for state in self._hosts.values():
            for key in keys:
                dest = state.folder / key
                if not dest.exists():
                    self.store.get(key, dest)
            state.synced = {k: v for k, v in scan(state.folder).items() if k in keys}
            state.seen = dict(state.synced)
        return len(keys)

    def start(self) -> None:
        """Start uploading in the background."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"{self.what.lower()}-sync", daemon=True)
        self._thread.start()

    def stop(self, flush: bool = True) -> None:
        """Stop the background thread; with `flush`, upload what is left (processes are gone)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if flush:
            self.flush()

    def flush(self, timeout: float = RESTORE_TIMEOUT) -> None:
        """Upload every pending change now, retrying failed passes until `timeout`."""
        deadline = time.monotonic() + timeout
        for state in self._hosts.values():
            while not self._pass(state, stable_only=False) and time.monotonic() < deadline:
                time.sleep(self.interval)

    def poll_once(self) -> None:
        """One pass over every host: upload files unchanged since the last pass, mirror deletions."""
        for state in self._hosts.values():
            self._pass(state, stable_only=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll_once()
            except Exception as exc:  # noqa: BLE001 - a pass never ends the uploads (_pass catches its own)
                self._failed(exc)

    @property
    def alive(self) -> bool:
        """The background thread runs (False before start() and after stop())."""
        return self._thread is not None and self._thread.is_alive()

    def ensure_running(self) -> None:
        """Restart the background thread if it died (the supervisor calls this every tick)."""
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            why = self.last_error or "no error recorded"
            _log.error("the %s sync thread stopped (%s); restarting it", self.what, why)
            self.thread_restarts.append(why)
            self.start()

    def problems(self) -> list[str]:
        """What the summary should say about the uploads: failures that lasted, a restarted thread."""
        out = []
        now = time.monotonic()
        outage = max(self._longest_outage, now - self._failing_since if self._failing_since is not None else 0.0)
        if outage >= OUTAGE_REPORT_S:
            state = "were still failing when the job ended" if self._failing_since is not None else "then went through"
            out.append(f"{self.what} uploads to {self.store.uri} failed for {outage:.0f} s "
                       f"({self._outage_error or self.last_error}); they were retried and {state}")
        for why in self.thread_restarts:
            out.append(f"the {self.what} sync stopped ({why}) and was restarted")
        return out

    def _failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}".rstrip(": ")
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            self._outage_error = self.last_error
        _log.warning("%s upload to %s failed (%s); retrying", self.what, self.store.uri, self.last_error)

    def _succeeded(self) -> None:
        if self._failing_since is not None:
            self._longest_outage = max(self._longest_outage, time.monotonic() - self._failing_since)
            self._failing_since = None

    def _pass(self, state: _HostState, stable_only: bool) -> bool:
        """One scan-and-upload pass over a host folder; False if it failed (retried next pass)."""
        try:
            current = scan(state.folder) if state.folder.is_dir() else {}
        except OSError as exc:  # the folder itself went away mid-scan: look again next pass
            self._failed(exc)
            return False
        try:
            changed = [k for k, sig in current.items() if state.synced.get(k) != sig]
            for key in sorted(changed, key=lambda k: current[k][1]):
                if stable_only and self.wait_stable and state.seen.get(key) != current[key]:
                    continue  # still being written (or just appeared): wait one more pass
                try:
                    self.store.put(state.folder / key, key)
                except FileNotFoundError:  # deleted by the job since the scan (a file or its folder)
                    continue
                state.synced[key] = current[key]
                self.uploads += 1
                if self.markers:
                    _mark(state.folder / key, UPLOADED_SUFFIX, create=True)
            for key in [k for k in state.synced if k not in current]:
                self.store.delete(key)
                del state.synced[key]
                self.deletes += 1
                if self.markers:
                    _mark(state.folder / key, UPLOADED_SUFFIX, create=False)
        except Exception as exc:  # S3 errors of any kind: retry on the next pass
            self._failed(exc)
            state.seen = current
            return False
        self._succeeded()
        state.seen = current
        return True
