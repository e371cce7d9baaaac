"""Whether restarting the workers can help, decided from torchrun's output as it comes.

torchrun restarts a failed worker group `--max-restarts` times whatever the cause. A bad flag, a
missing module or an exception the script raises at step 3 then fails the same way each time:
minutes of restarts (and GPU time) before the job fails, with the cause buried. PID 1
reads torchrun's output line by line (workers' stderr included) and, when torchrun reports a
failed worker (`failed (exitcode: N) local_rank: L`), looks at the error that worker printed:

- killed by a signal (exit code < 0: OOM killer, spot, chaos) or an error a peer's death caused:
  restart, as torchrun would;
- an error no restart can fix (`cannot_recover`: usage, import and syntax errors): stop now;
- the same error as at an earlier failure with the checkpoint folder unchanged since (no new
  checkpoint; where the newest checkpoint's step is known, sm_dist.contract.checkpoint_names, that
  checkpoint: one saved again at the same step is no progress): stop now, and say how many restarts
  it spent;
- an error of the program itself (`PROGRAM_ERRORS`: ValueError, TypeError, ...) at the first failure, when
  nothing was written since PID 1 started, neither in the checkpoint folder nor a checkpoint-like
  file in the working directory or temporary folder (`outside_files`): a restart would replay the same
  steps from the same start and raise it again, so it is not restarted at all (where checkpoints go
  straight to S3 the folder says nothing, and the rule above decides). On a job of several hosts this
  host's folder is not the run's: rank 0 often saves on algo-1 alone. There the run's checkpoint URI,
  which every host's folder syncs to and a restart restores from (`shared_view`), must hold nothing
  written since the start either; where it cannot be read (network isolation: no S3 in the container)
  nothing is claimed and torchrun restarts.

Each failure it lets torchrun restart leaves its cause in `restarts` (PID 1 prints it as the
`[sm_dist] restart` line, sm_dist.contract.log_lines): the failed rank's error and where in the user's
code, the signal that killed it, the hang PID 1's hang watch named (`hung`), or an error a
peer's death caused.

Standard library only (it runs in PID 1, before torch).
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from sm_dist.container import outside_files
from sm_dist.contract.checkpoint_names import newest_checkpoint
from sm_dist.contract.container import NETWORK_ISOLATION_ENV, PARTIAL_SUFFIX, read_checkpoint_config, sync_skipped
from sm_dist.contract.log_lines import RESTART_AFTER_PEER, FaultLine, read_line
from sm_dist.contract.worker_errors import WorkerError, cannot_recover, cause, errors_in

#: torchrun's line for each failed worker (torch/distributed/elastic/multiprocessing/api.py).
_WORKER_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
#: Lines kept between two worker failures: a traceback and torchrun's lines around it.
KEEP_LINES = 400
#: Exceptions a script raises from its own logic: replayed from the same start, the same steps raise them again.
#: (RuntimeError is not one: CUDA and NCCL failures, which a restart may outlive, are RuntimeErrors.)
PROGRAM_ERRORS = ("ValueError", "TypeError", "KeyError", "IndexError", "AttributeError", "NameError",
                  "UnboundLocalError", "AssertionError", "ZeroDivisionError", "NotImplementedError", "LookupError",
                  "RecursionError")
#: Whether a checkpoint reached the run's URI since a moment: True, False, None when it cannot tell.
SharedView = Callable[[float], "bool | None"]
#: Seconds the URI is looked at again for an upload still on its way (local mode's sync sends a file once it
#: stood still over one 0.5 s poll; SageMaker's uploader documents no delay).
UPLOAD_WAIT_S = 2.0
#: The URI's clock (S3's) may lag this host's by this much.
CLOCK_SLACK_S = 1.0
#: The longest PID 1 waits for the URI's answer before it claims nothing (torchrun is held meanwhile;
#: written_since tries each S3 call twice, each connection for at most 10 s).
ASK_TIMEOUT_S = 30.0


class FailureWatch:
    """Feed it every output line; it says when a restart cannot help."""

    def __init__(self, host: str, checkpoint_dir: Path | None = None, work_dir: Path | None = None,
                 max_restarts: int | None = None, shared: SharedView | None = None,
                 deciding: Path | None = None) -> None:
        """`work_dir`: the script's working directory (with the temporary folder, where a script may save
        checkpoints the folder does not hold); None: do not stop a program error at its first failure.
        `max_restarts`: torchrun's; a failure past them ends torchrun, not a restart. `shared`: the run's
        view of every host's checkpoints (`shared_view`), None on a job of one host; `deciding`: a file that
        exists while it is asked (sm_dist.container.worker.DECIDING_FILE: restarted workers wait for the answer)."""
        self.host = host
        self.checkpoint_dir = checkpoint_dir
        self.work_dir = work_dir
        self.shared = shared
        self.deciding = deciding
        self.hold: Callable[[bool], None] | None = None
        """Stops torchrun (True) while `shared` is asked, so it starts no workers meanwhile, and continues it
        (False) when they restart; after a replay's verdict PID 1's stop continues it (its Supervisor)."""
        self._started = time.time()
        self._at_start = self._newest_checkpoint_change()
        self._lines: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
        self._errors: list[WorkerError] = []
        self._failures: list[tuple[str, object]] = []  # (error, the folder's newest checkpoint) per failure
        self.verdict: str | None = None
        self._folder = str(checkpoint_dir) if checkpoint_dir is not None else None
        self.max_restarts = max_restarts
        self.restarts: list[str] = []
        """The cause of each failure let through to a restart, oldest first (PID 1 takes them)."""
        self._hang: str | None = None
        self._failed = 0  # worker group failures seen

    def feed(self, line: str) -> str | None:
        """Take one line; return the reason to stop (once), else None."""
        failed = _WORKER_FAILED.search(line)
        if not failed:
            self._lines.append(line)
            return None
        found = errors_in(self.host, self._lines, self._folder)
        faults = [hook.fault for hook in map(read_line, self._lines) if isinstance(hook, FaultLine)]
        self._lines.clear()
        self._errors.extend(found)
        if self.verdict is not None:
            return None
        code, error = int(failed.group(1)), cause(found)
        self._failed += 1
        verdict = None if code < 0 or error is None or error.collateral else self._verdict(error)
        if verdict is None and (self.max_restarts is None or self._failed <= self.max_restarts):
            self.restarts.append(self._cause(code, failed.group(2), error, faults))
        return verdict

    def hung(self, text: str) -> None:
        """The hang watch named a hang and kills the ranks: the failure that follows is that hang."""
        self._hang = text

    def _cause(self, code: int, local_rank: str, error: WorkerError | None, faults: list[str]) -> str:
        """One line: why this host's workers failed (the `[sm_dist] restart` line's cause)."""
        if self._hang is not None:
            hang, self._hang = self._hang, None
            return hang
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"local rank {local_rank} killed by {name}" + (f" ({faults[-1]})" if faults else "")
        if error is None:
            return f"local rank {local_rank} exited with code {code}"
        who = f"rank {error.rank}" if error.rank is not None else f"local rank {local_rank}"
        text = f"{who} — {error.text}" + (f" at {error.at}" if error.at else "") + (
            f"  {error.hint}" if error.hint else "")
        return RESTART_AFTER_PEER + text if error.collateral else text

    def _verdict(self, error: WorkerError) -> str | None:
        """Why a restart cannot help with the worker's own `error`, or None."""
        if cannot_recover(error):
            self.verdict = f"{error.line()}; not restarted: a restart cannot fix it"
            return self.verdict
        newest = self._newest_checkpoint_change()
        mark = (error.text, self._resume_point(newest))
        if mark in self._failures:
            spent = self._failures.count(mark)
            self.verdict = (f"{error.line()}; not restarted: the same error again, with no new checkpoint since "
                            f"({spent} restart{'s' if spent > 1 else ''} spent on it)")
            return self.verdict
        if not self._failures and self._replays(error, newest):
            anywhere = ", on any host" if self.shared is not None else ""
            self.verdict = (f"{error.line()}; not restarted: a restart would replay the same steps into the same "
                            f"{error.kind} (no checkpoint was written since the job started{anywhere})")
            return self.verdict
        self._failures.append(mark)
        return None

    def _replays(self, error: WorkerError, newest: float) -> bool:
        """A restart would start where this attempt started: a program error, nothing saved since the start."""
        if error.kind not in PROGRAM_ERRORS or self.checkpoint_dir is None or self.work_dir is None:
            return False
        if newest != self._at_start:
            return False
        if outside_files.find(self._started, self.checkpoint_dir, work_dir=self.work_dir):
            return False
        if self.shared is None:
            return True
        if self.deciding is not None:
            self.deciding.touch()
        if self.hold is not None:
            self.hold(True)
        replays = False
        try:
            replays = self.shared(self._started) is False
            return replays
        finally:  # a replay's answer is the stop PID 1 sends next: the worker waits for its file
            if not replays:
                if self.deciding is not None:
                    self.deciding.unlink(missing_ok=True)
                if self.hold is not None:
                    self.hold(False)

    def error(self) -> WorkerError | None:
        """The worker error most likely to be the cause, of everything seen so far."""
        return cause([*self._errors, *errors_in(self.host, self._lines, self._folder)])

    def _resume_point(self, newest_change: float) -> object:
        """What a restart would resume from: the folder's newest checkpoint by name and step where its step is
        known (rank 0 saving state.pt of step 2 again in each attempt is no progress), else its newest change."""
        if self.checkpoint_dir is not None:
            try:
                found = newest_checkpoint(self.checkpoint_dir)
            except OSError:
                found = None
            if found is not None and found[1] is not None:
                return found
        return newest_change

    def _newest_checkpoint_change(self) -> float:
        newest = 0.0
        if self.checkpoint_dir is not None and self.checkpoint_dir.is_dir():
            for folder, _dirs, files in os.walk(self.checkpoint_dir):
                for name in files:
                    try:
                        newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime)
                    except OSError:
                        continue
        return newest


def shared_view(root: Path, env: Mapping[str, str], hosts: int, wait: float = UPLOAD_WAIT_S) -> SharedView | None:
    """The run's view of what every host saved: its CheckpointConfig URI (None on a job of one host, whose
    folder is the run's). It cannot tell without a URI or under network isolation (no S3 in the container)."""
    if hosts <= 1:
        return None
    try:
        config = read_checkpoint_config(root)
    except ValueError:  # RuntimeEnvError: reported elsewhere
        config = None
    return uri_view(config.s3_uri if config is not None else None, env, wait)


def uri_view(uri: str | None, env: Mapping[str, str], wait: float = UPLOAD_WAIT_S) -> SharedView:
    """`shared_view` of the checkpoint URI `uri`: an s3:// prefix, read in a subprocess (boto3 is the
    runtime world's: sm_dist.runtime.restore.written_since), or local mode's folder standing in for one."""
    if uri is None or env.get(NETWORK_ISOLATION_ENV) == "1":
        return lambda _since: None
    if not uri.startswith("s3://"):  # local mode's --local-checkpoints folder standing in for S3
        folder = Path(uri.removeprefix("file://"))
        return lambda since: _folder_written(folder, since - CLOCK_SLACK_S, wait)

    def ask(since: float) -> bool | None:
        command = [sys.executable, "-m", "sm_dist.runtime.restore.written_since", "--uri", uri,
                   "--since", repr(since - CLOCK_SLACK_S), "--wait", str(wait)]
        try:
            done = subprocess.run(command, env=dict(env), capture_output=True, text=True, timeout=ASK_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return {0: True, 3: False}.get(done.returncode)  # 4: the URI could not be read; 1: a crash

    return ask


def _folder_written(folder: Path, since: float, wait: float) -> bool:
    """A file (not a sync marker, not a partial copy) changed under `folder` since `since`, now or after `wait` s."""
    def look() -> bool:
        for base, _dirs, files in os.walk(folder):
            for name in files:
                rel = os.path.relpath(os.path.join(base, name), folder)
                if sync_skipped(rel) or name.endswith(PARTIAL_SUFFIX):
                    continue
                try:
                    if os.stat(os.path.join(base, name)).st_mtime >= since:
                        return True
                except OSError:
                    continue
        return False

    if look():
        return True
    if wait > 0:
        time.sleep(wait)
    return look()
