"""ShardedByS3Key channels whose hosts got different numbers of files: named at start-up (one line naming
the channel, each host's file count and the fix), not found as a hang (sm_dist.runtime.shards)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from sm_dist.errors import ConfigError
from sm_dist.runtime import shards

dist = pytest.importorskip("torch.distributed")


def _config(distribution: str) -> dict[str, str]:
    """SM_INPUT_DATA_CONFIG as the platform writes it (inputdataconfig.json, docs/PLATFORM.md §1.1)."""
    entry = {"TrainingInputMode": "File", "S3DistributionType": distribution, "RecordWrapperType": "None"}
    return {"SM_INPUT_DATA_CONFIG": json.dumps({"train": entry})}


def test_the_channels_distribution_is_read_from_the_input_data_config() -> None:
    assert shards.distribution("train", _config("ShardedByS3Key")) == "ShardedByS3Key"
    assert shards.distribution("train", _config("FullyReplicated")) == "FullyReplicated"
    assert shards.distribution("val", _config("ShardedByS3Key")) == ""
    assert shards.distribution("train", {"SM_INPUT_DATA_CONFIG": "not json"}) == ""
    assert shards.distribution("train", {}) == ""


def _hosts_give(counts: dict[str, int], wait_s: float = 10.0) -> list[dict[str, int] | None]:
    """Each host (a thread here) gives its count through one store, as the hosts do through the job's."""
    store, found = dist.HashStore(), []
    threads = [threading.Thread(target=lambda h=h, n=n: found.append(
        shards.gather_counts(store, "train", h, n, list(counts), wait_s))) for h, n in counts.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found


def test_hosts_with_different_file_counts_are_named_with_the_fix() -> None:
    found = _hosts_give({"algo-1": 3, "algo-2": 2})
    assert found == [{"algo-1": 3, "algo-2": 2}] * 2  # every host sees every count
    with pytest.raises(ConfigError) as err:
        shards.check_equal("train", found[0])
    line = str(err.value)
    assert "\n" not in line and "channel train" in line and "algo-1 3, algo-2 2" in line
    assert "a multiple of 2 files" in line and "FullyReplicated" in line and "hang" in line
    shards.check_equal("train", _hosts_give({"algo-1": 2, "algo-2": 2})[0])  # equal shares pass


def test_a_host_that_never_reads_the_channel_is_not_waited_for() -> None:
    store = dist.HashStore()
    assert shards.gather_counts(store, "train", "algo-1", 3, ["algo-1", "algo-2"], wait_s=0.2) is None


def test_without_a_process_group_or_sharding_nothing_is_exchanged() -> None:
    assert not dist.is_initialized()
    shards.check_shares("train", 3, "algo-1", ["algo-1", "algo-2"], _config("ShardedByS3Key"))  # no group: no check
    shards.check_shares("train", 3, "algo-1", ["algo-1"], _config("ShardedByS3Key"))  # one host


def test_channel_files_refuses_unequal_shares_through_the_jobs_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wiring: channel_files on algo-1 of a job with a process group (gloo, one rank here) reads the
    other host's count from the group's store and refuses before the loader is built."""
    from sm_dist.container.env import detect_env
    from sm_dist.runtime.data import channel_files

    for i in range(3):
        (tmp_path / f"part-{i}.txt").write_text("x\n")
    monkeypatch.setenv("SM_CHANNEL_TRAIN", str(tmp_path))
    monkeypatch.setenv("SM_HOSTS", json.dumps(["algo-1", "algo-2"]))
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-1")
    monkeypatch.setenv("SM_INPUT_DATA_CONFIG", _config("ShardedByS3Key")["SM_INPUT_DATA_CONFIG"])
    env = detect_env(dict(os.environ))
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        dist.distributed_c10d._get_default_store().set("sm_dist/channel-files/train/algo-2", "2")
        with pytest.raises(ConfigError, match=r"algo-1 3, algo-2 2"):
            channel_files("train", env)
        dist.distributed_c10d._get_default_store().set("sm_dist/channel-files/train/algo-2", "3")
        assert len(channel_files("train", env)) == 3
    finally:
        dist.destroy_process_group()


def test_the_plan_warns_when_a_local_channels_files_do_not_split_evenly(tmp_path: Path) -> None:
    """What the plan already knows (a local folder's files): 3 files on 2 hosts under ShardedByS3Key."""
    import sm_dist
    from sm_dist.planning.channels import Channel

    entrypoints = Path(__file__).resolve().parents[2] / "entrypoints"
    for i in range(3):
        (tmp_path / f"part-{i}.txt").write_text("x\n")
    sharded = {"train": Channel(source=str(tmp_path), distribution="ShardedByS3Key")}
    plan = sm_dist.plan("cnn.py", source_dir=str(entrypoints), local=True, instance_count=2, inputs=sharded)
    assert any("3 files under ShardedByS3Key on 2 instances" in w and "a multiple of 2" in w for w in plan.warnings)
    even = sm_dist.plan("cnn.py", source_dir=str(entrypoints), local=True, instance_count=3, inputs=sharded)
    assert not any("ShardedByS3Key" in w for w in even.warnings)
