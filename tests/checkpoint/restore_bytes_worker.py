"""One rank of the restore-bytes test: fsdp save or restore through S3, counting what it moves.

Run with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT and AWS_ENDPOINT_URL set;
`python restore_bytes_worker.py save|restore s3://bucket/prefix OUT_DIR`. Every S3 object this
rank's client reads (GetObject: key and bytes) or writes (PutObject/CreateMultipartUpload: key)
is counted by botocore event hooks on the client the storage uses, and written to
OUT_DIR/<phase>-rank<R>.json with the sha256 of the full model and optimizer state.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import torch
from torch import nn
from train_script import state_sha  # the same state hash the other checkpoint tests use (this folder is on sys.path)

from sm_dist import runtime
from sm_dist.runtime.checkpoint import Checkpointer, S3Storage
from sm_dist.runtime.checkpoint.s3 import make_client

WIDTH = 384  # 6 layers of 384x384: ~3.5 MB of weights, ~10.6 MB with AdamW's two moments
LAYERS = 6


def build_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*(nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)))


class Counter:
    """Hooks on one boto3 client: bytes read per key, keys written."""

    def __init__(self, client: Any, bucket: str) -> None:
        self.bucket = bucket
        self.read: dict[str, int] = defaultdict(int)
        self.written: set[str] = set()
        events = client.meta.events
        events.register("after-call.s3.GetObject", self._on_get)
        for op in ("PutObject", "CreateMultipartUpload"):
            events.register(f"provide-client-params.s3.{op}", self._on_put)

    def _on_get(self, http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
        path = unquote(urlsplit(http_response.url).path).lstrip("/")
        key = path[len(self.bucket) + 1:] if path.startswith(self.bucket + "/") else path
        self.read[key] += int(parsed.get("ContentLength") or 0)

    def _on_put(self, params: dict[str, Any], **_: Any) -> None:
        self.written.add(params["Key"])


def main() -> int:
    phase, uri, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    logging.basicConfig(level=logging.WARNING, format=f"rank{os.environ.get('RANK')} %(name)s: %(message)s")
    torch.set_num_threads(1)
    with runtime.init(strategy="fsdp", seed=0, timeout=120) as ctx:
        model = ctx.wrap_model(build_model())
        optimizer = ctx.build_optimizer(model, lambda params: torch.optim.AdamW(params, lr=1e-2))
        client = make_client()
        storage = S3Storage(uri, client=client, rank=ctx.rank, local_root=out / "cache")
        counter = Counter(client, storage.bucket)
        with Checkpointer(ctx, storage=storage) as ckpt:
            if phase == "save":
                model(torch.randn(4, WIDTH)).sum().backward()
                optimizer.step()
                ckpt.save(1, model=model, optimizer=optimizer)
                resumed = 1
            else:
                state = ckpt.resume(model=model, optimizer=optimizer)
                resumed = state.step if state else 0
        sha = state_sha(ctx, model, optimizer)
        record = {"rank": ctx.rank, "step": resumed, "sha": sha, "read": counter.read,
                  "written": sorted(counter.written)}
        (out / f"{phase}-rank{ctx.rank}.json").write_text(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
