"""Whether any host's checkpoint reached the run's checkpoint URI since a moment.

Every host's checkpoint folder syncs to the one CheckpointConfig.S3Uri, and a restart restores from
it (sm_dist.runtime.restore.folder_restore): the URI is the run's view of what all hosts saved.
PID 1's failure watch (sm_dist.container.failure_watch) asks before it calls a program error a
replay: on a multi-host job rank 0 often saves on algo-1 alone, so the failing host's own folder
says nothing about a checkpoint the restart would resume from.

``python -m sm_dist.runtime.restore.written_since --uri U --since UNIX_SECONDS [--wait S]``
prints the keys written there since then (SageMaker's sync markers left out) and exits 0 when there
are some, 3 when there are none (after `--wait` seconds and a second look, for an upload still on
its way), 4 when it cannot tell (the URI unreadable). Any other code (Python's 1 for a crash,
argparse's 2) is "cannot tell" too: the failure watch then claims nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from sm_dist.contract.container import sync_skipped
from sm_dist.runtime.checkpoint.s3 import make_client
from sm_dist.runtime.restore.remotes import Remote, S3Remote, remote_for

FOUND, NONE, CANNOT_TELL = 0, 3, 4
#: S3 calls tried at most twice (not the storage's patient retries): torchrun is held while this runs.
ATTEMPTS = 2


def written(remote: Remote, since: float) -> list[str]:
    """Keys at the URI written at or after `since` (Unix seconds), markers and partial names left out."""
    return sorted(key for key, entry in remote.list().items() if entry.modified >= since and not sync_skipped(key))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="written_since")
    parser.add_argument("--uri", required=True)
    parser.add_argument("--since", type=float, required=True)
    parser.add_argument("--wait", type=float, default=0.0)
    args = parser.parse_args(argv)
    try:
        remote: Remote = S3Remote(args.uri, make_client(max_attempts=ATTEMPTS)) if args.uri.startswith("s3://") \
            else remote_for(args.uri)
        found = written(remote, args.since)
        if not found and args.wait > 0:
            time.sleep(args.wait)
            found = written(remote, args.since)
    except Exception as exc:  # noqa: BLE001 - any failure to read the URI means "cannot tell", said in one line
        print(f"written_since: cannot read {args.uri}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return CANNOT_TELL
    print("\n".join(found))
    return FOUND if found else NONE


if __name__ == "__main__":
    sys.exit(main())
