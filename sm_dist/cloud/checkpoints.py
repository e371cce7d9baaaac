"""The cloud job's checkpoints: step folders in S3, newest first, read without torch.

Layout (`sm_dist.contract.checkpoint`): `<uri>/step-000000120/` per step, and a
step is a checkpoint only once rank 0 wrote `manifest.json` into it last and that manifest parses
(`sm_dist.contract.checkpoint.committed_manifest`, the loader's own rule). Folders without one are
in-flight or abandoned saves and are listed as not committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sm_dist.contract.checkpoint import MANIFEST_NAME, committed_manifest, parse_step
from sm_dist.contract.job import CheckpointList, checkpoint_info

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, (key.rstrip("/") + "/") if key else ""


def _step_prefixes(s3: S3Client, bucket: str, prefix: str) -> list[tuple[int, str]]:
    steps = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        for common in page.get("CommonPrefixes", []):
            step = parse_step(common["Prefix"][len(prefix):])
            if step is not None:
                steps.append((step, common["Prefix"]))
    return steps


def _manifest_bytes(s3: S3Client, bucket: str, key: str) -> bytes | None:
    from botocore.exceptions import ClientError

    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise


def list_checkpoints(s3: S3Client, uri: str) -> CheckpointList:
    """Every step folder under `uri`, newest first; committed = its manifest is there and parses."""
    bucket, prefix = _split(uri)
    out = CheckpointList()
    for step, step_prefix in sorted(_step_prefixes(s3, bucket, prefix), reverse=True):
        key = step_prefix + MANIFEST_NAME
        manifest = committed_manifest(_manifest_bytes(s3, bucket, key), where=f"s3://{bucket}/{key}")
        out.append(checkpoint_info(step, f"s3://{bucket}/{step_prefix}", manifest))
    return out


__all__ = ["list_checkpoints"]
