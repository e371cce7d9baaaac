"""Make a host's checkpoint folder what SageMaker would restore into it, before restarted workers start.

Run by `sm_dist.container.worker` on each host's local rank 0 when torchrun restarts the workers
(``python -m sm_dist.runtime.restore.folder_restore --folder F --uri U ...``). Three steps:

1. **settle** — wait until every file of this host's folder is at the URI: SageMaker's uploader
   works asynchronously, so the newest checkpoint may still be on its way. A file counts as there
   when the URI has it at its size written after its last change here, or the same bytes (the
   files SageMaker restored at job start). A file the URI has newer and different — another host
   wrote the same name (Hugging Face's `save_on_each_node=True`) — is reported once and left to
   step 3. The wait lasts as long as files move (they change here, at the URI, or carry
   SageMaker's `.sagemaker-uploading` marker); after `SETTLE_IDLE_S` without a move, what is
   still missing is uploaded from here (the same bytes SageMaker's uploader would send), so every
   host's files are at the URI before any host restores;
2. **meet** — every host's restore waits for the others on algo-1's rendezvous store (the
   c10d TCPStore that torchrun's agents already share), so nobody downloads before the
   slowest host's uploads are in (`sm_dist.runtime.restore.meeting`);
3. **restore** — download what the URI has and the folder lacks (missing, another size, or
   written at the URI after the local copy), and delete what the URI no longer has (another
   host's retention deleted it). The URI is the truth, as at job start.

The URI is a `Remote` (`sm_dist.runtime.restore.remotes`): an S3 prefix, or a folder in local mode.

Under network isolation (``--peers``) the container has no S3: the folder is made what the hosts'
folders hold together instead, over the cluster network (`sm_dist.runtime.restore.peer_restore`).

A step that fails makes the exit code non-zero with the reason in one line (``--reason-file``):
the worker tries again, then refuses to start the script on a folder it could not restore.
sm_dist's own step folders (``step-000000120/``) are left alone: its checkpointer fetches only
the shards each rank needs. Files whose names SageMaker's uploader skips are never touched.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sm_dist.container.worker import RESTORE_SPLIT
from sm_dist.contract.checkpoint import parse_step
from sm_dist.contract.container import SYNC_IGNORE_SUFFIX, SYNC_UPLOADING_SUFFIX, sync_skipped, synced_files
from sm_dist.runtime.restore.meeting import MEET_TIMEOUT_S, meet, said_split, wait_seen
from sm_dist.runtime.restore.remotes import Entry, Remote, remote_for

_log = logging.getLogger("sm_dist.folder_restore")

#: Seconds without any of this host's missing files moving toward the URI (changing here, at the
#: URI, or carrying SageMaker's uploading marker) after which the restore uploads them itself.
#: SageMaker's uploader delay is undocumented (docs/PLATFORM.md §1.4); local mode's sync takes < 1 s.
SETTLE_IDLE_S = 15.0
#: The longest the settle waits even while files keep moving (a large checkpoint on its way).
SETTLE_LIMIT_S = 1800.0
#: Clock slack between this host's file times and S3's LastModified.
CLOCK_SLACK_S = 2.0
#: Files named in one conflict report.
REPORT_FILES = 3
_POLL_S = 0.5


def managed(rel: str) -> bool:
    """Files this restore looks after: not SageMaker's markers, not sm_dist's own step folders."""
    return not sync_skipped(rel) and parse_step(rel.split("/", 1)[0]) is None


def local_files(folder: Path) -> dict[str, os.stat_result]:
    """This host's files the restore looks after (`managed`)."""
    return {rel: st for rel, st in synced_files(folder).items() if managed(rel)}


@dataclass
class Settled:
    """What the settle found: files it uploaded itself, and files another host's copy won."""

    pushed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def _at_uri(rel: str, st: os.stat_result, entry: Entry | None, remote: Remote, folder: Path) -> str:
    """"there", "pending" (not at the URI as it is here) or "conflict" (the URI has another
    host's newer, different copy of this name)."""
    if entry is None:
        return "pending"
    if entry.size == st.st_size and entry.modified + CLOCK_SLACK_S >= st.st_mtime:
        return "there"  # uploaded after its last change here
    if entry.modified > st.st_mtime + CLOCK_SLACK_S:
        return "conflict"  # written at the URI after this host's copy, and another size
    if entry.size == st.st_size and remote.same(rel, entry, folder / rel):
        return "there"  # the same bytes (restored at job start: newer here, not changed)
    return "pending"


def pending(folder: Path, remote: Remote, conflicts: list[str] | None = None) -> list[str]:
    """This host's files not yet at the URI as they are here (`conflicts` collects the names
    whose URI copy is another host's)."""
    there = remote.list()
    out = []
    for rel, st in local_files(folder).items():
        verdict = _at_uri(rel, st, there.get(rel), remote, folder)
        if verdict == "pending":
            out.append(rel)
        elif verdict == "conflict" and conflicts is not None:
            conflicts.append(rel)
    return sorted(out)


def _moving(folder: Path, left: list[str], remote: Remote) -> tuple[tuple[object, ...], bool]:
    """A fingerprint of the missing files, which changes when one of them moves (here or at the
    URI), and whether SageMaker's uploader marks one as being uploaded."""
    there = remote.list()
    marks: list[object] = []
    uploading = False
    for rel in left:
        uploading = uploading or (folder / (rel + SYNC_UPLOADING_SUFFIX)).exists()
        try:
            st = (folder / rel).stat()
            marks.append((rel, st.st_size, st.st_mtime_ns, there.get(rel)))
        except OSError:
            marks.append((rel, None))
    return tuple(marks), uploading


def settle(folder: Path, remote: Remote, idle: float = SETTLE_IDLE_S, limit: float = SETTLE_LIMIT_S,
           sleep: Callable[[float], None] = time.sleep, push: bool = True) -> Settled:
    """Wait until this host's files are at the URI, as long as they move toward it; then upload
    the rest from here (`push`). Returns what was pushed and the names another host's copy won."""
    start = last_move = time.monotonic()
    seen: tuple[object, ...] | None = None
    out = Settled()
    while True:
        conflicts: list[str] = []
        left = pending(folder, remote, conflicts)
        out.conflicts = sorted(conflicts)
        if not left:
            return out
        now = time.monotonic()
        fingerprint, uploading = _moving(folder, left, remote)
        if fingerprint != seen or uploading:
            seen, last_move = fingerprint, now
        if now - last_move >= idle or now - start >= limit:
            if push:
                for rel in left:
                    with contextlib.suppress(FileNotFoundError):  # deleted since: nothing to send
                        remote.put(folder / rel, rel)
                out.pushed = left
            return out
        sleep(_POLL_S)


def restore(folder: Path, remote: Remote, delete: bool = True) -> tuple[list[str], list[str]]:
    """Download what the URI has newer or the folder lacks; delete what the URI lacks. Returns (got, deleted)."""
    there = {rel: e for rel, e in remote.list().items() if managed(rel)}
    here = local_files(folder)
    got = []
    for rel, entry in sorted(there.items()):
        st = here.get(rel)
        if st is not None and st.st_size == entry.size and (
                entry.modified <= st.st_mtime + CLOCK_SLACK_S or remote.same(rel, entry, folder / rel)):
            continue  # as new here as there, or the same bytes
        dest = folder / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".sm-dist-restore" + SYNC_IGNORE_SUFFIX)  # never uploaded half-written
        remote.get(rel, tmp)
        os.utime(tmp, (entry.modified, entry.modified))  # as old as the URI's copy: not "newer here"
        os.replace(tmp, dest)
        got.append(rel)
    deleted = []
    if delete:
        for rel in sorted(set(here) - set(there)):
            (folder / rel).unlink(missing_ok=True)
            deleted.append(rel)
    return got, deleted


class RestoreFailed(Exception):
    """A step of the restore failed; the message is the reason, in one line."""


def _names(names: Sequence[str]) -> str:
    more = len(names) - REPORT_FILES
    return ", ".join(names[:REPORT_FILES]) + (f" and {more} more" if more > 0 else "")


def run_peers(folder: Path, endpoint: str, hosts: Sequence[str], round_key: str, host: str, address: str,
              state: Path | None, outside: Sequence[str] = ()) -> int:
    """Under network isolation: the folder made what the hosts' folders hold together
    (`sm_dist.runtime.restore.peer_restore`), over the cluster network instead of S3."""
    from sm_dist.runtime.restore import peer_restore

    def bound(suffix: str, share: str, wait_for: Sequence[str] | None, timeout: float) -> tuple[list[str], dict[str, str]]:
        return meet(endpoint, round_key + suffix, hosts if wait_for is None else wait_for, host, timeout, share)

    shared, done = peer_restore.restore(folder, host, hosts, address or host, state, outside, bound,
                                        (MEET_TIMEOUT_S, SETTLE_LIMIT_S))
    if done.conflicts:
        _log.warning("%s: %s: another host wrote these names later (another size or time): more than one host "
                     "writes them into the checkpoint folder and the last write wins (Hugging Face: "
                     "save_on_each_node=True; save on one node, or give each host its own names); every host gets "
                     "the newest copy", host, _names(done.conflicts))
    split = said_split(shared, folder, host)
    if split:  # every host names the split before this one ends the job
        wait_seen(endpoint, round_key, shared, host)
    fetched = sum(held.size for _, held in done.fetch.values())
    _log.info("%s: checkpoint folder restored from the other hosts (network isolation: no S3 in the container): "
              "%d file(s) fetched (%.1f MiB), %d deleted", host, len(done.fetch), fetched / 2**20, len(done.delete))
    return RESTORE_SPLIT if split else 0


def run(folder: Path, uri: str, endpoint: str, hosts: Sequence[str], round_key: str, host: str,
        outside: Sequence[str] = ()) -> int:
    remote = remote_for(uri)
    settled = settle(folder, remote)
    if settled.pushed:
        _log.warning("%s: %d file(s) had not reached %s after %.0f s without progress (e.g. %s); uploaded them "
                     "from here", host, len(settled.pushed), uri, SETTLE_IDLE_S, settled.pushed[0])
    if settled.conflicts:
        _log.warning("%s: %s at %s is another host's copy (another size, written later): more than one host writes "
                     "this name into the checkpoint folder and the last upload wins (Hugging Face: "
                     "save_on_each_node=True; save on one node, or give each host its own names); every host gets "
                     "the URI's copy", host, _names(settled.conflicts), uri)
    missing, shared = meet(endpoint, round_key, hosts, host, share=json.dumps(sorted(outside)))
    if missing:
        raise RestoreFailed(f"{', '.join(missing)} did not reach the restore in {MEET_TIMEOUT_S:.0f} s")
    if said_split(shared, folder, host):  # the script is not started: nothing to download for it
        wait_seen(endpoint, round_key, shared, host)  # every host names the split before this one ends the job
        return RESTORE_SPLIT
    got, deleted = restore(folder, remote)
    _log.info("%s: checkpoint folder restored from %s: %d file(s) downloaded, %d deleted", host, uri, len(got),
              len(deleted))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sm_dist.runtime.restore.folder_restore")
    parser.add_argument("--folder", required=True, type=Path)
    parser.add_argument("--uri", required=True)
    parser.add_argument("--endpoint", default="")
    parser.add_argument("--hosts", default="", help="every host of the job, comma-separated")
    parser.add_argument("--round", default="0")
    parser.add_argument("--host", default="")
    parser.add_argument("--reason-file", type=Path, default=None, help="where a failure's one-line reason goes")
    parser.add_argument("--outside", default="[]", help="JSON list: this host's checkpoint-like files outside --folder")
    parser.add_argument("--peers", action="store_true", help="network isolation: restore from the other hosts, not S3")
    parser.add_argument("--address", default="", help="with --peers: this host's address for its peers")
    parser.add_argument("--state", type=Path, default=None, help="with --peers: PID 1's state folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[sm_dist worker] %(message)s", stream=sys.stderr)
    for noisy in ("botocore", "boto3", "s3transfer", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    hosts = [h for h in args.hosts.split(",") if h]
    from sm_dist.runtime.restore.peer_restore import PeerRestoreFailed

    try:
        if args.peers:
            return run_peers(args.folder, args.endpoint, hosts, args.round, args.host, args.address,
                             args.state, json.loads(args.outside))
        return run(args.folder, args.uri, args.endpoint, hosts, args.round, args.host, json.loads(args.outside))
    except Exception as exc:  # one line: the worker retries, then fails with it
        reason = str(exc) if isinstance(exc, (RestoreFailed, PeerRestoreFailed)) else f"{type(exc).__name__}: {exc}"
        reason = reason.splitlines()[0] if reason else type(exc).__name__
        _log.error("%s: checkpoint folder restore failed: %s", args.host, reason)
        if args.reason_file is not None:
            with contextlib.suppress(OSError):
                args.reason_file.write_text(reason, encoding="utf-8")
        return 1


if __name__ == "__main__":
    sys.exit(main())
