"""The checkpoint folder a restarted host gets (sm_dist.runtime.restore.folder_restore), against
a real S3 endpoint (moto's server over HTTP) and against a folder standing in for the URI."""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import boto3
import pytest

from sm_dist.runtime.restore import folder_restore as fr
from sm_dist.runtime.restore import meeting, remotes


@pytest.fixture
def s3(moto_endpoint: str, aws_credentials: str, monkeypatch: pytest.MonkeyPatch):
    """An S3 client on the local endpoint with an empty bucket 'ckpt'; yields the client."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_endpoint)
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name=aws_credentials)
    client.create_bucket(Bucket="ckpt")
    yield client
    for obj in client.list_objects_v2(Bucket="ckpt").get("Contents", []):
        client.delete_object(Bucket="ckpt", Key=obj["Key"])
    client.delete_bucket(Bucket="ckpt")


def write(path: Path, data: bytes, age_s: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


def test_a_restarted_host_gets_what_the_uri_holds(s3, tmp_path: Path) -> None:
    """Missing files come down, a same-size newer version replaces the old one, what the URI no
    longer has goes, and sm_dist's own step folders and SageMaker's markers are left alone."""
    s3.put_object(Bucket="ckpt", Key="job/snapshot.pt", Body=b"epoch-8")
    s3.put_object(Bucket="ckpt", Key="job/checkpoint-20/model.safetensors", Body=b"w" * 64)
    s3.put_object(Bucket="ckpt", Key="job/step-000000010/manifest.json", Body=b"{}")
    host = tmp_path / "algo-2"
    write(host / "snapshot.pt", b"epoch-7", age_s=60)  # same size, older: replaced
    write(host / "checkpoint-10/rng_state_1.pth", b"r", age_s=60)  # rotated away on algo-1: deleted
    write(host / "step-000000008/model/__1_0.distcp", b"shard")  # the checkpointer's own: kept
    write(host / "snapshot.pt.sagemaker-uploaded", b"")  # SageMaker's marker: kept
    got, deleted = fr.restore(host, remotes.S3Remote("s3://ckpt/job"))
    assert got == ["checkpoint-20/model.safetensors", "snapshot.pt"]
    assert deleted == ["checkpoint-10/rng_state_1.pth"]
    assert (host / "snapshot.pt").read_bytes() == b"epoch-8"
    assert (host / "step-000000008/model/__1_0.distcp").exists() and not (host / "step-000000010").exists()
    assert (host / "snapshot.pt.sagemaker-uploaded").exists()
    assert not [p for p in host.rglob("*") if ".sm-dist-restore" in p.name]  # no half-written file left


def test_the_writer_does_not_download_its_own_files_again(s3, tmp_path: Path) -> None:
    """A file this host wrote and uploaded (whole or in boto3's 8 MiB parts) is the same bytes: kept."""
    host = tmp_path / "algo-1"
    small = write(host / "snapshot.pt", b"x" * 1000, age_s=30)
    large = write(host / "checkpoint-5/model.safetensors", os.urandom(9 << 20), age_s=30)
    client_cfg = boto3.s3.transfer.TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20)
    for path, key in ((small, "job/snapshot.pt"), (large, "job/checkpoint-5/model.safetensors")):
        s3.upload_file(str(path), "ckpt", key, Config=client_cfg)
    etag = s3.head_object(Bucket="ckpt", Key="job/checkpoint-5/model.safetensors")["ETag"]
    assert etag.strip('"').endswith("-2")  # really multipart
    assert fr.pending(host, remotes.S3Remote("s3://ckpt/job")) == []  # settled: both are there
    got, deleted = fr.restore(host, remotes.S3Remote("s3://ckpt/job"))
    assert got == [] and deleted == []


def test_settle_waits_while_this_hosts_newest_file_moves(tmp_path: Path) -> None:
    """A file not yet at the URI (or newer here than there) keeps the restore waiting while it
    moves; one that stops moving is uploaded from here after the idle bound, not after minutes."""
    uri, host = tmp_path / "uri", tmp_path / "algo-1"
    write(uri / "snapshot.pt", b"old", age_s=60)
    write(host / "snapshot.pt", b"new!")
    remote = remotes.FolderRemote(uri)
    assert fr.pending(host, remote) == ["snapshot.pt"]
    uploader = threading.Timer(0.3, lambda: write(uri / "snapshot.pt", b"new!"))
    uploader.start()
    settled = fr.settle(host, remote, idle=30.0, sleep=lambda s: time.sleep(0.05))
    uploader.join()
    assert settled.pushed == [] and settled.conflicts == []
    write(host / "checkpoint-4/model.safetensors", b"never uploaded by the sync")
    settled = fr.settle(host, remote, idle=0.2, sleep=lambda s: time.sleep(0.05))
    assert settled.pushed == ["checkpoint-4/model.safetensors"]
    assert (uri / "checkpoint-4/model.safetensors").read_bytes() == b"never uploaded by the sync"
    assert fr.pending(host, remote) == []


def test_files_restored_at_job_start_are_at_the_uri(s3, tmp_path: Path) -> None:
    """SageMaker copies the URI into the folder at job start: newer here than there, same bytes,
    never uploaded again. They count as at the URI (the settle used to wait 300 s for them)."""
    s3.put_object(Bucket="ckpt", Key="job/step-000000100/.metadata", Body=b"m")  # sm_dist's own: not looked at
    s3.put_object(Bucket="ckpt", Key="job/checkpoint-100/optimizer.pt", Body=b"o" * 100)
    host = tmp_path / "algo-2"
    write(host / "checkpoint-100/optimizer.pt", b"o" * 100)  # downloaded just now
    future = time.time() + 60
    os.utime(host / "checkpoint-100/optimizer.pt", (future, future))  # whatever the clocks say
    assert fr.pending(host, remotes.S3Remote("s3://ckpt/job")) == []


def test_two_hosts_writing_one_name_do_not_stall_the_restore(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Hugging Face's save_on_each_node=True: both hosts write checkpoint-N/trainer_state.json, of
    different sizes, to one key. The URI's copy (written after this host's) wins: not waited for,
    named once, and the restore gives this host the URI's copy."""
    uri, host = tmp_path / "uri", tmp_path / "algo-1"
    write(host / "checkpoint-20/trainer_state.json", b"{...164019 bytes}", age_s=30)
    write(uri / "checkpoint-20/trainer_state.json", b"{...164020 bytes!}")
    remote = remotes.FolderRemote(uri)
    conflicts: list[str] = []
    assert fr.pending(host, remote, conflicts) == [] and conflicts == ["checkpoint-20/trainer_state.json"]
    with caplog.at_level("WARNING"):
        assert fr.run(host, str(uri), "", ["algo-1"], "job-1", "algo-1") == 0
    assert "checkpoint-20/trainer_state.json" in caplog.text and "save_on_each_node" in caplog.text
    assert (host / "checkpoint-20/trainer_state.json").read_bytes() == b"{...164020 bytes!}"


def test_the_hosts_meet_on_the_rendezvous_store(tmp_path: Path) -> None:
    """Each host's restore waits for the others on the c10d store torchrun's agents share; a
    retried restore counts once."""
    from torch.distributed import TCPStore

    server = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=30), wait_for_workers=False)
    endpoint = f"127.0.0.1:{server.port}"
    hosts = ["algo-1", "algo-2"]
    assert meeting.meet(endpoint, "run-1", hosts, "algo-1", timeout=0.5) == (["algo-2"], {})  # alone: names who
    assert meeting.meet(endpoint, "run-1", hosts, "algo-1", timeout=0.5)[0] == ["algo-2"]  # tried again: still alone
    results: list[tuple[list[str], dict[str, str]]] = []
    others = [threading.Thread(target=lambda h=h: results.append(
        meeting.meet(endpoint, "run-2", hosts, h, timeout=30, share=f'["{h}: snapshot.pt"]' if h == "algo-1" else "[]")))
        for h in hosts]
    for t in others:
        t.start()
    for t in others:
        t.join()
    assert [missing for missing, _ in results] == [[], []]
    shared = results[0][1]  # what each host left: its files outside the synced folder
    assert meeting.split_resume(shared) == "algo-1 has algo-1: snapshot.pt, algo-2 has not"
    assert meeting.split_resume({"algo-1": '["cwd: a.pt"]', "algo-2": '["cwd: a.pt"]'}) is None  # the same everywhere
    assert meeting.meet("", "run-3", hosts, "algo-1") == ([], {"algo-1": ""})  # no endpoint (one host): nothing to wait for


def test_run_reports_and_never_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    uri, host = tmp_path / "uri", tmp_path / "algo-2"
    write(uri / "snapshot.pt", b"epoch-3")
    assert fr.main(["--folder", str(host), "--uri", str(uri), "--hosts", "algo-2", "--host", "algo-2"]) == 0
    assert (host / "snapshot.pt").read_bytes() == b"epoch-3"
    reason = tmp_path / "reason"
    assert fr.main(["--folder", str(host), "--uri", "s3://", "--host", "algo-2", "--reason-file", str(reason)]) == 1
    assert "checkpoint folder restore failed: ConfigError" in caplog.text
    assert reason.read_text().startswith("ConfigError: ") and "\n" not in reason.read_text()  # the worker's one line


def test_the_uri_says_whether_any_host_saved_since_a_moment(s3, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The failure watch's question on a job of several hosts (sm_dist.runtime.restore.written_since):
    keys written at the URI since the start, SageMaker's markers left out; 4 when the URI cannot be read."""
    from sm_dist.runtime.restore import written_since as ws

    s3.put_object(Bucket="ckpt", Key="run/state.pt.sagemaker-uploaded", Body=b"")
    start = time.time() - 1  # S3's LastModified has whole seconds
    assert ws.main(["--uri", "s3://ckpt/run", "--since", repr(start + 3600)]) == ws.NONE  # nothing since then
    s3.put_object(Bucket="ckpt", Key="run/state.pt", Body=b"rank 0 on algo-1")
    assert ws.main(["--uri", "s3://ckpt/run", "--since", repr(start)]) == ws.FOUND
    assert capsys.readouterr().out.splitlines()[-1] == "state.pt"
    assert ws.main(["--uri", "s3://no-such-bucket/run", "--since", repr(start)]) == ws.CANNOT_TELL
    assert "cannot read s3://no-such-bucket/run" in capsys.readouterr().err
