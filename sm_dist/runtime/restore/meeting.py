"""Step 2 of the restore, **meet**: the hosts wait for each other on algo-1's rendezvous store.

Every host's restore arrives at the c10d TCPStore that torchrun's agents already share, leaving what it
shares (its checkpoint-like files outside the synced folder, as a JSON list, or the peer restore's record);
nobody downloads before the slowest host's uploads are in. Different lists outside the folder are a
split resume: the hosts would resume from different states (`split_resume`, said once by `said_split`).
Used by `sm_dist.runtime.restore.folder_restore`, for S3 and for the peers under network isolation.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sm_dist.container.worker import MEET_PREFIX, NOT_RESTORING, split_stop_line
from sm_dist.contract.worker_errors import SPLIT_RESUME_PREFIX

#: How long to wait for the other hosts at the rendezvous store.
MEET_TIMEOUT_S = 600.0
_POLL_S = 0.5
#: How long a host that found a split resume waits for the other hosts to have read the meeting (`wait_seen`).
SEEN_TIMEOUT_S = 30.0
_SEEN_POLL_S = 0.05


def meet(endpoint: str, key: str, hosts: Sequence[str], me: str, timeout: float = MEET_TIMEOUT_S,
         share: str = "") -> tuple[list[str], dict[str, str]]:
    """Wait on the rendezvous store until every host of `hosts` arrived for `key`, each leaving
    `share`; (the hosts still missing at the timeout, empty when met; host -> what it shared).
    Arriving twice (a retried restore) counts once; a host that starts its workers for the first
    time comes as NOT_RESTORING (its folder holds what the job started with: nothing to wait for)."""
    if len(hosts) <= 1 or not endpoint:
        return [], {me: share}
    from datetime import timedelta

    from torch.distributed import TCPStore

    host, _, port = endpoint.rpartition(":")
    store = TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=min(timeout, 60.0) or 1.0))
    prefix = f"{MEET_PREFIX}/{key}"
    store.set(f"{prefix}/{me}", share)
    deadline = time.monotonic() + timeout
    while True:
        missing = [h for h in hosts if not store.check([f"{prefix}/{h}"])]
        if not missing:
            return [], {h: store.get(f"{prefix}/{h}").decode("utf-8", "replace") for h in hosts}
        if time.monotonic() >= deadline:
            return missing, {}
        time.sleep(_POLL_S)


def wait_seen(endpoint: str, key: str, shared: dict[str, str], me: str, timeout: float = SEEN_TIMEOUT_S) -> None:
    """Say on the store that `me` read the meeting of `key`, then wait (at most `timeout`) until every host that
    came to restore has. A host that found a split resume ends the job at once, and algo-1's store ends with
    it: a host still between two looks at the meeting then failed its restore ("Connection was likely closed")
    instead of naming the split. Never a reason to fail: a store already gone ends the wait."""
    hosts = [h for h, text in shared.items() if text != NOT_RESTORING]
    if len(hosts) <= 1 or not endpoint:
        return
    from datetime import timedelta

    from torch.distributed import TCPStore

    host, _, port = endpoint.rpartition(":")
    prefix = f"{MEET_PREFIX}/{key}/seen"
    deadline = time.monotonic() + timeout
    try:
        store = TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=max(1.0, min(timeout, 60.0))))
        store.set(f"{prefix}/{me}", "1")
        while not all(store.check([f"{prefix}/{h}"]) for h in hosts) and time.monotonic() < deadline:
            time.sleep(_SEEN_POLL_S)
    except Exception:  # noqa: BLE001 - the store is gone (another host ended the job): nothing left to wait for
        return


def _outside_of(text: str) -> tuple[str, ...]:
    """A host's share: the JSON list of its files outside the folder, or the peer restore's record holding it."""
    data = json.loads(text or "[]")
    return tuple(sorted(data.get("outside", []) if isinstance(data, dict) else data))


def split_resume(shared: dict[str, str]) -> str | None:
    """What differs between the hosts' checkpoint-like files outside the synced folder (each host
    shares a JSON list of them), or None when every host has the same."""
    lists = {host: _outside_of(text) for host, text in shared.items() if text != NOT_RESTORING}
    if len(set(lists.values())) <= 1:
        return None
    every = sorted({name for names in lists.values() for name in names})
    name = next(n for n in every if any(n not in names for names in lists.values()))
    have = [h for h, names in sorted(lists.items()) if name in names]
    lack = [h for h, names in sorted(lists.items()) if name not in names]
    return f"{', '.join(have)} {'has' if len(have) == 1 else 'have'} {name}, {', '.join(lack)} " \
           f"{'has' if len(lack) == 1 else 'have'} not"


def said_split(shared: dict[str, str], folder: Path, host: str) -> bool:
    """Print the split-resume line when the hosts' files outside the folder differ, and that `host`'s script is
    not started (`split_stop_line`); whether they did."""
    split = split_resume(shared)
    if split:  # read by PID 1's failure watch: the reason if the job then fails (a hang, a rendezvous error)
        print(f"{SPLIT_RESUME_PREFIX}{split} (outside the checkpoint folder {folder}, which alone is synced): the "
              "hosts resume from different states; save the script's checkpoints under the checkpoint folder "
              f"(SM_CHECKPOINT_DIR)\n{split_stop_line(host)}", file=sys.stderr, flush=True)
    return split is not None

