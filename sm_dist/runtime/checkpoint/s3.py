"""The "s3" storage: checkpoints read and written directly in s3://bucket/prefix.

Library choice: boto3's managed transfers (s3transfer). They do multipart uploads, parallel
parts and ranged downloads, and every request is retried by botocore's "standard" retry mode
(500, 503 SlowDown, throttling, dropped connections) — and boto3 is already the launch side's
dependency. s3torchconnector's DCP writer cannot take a custom endpoint (docs/PLATFORM.md §4.1), which
local mode needs, and modern s3fs pins botocore narrowly (docs/PLATFORM.md §4.2). The endpoint is boto3's
own: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL are honoured natively, so local mode points this at
moto on 127.0.0.1.

Protocol: each rank uploads its staged files; rank 0 writes ``manifest.json`` last with
``If-None-Match: *`` (a commit happens exactly once). S3 has no folders, so there is nothing to
"create" and no directory markers for ranks to race on (ray #47937). boto3 is imported inside
the functions that use it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from sm_dist.contract import transfer
from sm_dist.contract.checkpoint import (
    MANIFEST_NAME,
    Manifest,
    parse_step,
    step_dirname,
)
from sm_dist.errors import CheckpointError, ConfigError
from sm_dist.runtime.checkpoint.storage import Storage, verify_files

if TYPE_CHECKING:
    from boto3.s3.transfer import TransferConfig
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

_log = logging.getLogger(__name__)
_P = ParamSpec("_P")
_T = TypeVar("_T")

#: botocore "standard" retry mode attempts per request (AWS SDK default is 3; checkpoints are
#: worth waiting for — with exponential backoff capped at 20 s, 10 attempts span about a minute).
DEFAULT_MAX_ATTEMPTS = 10
#: The transfer settings the estimator prices too (sm_dist.contract.transfer): 8 MiB parts, 8 threads per rank.
DEFAULT_MULTIPART_THRESHOLD = transfer.MULTIPART_THRESHOLD_BYTES
DEFAULT_MAX_CONCURRENCY = transfer.MAX_CONCURRENCY


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split ``s3://bucket/prefix`` into (bucket, prefix without slashes at the ends)."""
    if not isinstance(uri, str) or not uri.startswith("s3://") or len(uri) <= 5:
        raise ConfigError("checkpoint.uri", uri, "expected s3://bucket/prefix")
    bucket, _, prefix = uri[5:].partition("/")
    if not bucket:
        raise ConfigError("checkpoint.uri", uri, "expected s3://bucket/prefix (the bucket is empty)")
    return bucket, prefix.strip("/")


def make_client(max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> S3Client:
    """An S3 client with standard retries; path-style addressing when an endpoint is overridden."""
    import boto3
    from botocore.config import Config

    override = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    config = Config(
        retries={"mode": "standard", "max_attempts": max_attempts},
        connect_timeout=10,
        read_timeout=60,
        s3={"addressing_style": "path"} if override else None,
    )
    return boto3.session.Session().client("s3", config=config)


def _cache_root(uri: str) -> Path:
    tag = hashlib.sha256(uri.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"sm_dist-ckpt-{os.getuid()}" / tag


class S3Storage(Storage):
    """Checkpoints under s3://bucket/prefix/step-NNNNNNNNN/."""

    def __init__(self, uri: str, *, client: S3Client | None = None, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
                 max_concurrency: int = DEFAULT_MAX_CONCURRENCY, local_root: str | os.PathLike[str] | None = None,
                 rank: int = 0) -> None:
        self.bucket, self.prefix = parse_s3_uri(uri)
        self.uri = uri.rstrip("/")
        self._client = client
        self._max_attempts = max_attempts
        self._multipart_threshold = multipart_threshold
        self._max_concurrency = max_concurrency
        self._local = Path(local_root) if local_root else _cache_root(self.uri)
        self._rank = rank

    @property
    def client(self) -> S3Client:
        if self._client is None:
            self._client = make_client(self._max_attempts)
        return self._client

    def _transfer_config(self) -> TransferConfig:
        from boto3.s3.transfer import TransferConfig

        return TransferConfig(multipart_threshold=self._multipart_threshold,
                              multipart_chunksize=max(5 << 20, self._multipart_threshold),
                              max_concurrency=self._max_concurrency)

    def _key(self, step: int, rel: str = "") -> str:
        parts = [self.prefix, step_dirname(step), rel] if self.prefix else [step_dirname(step), rel]
        return "/".join(p for p in parts if p) + ("/" if not rel else "")

    def _call(self, what: str, func: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run one boto3 call; turn its failures (after botocore's retries) into CheckpointError."""
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return func(*args, **kwargs)
        except (ClientError, BotoCoreError, Boto3Error) as exc:
            raise CheckpointError(f"{what} failed after retries: {exc}") from exc

    def stage_dir(self, step: int, rank: int) -> Path:
        path = self._local / "stage" / f"{step_dirname(step)}-rank{rank:05d}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def publish(self, step: int, src: Path, rel: str) -> None:
        key = self._key(step, rel)
        self._call(f"upload of s3://{self.bucket}/{key}", self.client.upload_file, str(src), self.bucket, key,
                   Config=self._transfer_config())

    def commit(self, step: int, text: str, midway: Callable[[], None] | None = None) -> None:
        from botocore.exceptions import ClientError

        key = self._key(step, MANIFEST_NAME)
        data = text.encode("utf-8")
        if midway is not None:
            midway()  # S3 PUTs are all-or-nothing: a crash here leaves no manifest at all
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*",
                                   ContentType="application/json")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "PreconditionFailed":
                raise CheckpointError(f"commit of s3://{self.bucket}/{key} failed: {exc}") from exc
            # a retried PUT whose first attempt succeeded lands here too: same bytes = our commit
            if self.read_manifest(step) != data:
                raise CheckpointError(f"s3://{self.bucket}/{key} already exists with other content; "
                                      "two jobs write to one checkpoint prefix — give each its own") from exc
        except Exception as exc:  # botocore transport errors after retries
            raise CheckpointError(f"commit of s3://{self.bucket}/{key} failed: {exc}") from exc

    def list_steps(self) -> list[int]:
        base = f"{self.prefix}/" if self.prefix else ""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base, Delimiter="/")
        steps = []
        for page in self._call(f"listing of {self.uri}", list, pages):
            for common in page.get("CommonPrefixes", []):
                step = parse_step(common["Prefix"][len(base):].rstrip("/"))
                if step is not None:
                    steps.append(step)
        return sorted(steps)

    def read_manifest(self, step: int) -> bytes | None:
        from botocore.exceptions import ClientError

        key = self._key(step, MANIFEST_NAME)
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise CheckpointError(f"reading s3://{self.bucket}/{key} failed: {exc}") from exc

    def _download(self, step: int, rels: list[str]) -> Path:
        folder = self._local / f"rank{self._rank:05d}" / step_dirname(step)
        for rel in rels:
            dest = folder / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            key = self._key(step, rel)
            self._call(f"download of s3://{self.bucket}/{key}", self.client.download_file, self.bucket, key,
                       str(dest), Config=self._transfer_config())
        return folder

    def verify(self, step: int, manifest: Manifest) -> list[str]:
        """Every file of the manifest is stored with its size: one listing, nothing downloaded.
        Each rank checks the sha256 of the files it reads when it fetches them (:meth:`local_copy`)."""
        try:
            sizes = self.sizes(step)
        except CheckpointError as exc:
            return [str(exc)]
        problems = []
        for rel, entry in manifest.files.items():
            if rel not in sizes:
                problems.append(f"{rel}: missing")
            elif sizes[rel] != entry.size:
                problems.append(f"{rel}: {sizes[rel]} bytes, manifest says {entry.size}")
        return problems

    def local_copy(self, step: int, manifest: Manifest, rels: list[str]) -> Path:
        """Download `rels` (only those not already here and intact) and check their sha256."""
        folder = self._local / f"rank{self._rank:05d}" / step_dirname(step)
        missing = [rel for rel in rels if verify_files(folder, manifest, [rel])]
        if missing:
            self._download(step, missing)
        problems = verify_files(folder, manifest, rels)
        if problems:
            raise CheckpointError(f"{self.uri}/{step_dirname(step)}: {'; '.join(problems)}")
        return folder

    def fetch_ranges(self, step: int, manifest: Manifest, rel: str, spans: list[tuple[int, int]]) -> Path:
        """Fetch only the blocks of `rel` that cover `spans` ((offset, length) pairs), each checked
        against the file's block index (itself checked against the manifest); the rest of the
        local file stays a hole. Without an index the whole file is fetched."""
        from sm_dist.runtime.checkpoint.save import BLOCKS_SUFFIX

        index_rel = rel + BLOCKS_SUFFIX
        if index_rel not in manifest.files:
            return self.local_copy(step, manifest, [rel])
        folder = self.local_copy(step, manifest, [index_rel])
        index = json.loads((folder / index_rel).read_text(encoding="utf-8"))
        size, block, digests = int(index["size"]), int(index["block_size"]), list(index["sha256"])
        if size != manifest.files[rel].size:
            raise CheckpointError(f"{self.uri}/{step_dirname(step)}/{index_rel}: size {size}, manifest says "
                                  f"{manifest.files[rel].size}")
        wanted = sorted({b for offset, length in spans for b in range(offset // block, (offset + max(length, 1) - 1)
                                                                          // block + 1)})
        dest = folder / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "wb") as handle:
            handle.truncate(size)
            for first, last in _runs(wanted):
                start, end = first * block, min(size, (last + 1) * block)
                data = self._get_range(step, rel, start, end)
                for b in range(first, last + 1):
                    chunk = data[(b - first) * block:(b - first + 1) * block]
                    if b >= len(digests) or hashlib.sha256(chunk).hexdigest() != digests[b]:
                        raise CheckpointError(f"{self.uri}/{step_dirname(step)}/{rel}: block {b} differs from "
                                              "its index (corrupted)")
                handle.seek(start)
                handle.write(data)
        return folder

    def _get_range(self, step: int, rel: str, start: int, end: int) -> bytes:
        key = self._key(step, rel)
        response = self._call(f"download of s3://{self.bucket}/{key}", self.client.get_object, Bucket=self.bucket,
                              Key=key, Range=f"bytes={start}-{end - 1}")
        data: bytes = self._call(f"download of s3://{self.bucket}/{key}", response["Body"].read)
        if len(data) != end - start:
            raise CheckpointError(f"s3://{self.bucket}/{key}: asked for {end - start} bytes at {start}, got {len(data)}")
        return data

    def release(self, step: int) -> None:
        """Drop this rank's downloaded copy of `step` (after it was loaded)."""
        shutil.rmtree(self._local / f"rank{self._rank:05d}" / step_dirname(step), ignore_errors=True)

    def sizes(self, step: int) -> dict[str, int]:
        """Relative path -> size of every object stored under the step folder."""
        base = self._key(step)
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base)
        return {obj["Key"][len(base):]: obj["Size"]
                for page in self._call(f"listing of {self.uri}", list, pages) for obj in page.get("Contents", [])}

    def delete(self, step: int) -> None:
        self._call("delete of a manifest", self.client.delete_object, Bucket=self.bucket,
                   Key=self._key(step, MANIFEST_NAME))
        keys = [self._key(step, rel) for rel in self.sizes(step)]
        for start in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            batch: list[ObjectIdentifierTypeDef] = [{"Key": k} for k in keys[start:start + 1000]]
            self._call("delete of an old checkpoint", self.client.delete_objects, Bucket=self.bucket,
                       Delete={"Objects": batch, "Quiet": True})

    def check_access(self) -> None:
        """List this checkpoint prefix (one key at most): the bucket exists and this role may list
        under the prefix. Not HeadBucket: that needs s3:ListBucket on the whole bucket, which a
        role scoped to a prefix (infra/sm-dist.yaml with Prefix=...) does not have."""
        self._call(f"access check of s3://{self.bucket}/{self.prefix} (does the bucket exist, may this role use the prefix?)",
                   self.client.list_objects_v2, Bucket=self.bucket, Prefix=f"{self.prefix}/" if self.prefix else "",
                   MaxKeys=1)


def _runs(blocks: list[int]) -> list[tuple[int, int]]:
    """Consecutive block numbers as (first, last) runs: one ranged GET each."""
    runs: list[tuple[int, int]] = []
    for b in blocks:
        if runs and runs[-1][1] == b - 1:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((b, b))
    return runs


__all__ = ["S3Storage", "make_client", "parse_s3_uri"]
