"""Make a host's checkpoint folder what SageMaker would restore into it, before restarted workers start.

Run by `sm_dist.container.worker` on each host's local rank 0 when torchrun restarts the workers
(``python -m sm_dist.runtime.checkpoint.folder_restore --folder F --uri U ...``). Three steps:

1. **settle** — wait until every file of this host's folder is at the URI (same size, uploaded
   after its last change): SageMaker's uploader works asynchronously, so the newest checkpoint
   may still be on its way;
2. **meet** — every host's restore waits for the others on algo-1's rendezvous store (the
   c10d TCPStore that torchrun's agents already share), so nobody downloads before the
   slowest host's uploads are in;
3. **restore** — download what the URI has and the folder lacks (missing, another size, or
   written at the URI after the local copy), and delete what the URI no longer has (another
   host's retention deleted it). The URI is the truth, as at job start.

sm_dist's own step folders (``step-000000120/``) are left alone: its checkpointer fetches only
the shards each rank needs. Files whose names SageMaker's uploader skips are never touched.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sm_dist.contract.checkpoint import parse_step
from sm_dist.contract.container import PARTIAL_SUFFIX, SYNC_IGNORE_SUFFIX, sync_skipped, synced_files

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_log = logging.getLogger("sm_dist.folder_restore")

#: How long to wait for this host's files to reach the URI (SageMaker uploads asynchronously;
#: its delay is undocumented, docs/PLATFORM.md §1.4).
SETTLE_TIMEOUT_S = 300.0
#: How long to wait for the other hosts at the rendezvous store.
MEET_TIMEOUT_S = 600.0
#: Clock slack between this host's file times and S3's LastModified.
CLOCK_SLACK_S = 2.0
_POLL_S = 0.5


#: boto3's default multipart part size (docs/PLATFORM.md §4.3): the ETag of a file uploaded in parts of it.
ETAG_PART_BYTES = 8 << 20


@dataclass(frozen=True)
class Entry:
    """A file at the URI: size in bytes, when it was written there (Unix seconds), S3's ETag."""

    size: int
    modified: float
    etag: str | None = None


class Remote(Protocol):
    """The checkpoint URI: an S3 prefix, or a folder (local mode's --local-checkpoints)."""

    def list(self) -> dict[str, Entry]: ...

    def get(self, key: str, dest: Path) -> None: ...

    def same(self, key: str, entry: Entry, path: Path) -> bool:
        """Whether `path` holds the bytes of `key` (False when it cannot tell)."""
        ...


def s3_etag(path: Path, part_bytes: int = ETAG_PART_BYTES) -> str:
    """The ETag S3 gives `path` uploaded whole (its md5) or in parts of `part_bytes` (md5 of the parts' md5s)."""
    import hashlib

    digests = []
    with open(path, "rb") as f:
        while chunk := f.read(part_bytes):
            digests.append(hashlib.md5(chunk, usedforsecurity=False).digest())
    if len(digests) <= 1:
        return (digests[0] if digests else hashlib.md5(b"", usedforsecurity=False).digest()).hex()
    return f"{hashlib.md5(b''.join(digests), usedforsecurity=False).hexdigest()}-{len(digests)}"


class S3Remote:
    def __init__(self, uri: str, client: S3Client | None = None) -> None:
        from sm_dist.runtime.checkpoint.s3 import make_client, parse_s3_uri

        self.bucket, self.prefix = parse_s3_uri(uri)
        self.client = client or make_client()

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def list(self) -> dict[str, Entry]:
        found: dict[str, Entry] = {}
        base = f"{self.prefix}/" if self.prefix else ""
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(base):]
                if rel and not rel.endswith("/"):
                    found[rel] = Entry(int(obj["Size"]), obj["LastModified"].timestamp(), obj.get("ETag", "").strip('"'))
        return found

    def get(self, key: str, dest: Path) -> None:
        self.client.download_file(self.bucket, self._key(key), str(dest))

    def same(self, key: str, entry: Entry, path: Path) -> bool:
        # a file this host wrote itself, uploaded whole or in boto3's default parts; another
        # uploader's part size gives another ETag, and the file is downloaded again (correct, slower)
        return bool(entry.etag) and s3_etag(path) == entry.etag


class FolderRemote:
    def __init__(self, path: Path) -> None:
        self.path = path

    def list(self) -> dict[str, Entry]:
        if not self.path.is_dir():
            return {}
        found = {}
        for p in self.path.rglob("*"):
            if p.is_file() and not p.name.endswith(PARTIAL_SUFFIX):
                st = p.stat()
                found[p.relative_to(self.path).as_posix()] = Entry(st.st_size, st.st_mtime)
        return found

    def get(self, key: str, dest: Path) -> None:
        import shutil

        shutil.copyfile(self.path / key, dest)

    def same(self, key: str, entry: Entry, path: Path) -> bool:
        import filecmp

        return filecmp.cmp(self.path / key, path, shallow=False)


def remote_for(uri: str) -> Remote:
    if uri.startswith("s3://"):
        return S3Remote(uri)
    return FolderRemote(Path(uri[len("file://"):] if uri.startswith("file://") else uri))


def managed(rel: str) -> bool:
    """Files this restore looks after: not SageMaker's markers, not sm_dist's own step folders."""
    return not sync_skipped(rel) and parse_step(rel.split("/", 1)[0]) is None


def local_files(folder: Path) -> dict[str, os.stat_result]:
    """This host's files the restore looks after (`managed`)."""
    return {rel: st for rel, st in synced_files(folder).items() if managed(rel)}


def pending(folder: Path, remote: Remote) -> list[str]:
    """This host's files not yet at the URI as they are here."""
    there = remote.list()
    out = []
    for rel, st in local_files(folder).items():
        entry = there.get(rel)
        if entry is None or entry.size != st.st_size or entry.modified + CLOCK_SLACK_S < st.st_mtime:
            out.append(rel)
    return sorted(out)


def settle(folder: Path, remote: Remote, timeout: float = SETTLE_TIMEOUT_S,
           sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Wait until this host's files are at the URI; return those still missing at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        left = pending(folder, remote)
        if not left or time.monotonic() >= deadline:
            return left
        sleep(_POLL_S)


def meet(endpoint: str, key: str, hosts: int, timeout: float = MEET_TIMEOUT_S) -> bool:
    """Wait on the rendezvous store until `hosts` restores arrived for `key`; False at the timeout."""
    if hosts <= 1 or not endpoint:
        return True
    from datetime import timedelta

    from torch.distributed import TCPStore

    host, _, port = endpoint.rpartition(":")
    store = TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=timeout))
    counter = f"sm_dist/folder_restore/{key}"
    store.add(counter, 1)
    deadline = time.monotonic() + timeout
    while store.add(counter, 0) < hosts:
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


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


def run(folder: Path, uri: str, endpoint: str, hosts: int, round_key: str, host: str) -> int:
    remote = remote_for(uri)
    left = settle(folder, remote)
    if left:
        _log.warning("%s: %d file(s) not at %s after %.0f s (e.g. %s); they are kept", host, len(left), uri,
                     SETTLE_TIMEOUT_S, left[0])
    if not meet(endpoint, round_key, hosts):
        _log.warning("%s: not every host reached the restore in %.0f s; restoring anyway", host, MEET_TIMEOUT_S)
    got, deleted = restore(folder, remote, delete=not left)
    _log.info("%s: checkpoint folder restored from %s: %d file(s) downloaded, %d deleted", host, uri, len(got),
              len(deleted))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sm_dist.runtime.checkpoint.folder_restore")
    parser.add_argument("--folder", required=True, type=Path)
    parser.add_argument("--uri", required=True)
    parser.add_argument("--endpoint", default="")
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--round", default="0")
    parser.add_argument("--host", default="")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[sm_dist worker] %(message)s", stream=sys.stderr)
    for noisy in ("botocore", "boto3", "s3transfer", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return run(args.folder, args.uri, args.endpoint, args.hosts, args.round, args.host)
    except Exception as exc:  # the script still starts; say why the folder may be stale
        _log.error("%s: checkpoint folder restore failed: %s: %s", args.host, type(exc).__name__, exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
