"""Whether restarting the workers can help, decided from torchrun's output as it comes.

torchrun restarts a failed worker group `--max-restarts` times whatever the cause. A bad flag, a
missing module or an exception the script raises at step 3 then fails the same way each time:
minutes of restarts (and GPU time) before the job fails, with the cause buried. The launcher
reads torchrun's output line by line (workers' stderr included) and, when torchrun reports a
failed worker (`failed (exitcode: N) local_rank: L`), looks at the error that worker printed:

- killed by a signal (exit code < 0: OOM killer, spot, chaos) or an error a peer's death caused:
  restart, as torchrun would;
- an error no restart can fix (`cannot_recover`: usage, import and syntax errors): stop now;
- the same error as at an earlier failure with the checkpoint folder unchanged since (no new
  checkpoint): stop now, and say how many restarts it spent;
- an error of the program itself (`PROGRAM_ERRORS`: ValueError, TypeError, ...) at the first failure, when
  nothing was written since the launcher started, neither in the checkpoint folder nor a checkpoint-like
  file in the working directory or temporary folder (`outside_files`): a restart would replay the same
  steps from the same start and raise it again, so it is not restarted at all (where checkpoints go
  straight to S3 the folder says nothing, and the rule above decides).

Each failure it lets torchrun restart leaves its cause in `restarts` (the launcher prints it as the
`[sm_dist] restart` line, sm_dist.contract.log_lines): the failed rank's error and where in the user's
code, the signal that killed it, the hang the launcher's hang watch named (`hung`), or an error a
peer's death caused.

Standard library only (it runs in PID 1, before torch).
"""

from __future__ import annotations

import collections
import os
import re
import signal
import time
from pathlib import Path

from sm_dist.container import outside_files
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


class FailureWatch:
    """Feed it every output line; it says when a restart cannot help."""

    def __init__(self, host: str, checkpoint_dir: Path | None = None, work_dir: Path | None = None,
                 max_restarts: int | None = None) -> None:
        """`work_dir`: the script's working directory (with the temporary folder, where a script may save
        checkpoints the folder does not hold); None: do not stop a program error at its first failure.
        `max_restarts`: torchrun's; a failure past them ends torchrun, not a restart."""
        self.host = host
        self.checkpoint_dir = checkpoint_dir
        self.work_dir = work_dir
        self._started = time.time()
        self._at_start = self._newest_checkpoint_change()
        self._lines: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
        self._errors: list[WorkerError] = []
        self._failures: list[tuple[str, float]] = []  # (error, checkpoint folder's newest change) per failure
        self.verdict: str | None = None
        self._folder = str(checkpoint_dir) if checkpoint_dir is not None else None
        self.max_restarts = max_restarts
        self.restarts: list[str] = []
        """The cause of each failure let through to a restart, oldest first (the launcher takes them)."""
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
        mark = (error.text, self._newest_checkpoint_change())
        if mark in self._failures:
            spent = self._failures.count(mark)
            self.verdict = (f"{error.line()}; not restarted: the same error again, with no new checkpoint since "
                            f"({spent} restart{'s' if spent > 1 else ''} spent on it)")
            return self.verdict
        if not self._failures and self._replays(error, mark[1]):
            self.verdict = (f"{error.line()}; not restarted: a restart would replay the same steps into the same "
                            f"{error.kind} (no checkpoint was written since the job started)")
            return self.verdict
        self._failures.append(mark)
        return None

    def _replays(self, error: WorkerError, newest: float) -> bool:
        """A restart would start where this attempt started: a program error, nothing saved since the start."""
        if error.kind not in PROGRAM_ERRORS or self.checkpoint_dir is None or self.work_dir is None:
            return False
        if newest != self._at_start:
            return False
        return not outside_files.find(self._started, self.checkpoint_dir, work_dir=self.work_dir)

    def error(self) -> WorkerError | None:
        """The worker error most likely to be the cause, of everything seen so far."""
        return cause([*self._errors, *errors_in(self.host, self._lines, self._folder)])

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
