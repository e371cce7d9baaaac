"""Local mode's TensorBoardOutputConfig: each host's TensorBoard folder synced as it grows, then downloaded
(sm_dist.local.tb_sync; docs/PLATFORM.md §1.14). The end-to-end run is tests/local/test_cnn_local.py's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from sm_dist.cloud.job import Job
from sm_dist.contract.job import tensorboard_command
from sm_dist.errors import ConfigError
from sm_dist.local import tb_sync
from sm_dist.local.layout import HostRoot
from sm_dist.local.stores import FolderStore


def test_a_growing_event_file_is_uploaded_at_each_pass_without_markers(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "s3")
    layouts = [HostRoot("algo-1", tmp_path / "h1"), HostRoot("algo-2", tmp_path / "h2")]
    sync = tb_sync.start(store, layouts, interval=3600)  # the thread waits; the passes below are by hand
    sync.stop(flush=False)
    events = tmp_path / "h1" / "output" / "tensorboard" / "sm_dist" / "events.out.tfevents.1.vm.7.0"
    events.parent.mkdir(parents=True)
    events.write_bytes(b"step 1")
    sync.poll_once()  # first sight: uploaded at once (a checkpoint file would wait for a quiet pass)
    assert store.list() == {"sm_dist/events.out.tfevents.1.vm.7.0": 6}
    with events.open("ab") as f:
        f.write(b", step 2")
    sync.poll_once()
    assert store.list() == {"sm_dist/events.out.tfevents.1.vm.7.0": 14} and sync.uploads == 2
    assert sorted(p.name for p in events.parent.iterdir()) == [events.name]  # no .sagemaker-uploaded marker
    got = tb_sync.download(store, tmp_path / "run" / tb_sync.FOLDER)
    assert got == {"sm_dist/events.out.tfevents.1.vm.7.0": 14}
    assert (tmp_path / "run" / "tensorboard" / "sm_dist" / events.name).read_bytes() == b"step 1, step 2"


def test_a_verify_run_syncs_beside_the_run_and_a_chains_jobs_share_it() -> None:
    plan = SimpleNamespace(tensorboard_uri="s3://sm-dist-local/sm-dist/job-1/tensorboard")
    assert tb_sync.tensorboard_uri(plan, "run") == "s3://sm-dist-local/sm-dist/job-1/tensorboard"  # type: ignore[arg-type]
    assert tb_sync.tensorboard_uri(plan, "verify") == "s3://sm-dist-local/sm-dist/job-1/tensorboard-verify"  # type: ignore[arg-type]
    assert tb_sync.tensorboard_uri(SimpleNamespace(tensorboard_uri=None), "run") is None  # type: ignore[arg-type]


def test_the_cloud_handle_reads_the_s3_path_from_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    job = Job("tb-job-1", region="us-east-1")
    desc = {"TensorBoardOutputConfig": {"S3OutputPath": "s3://b/out/tb-job-1/tensorboard"}}
    monkeypatch.setattr(job, "describe", lambda: desc)
    assert job.tensorboard() == "tensorboard --logdir s3://b/out/tb-job-1/tensorboard --port 6006"
    assert job.tensorboard(port=7007).endswith("--port 7007")
    desc = {}
    with pytest.raises(ConfigError, match="job='tb-job-1': has no TensorBoardOutputConfig"):
        job.tensorboard()


def test_starting_it_without_the_package_is_one_line_with_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"pip install 'sm_dist\[tensorboard\]', or run: tensorboard --logdir /x"):
        tensorboard_command("/x", start=True)
    assert tensorboard_command("/a b") == "tensorboard --logdir '/a b' --port 6006"


@pytest.mark.parametrize("port", [0, -5, 65536, True, "6006"])
def test_a_port_that_is_no_tcp_port_is_one_line(port: object) -> None:
    """`sm-dist tensorboard JOB --port 99999` printed a command TensorBoard refuses (or, with --start, said it
    started TensorBoard there)."""
    with pytest.raises(ConfigError, match=r"^port=.*: expected a TCP port, 1\.\.65535"):
        tensorboard_command("/x", port=port)  # type: ignore[arg-type]


def test_a_port_in_use_is_refused_before_tensorboard_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorBoard exits on a taken port, after `start=True` had said it runs there: refused first, nothing started."""
    import importlib.util
    import socket
    import subprocess

    def no_process(*_: object, **__: object) -> None:
        raise AssertionError("started TensorBoard on a taken port")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # installed or not here
    with socket.socket() as taken:
        taken.bind(("localhost", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"^port={port}: is in use here"):
            tensorboard_command("/x", start=True, port=port)
