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
  checkpoint): stop now.

Standard library only (it runs in PID 1, before torch).
"""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path

from sm_dist.contract.worker_errors import WorkerError, cannot_recover, cause, errors_in

#: torchrun's line for each failed worker (torch/distributed/elastic/multiprocessing/api.py).
_WORKER_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
#: Lines kept between two worker failures: a traceback and torchrun's lines around it.
KEEP_LINES = 400


class FailureWatch:
    """Feed it every output line; it says when a restart cannot help."""

    def __init__(self, host: str, checkpoint_dir: Path | None = None) -> None:
        self.host = host
        self.checkpoint_dir = checkpoint_dir
        self._lines: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
        self._errors: list[WorkerError] = []
        self._failures: list[tuple[str, float]] = []  # (error, checkpoint folder's newest change) per failure
        self.verdict: str | None = None

    def feed(self, line: str) -> str | None:
        """Take one line; return the reason to stop (once), else None."""
        failed = _WORKER_FAILED.search(line)
        if not failed:
            self._lines.append(line)
            return None
        found = errors_in(self.host, self._lines)
        self._lines.clear()
        self._errors.extend(found)
        if self.verdict is not None or int(failed.group(1)) < 0:
            return None
        error = cause(found)
        if error is None or error.collateral:
            return None
        if cannot_recover(error):
            self.verdict = f"{error.line()}; not restarted: a restart cannot fix it"
            return self.verdict
        mark = (error.text, self._newest_checkpoint_change())
        if mark in self._failures:
            self.verdict = f"{error.line()}; not restarted: the same error again, with no new checkpoint since"
            return self.verdict
        self._failures.append(mark)
        return None

    def error(self) -> WorkerError | None:
        """The worker error most likely to be the cause, of everything seen so far."""
        return cause([*self._errors, *errors_in(self.host, self._lines)])

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
