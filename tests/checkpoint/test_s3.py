"""The "s3" storage against moto's HTTP server on 127.0.0.1, with and without injected faults."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
import torch
from torch import nn

from sm_dist.contract.checkpoint import step_dirname
from sm_dist.errors import CheckpointError
from sm_dist.local.s3_endpoint import S3Endpoint, fault_stats
from sm_dist.runtime.checkpoint import Checkpointer, S3Storage

boto3 = pytest.importorskip("boto3")
MiB = 1 << 20


@pytest.fixture(scope="module")
def endpoint() -> Iterator[S3Endpoint]:
    """moto behind the fault proxy, for this module."""
    with S3Endpoint(faults=True) as ep:
        yield ep


@pytest.fixture
def bucket(endpoint, aws_credentials, monkeypatch) -> Iterator[str]:
    """A fresh bucket on the proxied endpoint (AWS_ENDPOINT_URL points at it); faults cleared."""
    endpoint.set_faults(None)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint.url)
    name = f"ckpt-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    yield name
    endpoint.set_faults(None)


def _model(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = nn.Linear(512, 2048)  # 4 MiB of weights + 4 MiB momentum: a two-part upload
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 512)).sum().backward()
    optimizer.step()
    return model, optimizer


def _storage(bucket: str, **kwargs: object) -> S3Storage:
    return S3Storage(f"s3://{bucket}/run", multipart_threshold=5 * MiB, **kwargs)  # S3's minimum part size


def _resumed(bucket: str) -> tuple[object, nn.Module]:
    model, optimizer = _model(seed=1)
    with Checkpointer(storage=_storage(bucket)) as ckpt:
        return ckpt.resume(model=model, optimizer=optimizer), model


def test_roundtrip_through_aws_endpoint_url_s3_with_multipart(moto_endpoint, aws_credentials, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)  # boto3's own variable, no proxy
    name = f"ckpt-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3")
    client.create_bucket(Bucket=name)
    model, optimizer = _model()
    with Checkpointer(storage=_storage(name)) as ckpt:
        ckpt.save(1, model=model, optimizer=optimizer)
    head = client.head_object(Bucket=name, Key=f"run/{step_dirname(1)}/model/full.pt")
    assert head["ContentLength"] > 5 * MiB and head["ETag"].strip('"').endswith("-2")  # two parts
    state, restored = _resumed(name)
    assert state.step == 1 and torch.equal(model.weight, restored.weight)


@pytest.mark.parametrize("kind", ["500", "503", "drop"])
def test_transient_faults_are_retried_to_a_commit(endpoint, bucket, kind):
    model, optimizer = _model()
    before = endpoint.plan.stats()["injected"]
    with Checkpointer(storage=_storage(bucket)) as ckpt:
        endpoint.set_faults(kind, count=2)
        ckpt.save(1, model=model, optimizer=optimizer)
    assert endpoint.plan.stats()["injected"] - before == 2
    state, restored = _resumed(bucket)
    assert state.step == 1 and torch.equal(model.weight, restored.weight)


def test_faults_during_a_multipart_upload_are_retried(endpoint, bucket):
    model, optimizer = _model()
    before = endpoint.plan.stats()["injected"]
    with Checkpointer(storage=_storage(bucket)) as ckpt:
        endpoint.set_faults("500", count=3, methods=["PUT"])  # part uploads and small PUTs
        ckpt.save(1, model=model, optimizer=optimizer)
    assert endpoint.plan.stats()["injected"] - before == 3
    assert _resumed(bucket)[0].step == 1


@pytest.mark.parametrize("blocking", [True, False])
def test_persistent_upload_failure_is_a_clear_error_and_nothing_is_committed(endpoint, bucket, blocking):
    model, optimizer = _model()
    ckpt = Checkpointer(storage=_storage(bucket, max_attempts=2))
    ckpt.save(1, model=model, optimizer=optimizer)
    endpoint.set_faults("503", seconds=600, methods=["PUT", "POST"])  # reads work, writes never do
    with pytest.raises(CheckpointError, match="not committed.*SlowDown"):
        ckpt.save(2, model=model, optimizer=optimizer, blocking=blocking)
        ckpt.wait()
    endpoint.set_faults(None)
    ckpt.close()
    storage = _storage(bucket)
    assert storage.read_manifest(2) is None
    assert _resumed(bucket)[0].step == 1


def test_the_commit_is_written_exactly_once(bucket):
    storage = _storage(bucket)
    storage.commit(5, '{"a": 1}\n')
    storage.commit(5, '{"a": 1}\n')  # a retried PUT of the same commit is fine
    with pytest.raises(CheckpointError, match="already exists"):
        storage.commit(5, '{"a": 2}\n')


def test_missing_bucket_fails_early_with_the_bucket_named(bucket):
    with pytest.raises(CheckpointError, match="no-such-bucket-here"):
        Checkpointer(storage=S3Storage("s3://no-such-bucket-here/x", max_attempts=1))


@pytest.mark.slow
def test_faults_can_be_switched_from_another_process(endpoint, bucket):
    code = ("import sys; from sm_dist.local.s3_endpoint import set_faults; "
            "set_faults(sys.argv[1], '503', count=2)")
    before = fault_stats(endpoint.url)["injected"]
    subprocess.run([sys.executable, "-c", code, endpoint.url], check=True, timeout=120)
    assert fault_stats(endpoint.url)["kind"] == "503"
    boto3.client("s3").head_bucket(Bucket=bucket)  # retried through both SlowDowns
    stats = fault_stats(endpoint.url)
    assert stats["injected"] - before == 2 and stats["kind"] is None


def test_unreachable_s3_at_resume_is_an_error_not_a_fresh_start(endpoint, bucket):
    model, optimizer = _model()
    with Checkpointer(storage=_storage(bucket)) as ckpt:
        ckpt.save(1, model=model, optimizer=optimizer)
    ckpt = Checkpointer(storage=_storage(bucket, max_attempts=1))
    endpoint.set_faults("500", seconds=600)
    with pytest.raises(CheckpointError, match="cannot look for checkpoints"):
        ckpt.resume(model=model, optimizer=optimizer)  # starting over would silently lose the run
    endpoint.set_faults(None)
    ckpt.close()


def test_an_altered_object_in_the_bucket_is_skipped_with_a_warning(bucket, caplog):
    model, optimizer = _model()
    with Checkpointer(storage=_storage(bucket)) as ckpt:
        ckpt.save(1, model=model, optimizer=optimizer)
        ckpt.save(2, model=model, optimizer=optimizer)
    key = f"run/{step_dirname(2)}/rng/rank-00000.pt"
    client = boto3.client("s3")
    data = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    data[-10] ^= 0xFF  # same size, other bytes
    client.put_object(Bucket=bucket, Key=key, Body=bytes(data))
    with caplog.at_level("WARNING"):
        assert _resumed(bucket)[0].step == 1
    assert "rng/rank-00000.pt: sha256 differs" in caplog.text


class _ShardedPlain:
    """Strategy stand-in that takes the DCP (sharded) path without a process group."""

    sharded = True
    name = "test-sharded"

    def state_dict(self, model, optimizer):
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, optim_sd = get_state_dict(model, optimizer)
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, model, optimizer, state):
        from torch.distributed.checkpoint.state_dict import set_state_dict

        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def _sharded_step(bucket: str) -> tuple[S3Storage, object, str, bytes]:
    """A DCP checkpoint of step 1 in S3: (storage, manifest, data file, its bytes)."""
    from sm_dist.contract.checkpoint import Manifest

    model, optimizer = _model()
    with Checkpointer(storage=_storage(bucket), strategy=_ShardedPlain()) as ckpt:
        ckpt.save(1, model=model, optimizer=optimizer)
    storage = _storage(bucket)
    manifest = Manifest.from_json(storage.read_manifest(1), where="test")
    rel = "model/__0_0.distcp"
    assert rel + ".blocks.json" in manifest.files
    data = boto3.client("s3").get_object(Bucket=bucket, Key=f"run/{step_dirname(1)}/{rel}")["Body"].read()
    return storage, manifest, rel, data


def test_ranged_fetch_reads_only_the_covering_blocks_and_leaves_holes(bucket):
    storage, manifest, rel, data = _sharded_step(bucket)
    block = json.loads((storage.local_copy(1, manifest, [rel + ".blocks.json"]) / (rel + ".blocks.json"))
                       .read_text())["block_size"]
    span = (3 * block + 10, 100)
    folder = storage.fetch_ranges(1, manifest, rel, [span])
    local = (folder / rel).read_bytes()
    assert len(local) == len(data)
    assert local[3 * block:4 * block] == data[3 * block:4 * block]  # the covering block, exact
    assert local[:3 * block] == bytes(3 * block)  # never fetched: a hole
    storage.release(1)


def test_a_corrupted_block_is_refused_before_anything_reads_it(bucket):
    storage, manifest, rel, data = _sharded_step(bucket)
    altered = bytearray(data)
    altered[len(data) // 2] ^= 0xFF  # same size, other bytes
    boto3.client("s3").put_object(Bucket=bucket, Key=f"run/{step_dirname(1)}/{rel}", Body=bytes(altered))
    with pytest.raises(CheckpointError, match="differs from its index"):
        storage.fetch_ranges(1, manifest, rel, [(len(data) // 2, 1)])
    storage.release(1)


def test_the_size_check_at_selection_downloads_nothing(bucket):
    storage, manifest, _, _ = _sharded_step(bucket)
    client = storage.client
    gets: list[str] = []
    client.meta.events.register("before-call.s3.GetObject", lambda **kw: gets.append("get"))
    assert storage.verify(1, manifest) == []
    assert gets == []
    boto3.client("s3").delete_object(Bucket=bucket, Key=f"run/{step_dirname(1)}/rng/rank-00000.pt")
    assert storage.verify(1, manifest) == ["rng/rank-00000.pt: missing"]
