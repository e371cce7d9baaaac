"""Channels as records: parsing, the checks made before anything is uploaded, and the request they become."""

from __future__ import annotations

from pathlib import Path

import pytest
from _project import ROLE_ARN

import sm_dist
from sm_dist.errors import ConfigError
from sm_dist.planning.channels import Channel, Distribution, InputMode, SourceKind

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CLOUD = dict(instance_type="ml.p4d.24xlarge", instance_count=2, strategy="ddp", role=ROLE_ARN, region="us-east-1",
             output_s3_uri="s3://team-bucket/out", max_runtime_s=3600)


def test_a_channel_is_parsed_from_the_cli_form() -> None:
    channel = Channel.parse("s3://data/train,mode=fastfile,distribution=ShardedByS3Key")
    assert (channel.kind, channel.mode, channel.distribution) == (SourceKind.S3, InputMode.FAST_FILE,
                                                                  Distribution.SHARDED_BY_S3_KEY)
    assert Channel.parse("efs://fs-0123456789abcdef0/datasets").file_system == ("fs-0123456789abcdef0", "/datasets")


def test_the_source_may_come_first_unnamed_as_sdk_v2s_training_input_takes_it() -> None:
    channel = Channel("s3://data/train", mode="FastFile")
    assert channel == Channel(source="s3://data/train", mode="FastFile")
    assert (channel.source, channel.mode) == ("s3://data/train", InputMode.FAST_FILE)
    with pytest.raises(TypeError):  # the rest stay keywords: Channel(src, "FastFile") would read ambiguously
        Channel("s3://data/train", "FastFile")  # type: ignore[misc]


def test_an_s3_source_is_a_folder_in_the_request_and_in_the_keys_it_holds() -> None:
    from sm_dist.planning.channels import channel_keys, s3_prefix

    assert s3_prefix("s3://data/train") == s3_prefix("s3://data/train/") == "s3://data/train/"
    assert s3_prefix("s3://data") == "s3://data/"
    keys = ["train/b", "train/a", "train_v2/b", "train.bak", "train/", "val/c"]
    assert channel_keys("s3://data/train", keys) == ["train/a", "train/b"]
    assert channel_keys("s3://data", keys) == sorted(k for k in keys if not k.endswith("/"))


@pytest.mark.parametrize(("text", "message"), [
    ("s3://data/train,mode=Pipe", "Pipe mode is not supported"),
    ("s3://data/train,mode=Fast", "did you mean 'FastFile'"),
    ("s3://data/train,shard=yes", "options are mode="),
    ("gs://bucket/x", "expected s3://"),
    ("s3://Bad_Bucket/x", "expected s3://bucket/prefix"),
    ("efs://fs-0123456789abcdef0/d,mode=FastFile", "mounted as it is"),
    ("fsx-lustre://not-an-id/x", "expected fsx-lustre://fs-<id>/path"),
])
def test_bad_channels_are_one_line_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Channel.parse(text)


def test_file_systems_are_mounted_through_the_vpc(source_dir: Path) -> None:
    inputs = {"lustre": "fsx-lustre://fs-0123456789abcdef0/mnt/data", "home": "efs://fs-0fedcba9876543210/users"}
    with pytest.raises(ConfigError, match=r"inputs.lustre=.*pass subnets="):
        sm_dist.plan("train.py", source_dir=str(source_dir), inputs=inputs, **CLOUD)
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), inputs=inputs, subnets=["subnet-1"],
                        security_group_ids=["sg-1"], checkpoint_s3_uri="s3://team-bucket/c", **CLOUD)
    sources = {c["ChannelName"]: c["DataSource"] for c in plan.request["InputDataConfig"]}
    assert sources["lustre"] == {"FileSystemDataSource": {
        "FileSystemId": "fs-0123456789abcdef0", "FileSystemAccessMode": "ro", "FileSystemType": "FSxLustre",
        "DirectoryPath": "/mnt/data"}}
    assert sources["home"]["FileSystemDataSource"]["FileSystemType"] == "EFS"


def test_a_local_folder_s_download_is_in_the_plan_s_estimate(source_dir: Path, tmp_path: Path) -> None:
    from sm_dist.catalog import get_instance
    from sm_dist.estimator.cost import download_gbps

    data = tmp_path / "data"
    data.mkdir()
    with open(data / "shard-0.bin", "wb") as f:
        f.truncate(2_000_000_000)  # sparse: 2 GB listed, nothing written
    sized = dict(model="gpt2", tokens=1e8, **CLOUD)
    with_data = sm_dist.plan("train.py", source_dir=str(source_dir), inputs={"train": str(data), "val": "s3://dat/v"},
                             **sized)
    without = sm_dist.plan("train.py", source_dir=str(source_dir), **sized)
    seconds = 2e9 * 8 / (download_gbps(get_instance("ml.p4d.24xlarge")) * 1e9)
    # (a restart after a failure downloads it again: a hair more than one download)
    assert (with_data.sizing.expected_hours - without.sizing.expected_hours) * 3600 == pytest.approx(seconds, rel=1e-3)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="holds no files"):
        sm_dist.plan("train.py", source_dir=str(source_dir), inputs={"train": str(empty)}, model="gpt2", **CLOUD)


def test_a_sharded_channel_with_fewer_files_than_instances_is_flagged(source_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "only.csv").write_text("1\n")
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), inputs={"train": f"{data},distribution=ShardedByS3Key"},
                        **CLOUD)
    assert any("1 files for 2 instances under ShardedByS3Key" in w for w in plan.warnings)
