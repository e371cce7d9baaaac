"""The checkpoint URI as the in-job restore sees it: an S3 prefix, or a folder (local mode's --local-checkpoints).

A `Remote` lists what the URI holds (size, time written, S3's ETag), downloads and uploads one file,
and tells whether a local file holds an object's bytes (`same`: S3's ETag rule, docs/PLATFORM.md §4.3;
a byte comparison for a folder). `remote_for` picks one from the URI. Used by the restore
(`sm_dist.runtime.restore.folder_restore`) and by the failure watch's question to the URI
(`sm_dist.runtime.restore.written_since`).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sm_dist.contract.container import PARTIAL_SUFFIX

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

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

    def put(self, path: Path, key: str) -> None: ...

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

    def put(self, path: Path, key: str) -> None:
        self.client.upload_file(str(path), self.bucket, self._key(key))

    def same(self, key: str, entry: Entry, path: Path) -> bool:
        # a file this host wrote itself, uploaded whole or in boto3's default parts; another
        # uploader's part size gives another ETag, and the file is downloaded again (correct, slower)
        if not entry.etag:
            return False
        st = path.stat()
        return _etag_of(str(path), st.st_size, st.st_mtime_ns) == entry.etag


@functools.lru_cache(maxsize=4096)
def _etag_of(path: str, _size: int, _mtime_ns: int) -> str:
    """`s3_etag` of one version of a file (the settle asks every poll: hashed once per version)."""
    return s3_etag(Path(path))


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

    def put(self, path: Path, key: str) -> None:
        import shutil

        dest = self.path / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + PARTIAL_SUFFIX)
        shutil.copyfile(path, tmp)
        os.replace(tmp, dest)

    def same(self, key: str, entry: Entry, path: Path) -> bool:
        import filecmp

        return filecmp.cmp(self.path / key, path, shallow=False)


def remote_for(uri: str) -> Remote:
    if uri.startswith("s3://"):
        return S3Remote(uri)
    return FolderRemote(Path(uri[len("file://"):] if uri.startswith("file://") else uri))

