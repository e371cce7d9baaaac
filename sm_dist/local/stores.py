"""Where the emulated CheckpointConfig.S3Uri lives: a local folder or s3:// on a local endpoint.

A store holds files by relative key ("step-10/__0_0.distcp"). The checkpoint sync only needs
list / put / get / delete, so both kinds share that small interface.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sm_dist.contract.container import PARTIAL_SUFFIX
from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_log = logging.getLogger(__name__)
#: Suffix of a file being copied into a FolderStore (never listed; the contract's).
_PARTIAL = PARTIAL_SUFFIX


class Store(Protocol):
    """The four operations checkpoint sync needs."""

    uri: str

    def list(self) -> dict[str, int]:
        """Every key under the prefix -> its size in bytes."""

    def written_since(self, since: float) -> tuple[str, ...]:
        """Keys written (last modified) at or after `since`, Unix seconds."""

    def put(self, src: Path, key: str) -> None:
        """Upload the file `src` as `key`."""

    def get(self, key: str, dest: Path) -> None:
        """Download `key` to the file `dest` (parents created)."""

    def delete(self, key: str) -> None:
        """Remove `key` (no error if absent)."""


class FolderStore:
    """A local folder playing the part of the S3 prefix."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.uri = str(path)

    def list(self) -> dict[str, int]:
        if not self.path.is_dir():
            return {}
        return {
            p.relative_to(self.path).as_posix(): p.stat().st_size
            for p in self.path.rglob("*")
            if p.is_file() and not p.name.endswith(_PARTIAL)
        }

    def written_since(self, since: float) -> tuple[str, ...]:
        if not self.path.is_dir():
            return ()
        return tuple(sorted(p.relative_to(self.path).as_posix() for p in self.path.rglob("*")
                            if p.is_file() and not p.name.endswith(_PARTIAL) and p.stat().st_mtime >= since))

    def put(self, src: Path, key: str) -> None:
        dest = self.path / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + _PARTIAL)
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)  # an S3 PUT is all-or-nothing; so is this

    def get(self, key: str, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.path / key, dest)

    def delete(self, key: str) -> None:
        (self.path / key).unlink(missing_ok=True)


class S3Store:
    """s3://bucket/prefix through boto3 (imported here: local mode is on the launch side)."""

    def __init__(self, uri: str, endpoint_url: str | None, client: S3Client | None = None) -> None:
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        if not uri.startswith("s3://") or not bucket:
            raise ConfigError("checkpoint_uri", uri, "expected s3://bucket/prefix")
        self.uri = uri
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        if client is None:
            import boto3
            from botocore.config import Config

            # one attempt: the sync loop itself retries on its next pass, and s3-faults chaos
            # wants to see errors rather than have botocore hide them
            config = Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=30)
            client = boto3.client("s3", endpoint_url=endpoint_url, config=config)
        self.client = client

    def list(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
            for obj in page.get("Contents", []):
                found[obj["Key"][len(self.prefix):]] = int(obj["Size"])
        return found

    def written_since(self, since: float) -> tuple[str, ...]:
        # LastModified has whole seconds: an object written in the second `since` falls in counts
        found: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
            found += [obj["Key"][len(self.prefix):] for obj in page.get("Contents", [])
                      if obj["LastModified"].timestamp() >= int(since)]
        return tuple(sorted(found))

    def put(self, src: Path, key: str) -> None:
        self.client.upload_file(str(src), self.bucket, self.prefix + key)

    def get(self, key: str, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.client.download_file(self.bucket, self.prefix + key, str(dest))

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + key)


def written_since(store: Store | None, since: float) -> bool | None:
    """Whether anything reached the checkpoint URI since `since` (a chain's decision after a MaxRuntime stop)."""
    if store is None:
        return None
    try:
        return bool(store.written_since(since))
    except Exception as exc:  # as the cloud supervisor: a listing that fails leaves the decision as it was
        _log.warning("cannot list %s: %s", store.uri, exc)
        return None


def open_store(uri: str, endpoint_url: str | None = None) -> Store:
    """A store for a checkpoint URI: s3://... (on `endpoint_url`) or a local folder path."""
    if uri.startswith("s3://"):
        return S3Store(uri, endpoint_url)
    if "://" in uri:
        raise ConfigError("checkpoint_uri", uri, "use s3://bucket/prefix or a local folder path")
    return FolderStore(Path(uri).expanduser().resolve())
