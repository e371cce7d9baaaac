"""A sharded S3 checkpoint moves only each rank's share: 4 real gloo ranks, fsdp, moto on 127.0.0.1.

Save: every rank uploads only its own files (rank 0 also the DCP metadata, common state and the
manifest). Restore: every rank downloads its DCP shard whole, the metadata, its small files and
only the blocks of rank 0's file that hold replicated entries (optimizer steps, param groups) —
at most a quarter of the step plus the metadata, plus 10% — and ends with the saved state.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sm_dist.contract.checkpoint import MANIFEST_NAME, step_dirname
from sm_dist.local.s3_endpoint import S3Endpoint

pytestmark = pytest.mark.slow  # starts processes (tests/_process_guard.py)

boto3 = pytest.importorskip("boto3")
WORKER = Path(__file__).with_name("restore_bytes_worker.py")
WORLD = 4
_LAUNCHER_VARS = re.compile(r"^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|ROLE_.*|"
                            r"MASTER_ADDR|MASTER_PORT|TORCHELASTIC_.*|SM_.*|SLURM_.*|AWS_.*)$")


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[str, str]]:
    """(endpoint URL, bucket) on a moto server of this module's own."""
    with S3Endpoint(faults=False) as endpoint:
        bucket = f"bytes-{uuid.uuid4().hex[:10]}"
        client = boto3.client("s3", endpoint_url=endpoint.url, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_bucket(Bucket=bucket)
        yield endpoint.url, bucket


def _env(url: str, rank: int, port: int) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not _LAUNCHER_VARS.match(key)}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL=url,
               RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_WORLD_SIZE=str(WORLD),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return env


def _run(phase: str, url: str, uri: str, out: Path) -> list[dict]:
    """`WORLD` ranks of the worker; their records, rank order."""
    out.mkdir(parents=True, exist_ok=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, str(WORKER), phase, uri, str(out)], env=_env(url, rank, port),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in range(WORLD)]
    try:
        outputs = [proc.communicate(timeout=600)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert [proc.returncode for proc in procs] == [0] * WORLD, "\n".join(outputs)[-4000:]
    return [json.loads((out / f"{phase}-rank{rank}.json").read_text()) for rank in range(WORLD)]


def _own(rank: int) -> re.Pattern[str]:
    """Files rank `rank` writes: its DCP shard(s) and RNG file; rank 0 also metadata, common, manifest."""
    shared = r"|model/\.metadata|common\.pt|manifest\.json" if rank == 0 else ""
    return re.compile(rf"(model/__{rank}_\d+\.distcp(\.blocks\.json)?|rng/rank-{rank:05d}\.pt{shared})")


def test_each_rank_uploads_its_own_files_and_downloads_only_its_share(s3, tmp_path):
    url, bucket = s3
    uri = f"s3://{bucket}/run"
    saved = _run("save", url, uri, tmp_path / "save")

    prefix = f"run/{step_dirname(1)}/"
    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    manifest = json.loads(client.get_object(Bucket=bucket, Key=prefix + MANIFEST_NAME)["Body"].read())
    sizes = {rel: entry["size"] for rel, entry in manifest["files"].items()}
    assert manifest["sharded"] and {f"model/__{r}_0.distcp" for r in range(WORLD)} <= set(sizes)

    for record in saved:  # save: a rank's uploads are its own files, all of them land exactly once
        rels = [key.removeprefix(prefix) for key in record["written"]]
        assert rels and all(_own(record["rank"]).fullmatch(rel) for rel in rels), (record["rank"], rels)
    uploaded = sorted(key.removeprefix(prefix) for record in saved for key in record["written"])
    assert uploaded == sorted([*sizes, MANIFEST_NAME])

    restored = _run("restore", url, uri, tmp_path / "restore")
    step_bytes = sum(sizes.values())
    metadata = sizes["model/.metadata"]
    limit = (step_bytes / WORLD + metadata) * 1.10
    per_rank = []
    for record in restored:
        rank = record["rank"]
        assert record["step"] == 1 and record["sha"] == saved[rank]["sha"]  # the saved state, exactly
        read = {key.removeprefix(prefix): n for key, n in record["read"].items()}
        own = f"model/__{rank}_0.distcp"
        assert read[own] == sizes[own] and "model/.metadata" in read, (rank, read)  # its share, whole
        others = {rel: n for rel, n in read.items() if rel.endswith(".distcp") and rel != own}
        assert all(n < sizes[rel] / 2 for rel, n in others.items()), (rank, others)  # verified blocks only
        per_rank.append(sum(read.values()))
    print(f"\nstep {step_bytes} B, metadata {metadata} B, limit {limit:.0f} B/rank, read per rank {per_rank}, "
          f"max ratio to step/{WORLD}: {max(per_rank) / (step_bytes / WORLD):.3f}")
    assert max(per_rank) <= limit
