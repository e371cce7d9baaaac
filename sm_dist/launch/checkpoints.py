"""Committed checkpoints of a job in S3, newest first, read without torch.

Layout (docs/ARCHITECTURE.md, checkpoint contract): `<uri>/step-000000120/` per step, and a
step is a checkpoint only once rank 0 wrote `manifest.json` into it last. Folders without a
manifest are in-flight or abandoned saves and are listed as not committed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MANIFEST_NAME = "manifest.json"
_STEP = re.compile(r"^step-(\d{9,})/$")


@dataclass(frozen=True)
class CheckpointInfo:
    """One step folder under the checkpoint URI."""

    step: int
    uri: str
    committed: bool
    total_bytes: int | None = None
    """Sum of the file sizes the manifest lists."""
    files: int | None = None
    world_size: int | None = None
    strategy: str | None = None
    created_unix: float | None = None


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, (key.rstrip("/") + "/") if key else ""


def _step_prefixes(s3: Any, bucket: str, prefix: str) -> list[tuple[int, str]]:
    steps = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        for common in page.get("CommonPrefixes", []):
            match = _STEP.match(common["Prefix"][len(prefix):])
            if match:
                steps.append((int(match.group(1)), common["Prefix"]))
    return steps


def _manifest(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def list_checkpoints(s3: Any, uri: str) -> list[CheckpointInfo]:
    """Every step folder under `uri`, newest first; committed = has a manifest."""
    bucket, prefix = _split(uri)
    out = []
    for step, step_prefix in sorted(_step_prefixes(s3, bucket, prefix), reverse=True):
        manifest = _manifest(s3, bucket, step_prefix + MANIFEST_NAME)
        info = manifest or {}
        files = info.get("files") if isinstance(info.get("files"), dict) else {}
        sizes = [f.get("size", 0) for f in files.values() if isinstance(f, dict)]
        out.append(CheckpointInfo(
            step=step, uri=f"s3://{bucket}/{step_prefix}", committed=manifest is not None,
            total_bytes=sum(sizes) if manifest is not None else None, files=len(files) if manifest is not None else None,
            world_size=info.get("world_size"), strategy=info.get("strategy"), created_unix=info.get("created_unix"),
        ))
    return out


__all__ = ["CheckpointInfo", "list_checkpoints"]
