"""ShardedByS3Key channels: hosts given different numbers of files are named at start-up, not found as a hang.

Under `ShardedByS3Key` SageMaker gives each host its own share of a channel's objects (docs/PLATFORM.md
§1.9). A dataset of one host's files then has its own length, and a loader sharded per host runs its
own number of steps: the host with fewer files ends its epoch first and waits in a collective for
the others until the collective timeout. `channel_files` compares the hosts' counts through the
process group's store (each host writes its count under the channel's key, then waits a bounded time
for the others'; a host that never asks is not waited for) and refuses unequal shares in one line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from sm_dist.errors import ConfigError

SHARDED = "ShardedByS3Key"
#: How long a host waits for the other hosts' counts before it goes on without the check.
WAIT_S = 30.0
_KEY = "sm_dist/channel-files/{name}/{host}"


def distribution(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The channel's S3DistributionType from SM_INPUT_DATA_CONFIG (inputdataconfig.json), '' when unknown."""
    raw = (os.environ if environ is None else environ).get("SM_INPUT_DATA_CONFIG") or ""
    try:
        config = json.loads(raw) if raw else {}
    except ValueError:
        return ""
    entry = config.get(name) or config.get(name.lower()) if isinstance(config, dict) else None
    return str(entry.get("S3DistributionType", "")) if isinstance(entry, dict) else ""


def gather_counts(store: Any, name: str, host: str, count: int, hosts: Sequence[str],
                  wait_s: float = WAIT_S) -> dict[str, int] | None:
    """Every host's file count of channel `name` (host -> count) through `store` (a torch.distributed
    Store); None when a host did not give its count within `wait_s` (it reads the channel otherwise)."""
    store.set(_KEY.format(name=name, host=host), str(count))
    keys = [_KEY.format(name=name, host=h) for h in hosts]
    try:
        store.wait(keys, dt.timedelta(seconds=wait_s))
    except Exception:  # torch's DistStoreError / RuntimeError on timeout: no check, never a hang
        return None
    return {h: int(store.get(key)) for h, key in zip(hosts, keys)}


def check_equal(name: str, counts: Mapping[str, int]) -> None:
    """ConfigError naming the channel, each host's file count and the fix when the counts differ."""
    if len(set(counts.values())) <= 1:
        return
    each = ", ".join(f"{host} {n}" for host, n in counts.items())
    raise ConfigError(f"channel {name}", f"{SHARDED}: files per host {each}",
                      "each host's loader would run its own number of steps and the host with fewer would wait for "
                      f"the others in a collective (a hang): give the channel a multiple of {len(counts)} files of "
                      "equal size, or use distribution=FullyReplicated")


def check_shares(name: str, count: int, host: str | None, hosts: Sequence[str],
                 environ: Mapping[str, str] | None = None) -> None:
    """The start-up check of a ShardedByS3Key channel on a job of several hosts with a process group."""
    if len(hosts) < 2 or host is None or distribution(name, environ) != SHARDED:
        return
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    store = getattr(dist.distributed_c10d, "_get_default_store", lambda: None)()
    counts = None if store is None else gather_counts(store, name, host, count, hosts)
    if counts is not None:
        check_equal(name, counts)


__all__ = ["SHARDED", "WAIT_S", "check_equal", "check_shares", "distribution", "gather_counts"]
