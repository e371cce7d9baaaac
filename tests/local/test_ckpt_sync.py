"""Checkpoint sync semantics (SageMaker's, docs/PLATFORM.md §1.4) against a folder store and moto's S3."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from sm_dist.local.ckpt_sync import CheckpointSync, ignored
from sm_dist.local.stores import FolderStore, S3Store, Store


@pytest.fixture(params=["folder", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "folder":
        return FolderStore(tmp_path / "uri")
    endpoint = request.getfixturevalue("moto_endpoint")
    request.getfixturevalue("aws_credentials")
    s3 = S3Store("s3://ckpt-bucket/job/checkpoints", endpoint)
    s3.client.create_bucket(Bucket="ckpt-bucket")
    for key in s3.list():
        s3.delete(key)
    return s3


def test_restore_upload_and_delete(store: Store, tmp_path: Path) -> None:
    seed = tmp_path / "seed.bin"
    seed.write_bytes(b"old")
    store.put(seed, "step-2/data.bin")
    hosts = {"algo-1": tmp_path / "h1", "algo-2": tmp_path / "h2"}
    for folder in hosts.values():
        folder.mkdir()
    sync = CheckpointSync(store, hosts)
    assert sync.restore() == 1
    assert (hosts["algo-2"] / "step-2" / "data.bin").read_bytes() == b"old"  # every host gets the URI
    (hosts["algo-1"] / "step-4").mkdir()
    (hosts["algo-1"] / "step-4" / "shard.bin.sagemaker-ignore").write_bytes(b"tmp")
    (hosts["algo-2"] / "step-4").mkdir()
    (hosts["algo-2"] / "step-4" / "shard-1.bin").write_bytes(b"new")
    sync.poll_once()  # first sight: not uploaded until unchanged over a pass
    assert "step-4/shard-1.bin" not in store.list()
    sync.poll_once()
    assert "step-4/shard-1.bin" in store.list()  # a mid-run file appears at the URI
    assert (hosts["algo-2"] / "step-4" / "shard-1.bin.sagemaker-uploaded").exists()  # SageMaker's marker
    (hosts["algo-1"] / "step-2" / "data.bin").unlink()  # deleted on one host: deleted at the URI
    sync.poll_once()
    assert sorted(store.list()) == ["step-4/shard-1.bin"]  # and the temp name never left its host
    assert sync.uploads == 1 and sync.deletes == 1


def test_background_thread_and_flush(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "uri")
    host = tmp_path / "h"
    host.mkdir()
    sync = CheckpointSync(store, {"algo-1": host}, interval=0.05)
    sync.restore()
    sync.start()
    (host / "late.bin").write_bytes(b"x")  # written just before the job ends
    sync.stop(flush=True)  # the last pass uploads it whatever the thread saw
    assert store.list() == {"late.bin": 1}


def test_file_still_being_written_waits(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "uri")
    host = tmp_path / "h"
    host.mkdir()
    sync = CheckpointSync(store, {"algo-1": host}, interval=0.2)
    sync.restore()
    path = host / "growing.bin"
    with open(path, "wb") as f:
        f.write(b"a")
        f.flush()
        sync._pass(sync._hosts["algo-1"], stable_only=True)  # first sight: not yet stable
        assert store.list() == {}
        f.write(b"b")
        f.flush()
        os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000))
        sync._pass(sync._hosts["algo-1"], stable_only=True)  # changed since last pass: still waits
        assert store.list() == {}
    sync._pass(sync._hosts["algo-1"], stable_only=True)  # unchanged over a pass: uploaded
    assert store.list() == {"growing.bin": 2}


def test_ignored_names() -> None:
    assert ignored("a/b.sagemaker-ignore") and ignored("x.sagemaker-ignore/f") and ignored("f.sagemaker-uploaded")
    assert not ignored("step-3/.metadata")


def test_a_folder_deleted_while_it_is_synced_is_skipped_and_the_uploads_go_on(tmp_path: Path) -> None:
    """Hugging Face's save_total_limit deletes checkpoint-N while the sync lists or uploads it: that
    pass skips it, the thread lives on, and the next checkpoint still leaves the host."""
    store = FolderStore(tmp_path / "uri")
    host = tmp_path / "h"
    (host / "checkpoint-650").mkdir(parents=True)
    (host / "checkpoint-650" / "model.safetensors").write_bytes(b"w")
    sync = CheckpointSync(store, {"algo-1": host}, interval=0.05)
    sync.restore()
    real_put = store.put

    def put_then_delete(src: Path, key: str) -> None:  # the job deletes the folder mid-upload
        shutil.rmtree(host / "checkpoint-650", ignore_errors=True)
        real_put(src, key)

    store.put = put_then_delete  # type: ignore[method-assign]
    sync.start()
    deadline = time.monotonic() + 30  # a hang guard, not a timing assertion
    while (host / "checkpoint-650").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    store.put = real_put  # type: ignore[method-assign]
    (host / "checkpoint-700").mkdir()
    (host / "checkpoint-700" / "model.safetensors").write_bytes(b"w2")
    while "checkpoint-700/model.safetensors" not in store.list() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sync.alive and "checkpoint-700/model.safetensors" in store.list()
    sync.stop(flush=True)
    assert sync.problems() == []  # a vanished file is no failure


def test_a_dead_sync_thread_is_restarted_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FolderStore(tmp_path / "uri")
    host = tmp_path / "h"
    host.mkdir()
    sync = CheckpointSync(store, {"algo-1": host}, interval=0.05)
    sync.restore()
    monkeypatch.setattr(sync, "_loop", lambda: None)  # a thread that ends at once, as a dead one
    sync.start()
    time.sleep(0.2)
    monkeypatch.undo()
    assert not sync.alive
    sync.ensure_running()
    assert sync.alive
    (host / "late.bin").write_bytes(b"x")
    sync.stop(flush=True)
    assert store.list() == {"late.bin": 1}
    assert sync.problems() == ["the checkpoint sync stopped (no error recorded) and was restarted"]


def test_failing_uploads_are_retried_and_named_in_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FolderStore(tmp_path / "uri")
    host = tmp_path / "h"
    host.mkdir()
    (host / "a.bin").write_bytes(b"a")
    sync = CheckpointSync(store, {"algo-1": host})
    sync.restore()
    clock = [100.0]
    monkeypatch.setattr("sm_dist.local.ckpt_sync.time.monotonic", lambda: clock[0])
    real_put = store.put
    store.put = lambda src, key: (_ for _ in ()).throw(ConnectionError("503 SlowDown"))  # type: ignore[method-assign]
    sync.poll_once()
    sync.poll_once()  # stable now, the upload fails
    clock[0] += 8
    sync.poll_once()
    store.put = real_put  # type: ignore[method-assign]
    sync.poll_once()
    assert store.list() == {"a.bin": 1}
    assert sync.problems() == [f"checkpoint uploads to {store.uri} failed for 8 s (ConnectionError: 503 SlowDown); "
                               "they were retried and then went through"]


def test_what_was_written_since_a_moment_is_what_a_chain_asks_after_a_max_runtime_stop(store: Store,
                                                                                     tmp_path: Path) -> None:
    """The question after a link's MaxRuntime stop (contract.chain): anything at the URI since the link started?"""
    from sm_dist.local.stores import written_since

    seed = tmp_path / "seed.bin"
    seed.write_bytes(b"x")
    assert store.written_since(0) == () and written_since(store, 0) is False
    store.put(seed, "step-2/data.bin")
    now = time.time()
    assert store.written_since(now - 60) == ("step-2/data.bin",) and written_since(store, now - 60) is True
    assert store.written_since(now + 60) == () and written_since(store, now + 60) is False
    assert written_since(None, now) is None  # no checkpoint URI: not known


def test_a_listing_that_fails_answers_not_known(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sm_dist.local.stores import written_since

    store = FolderStore(tmp_path / "uri")
    monkeypatch.setattr(store, "written_since", lambda since: (_ for _ in ()).throw(OSError("refused")))
    assert written_since(store, 0) is None
