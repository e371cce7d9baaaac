"""Data channels in the cloud (moto): a local folder uploaded once per content, the request SageMaker gets,
and the limits checked before anything is uploaded."""

from __future__ import annotations

from pathlib import Path

import pytest
from _project import CKPT_BUCKET, DEFAULT_BUCKET, ROLE_ARN

import sm_dist
from sm_dist.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _data(tmp_path: Path) -> Path:
    folder = tmp_path / "train"
    (folder / "shards").mkdir(parents=True)
    for i in range(4):
        (folder / "shards" / f"part-{i:03d}.csv").write_text(f"x,y\n{i},{i * i}\n")
    (folder / "meta.json").write_text('{"rows": 4}')
    return folder


def _fit(source_dir: Path, **kw: object) -> sm_dist.Job:
    return sm_dist.fit("train.py", source_dir=str(source_dir), instance_type="ml.p4d.24xlarge", instance_count=2,
                       strategy="ddp", role=ROLE_ARN, max_runtime_s=3600,
                       checkpoint_s3_uri=f"s3://{CKPT_BUCKET}/c", **kw)


def _nothing_created() -> bool:
    """Only the test's own checkpoint bucket exists, and it is empty."""
    import boto3

    s3 = boto3.client("s3")
    buckets = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    return buckets == [CKPT_BUCKET] and s3.list_objects_v2(Bucket=CKPT_BUCKET).get("KeyCount", 0) == 0


def _keys(prefix: str) -> set[str]:
    import boto3

    listing = boto3.client("s3").list_objects_v2(Bucket=DEFAULT_BUCKET, Prefix=prefix)
    return {o["Key"][len(prefix):] for o in listing.get("Contents", [])}


def test_a_local_folder_is_uploaded_once_and_the_request_says_how_it_arrives(aws: str, source_dir: Path,
                                                                             tmp_path: Path) -> None:
    import boto3

    boto3.client("s3").create_bucket(Bucket="datasets")  # the remote checks look for a channel's bucket
    data = _data(tmp_path)
    channel = sm_dist.Channel(source=str(data), distribution="ShardedByS3Key")
    job = _fit(source_dir, inputs={"train": channel, "val": "s3://datasets/val,mode=FastFile"})
    [upload] = job.plan.uploads
    prefix = upload.s3_uri.removeprefix(f"s3://{DEFAULT_BUCKET}/")
    assert prefix.startswith("sm-dist/sm-dist-data/train-")
    assert _keys(prefix) == {"meta.json", *(f"shards/part-{i:03d}.csv" for i in range(4))}
    request = {c["ChannelName"]: c for c in job.plan.request["InputDataConfig"]}
    assert list(request) == ["code", "train", "val"]
    assert request["train"]["DataSource"]["S3DataSource"] == {
        "S3DataType": "S3Prefix", "S3Uri": upload.s3_uri, "S3DataDistributionType": "ShardedByS3Key"}
    assert (request["train"]["InputMode"], request["val"]["InputMode"]) == ("File", "FastFile")
    assert request["val"]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://datasets/val/"  # a folder

    # the same data again: the complete copy is found (its marker), nothing is sent; a lost object stays lost
    boto3.client("s3").delete_object(Bucket=DEFAULT_BUCKET, Key=prefix + "meta.json")
    again = _fit(source_dir, inputs={"train": channel})
    assert again.plan.uploads[0].s3_uri == upload.s3_uri and "meta.json" not in _keys(prefix)
    # changed data is new content: a new prefix
    (data / "meta.json").write_text('{"rows": 5}')
    changed = _fit(source_dir, inputs={"train": str(data)})
    assert changed.plan.uploads[0].s3_uri != upload.s3_uri
    assert "meta.json" in _keys(changed.plan.uploads[0].s3_uri.removeprefix(f"s3://{DEFAULT_BUCKET}/"))


def test_the_plan_says_what_it_would_upload_and_uploads_nothing(aws: str, source_dir: Path, tmp_path: Path) -> None:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), instance_type="ml.p4d.24xlarge", role=ROLE_ARN,
                        inputs={"train": str(_data(tmp_path))}, max_runtime_s=3600)
    assert "data         train: " in str(plan) and "(5 files, 0.0 MiB; uploaded to s3://" in str(plan)
    assert plan.to_dict()["uploads"][0]["files"] == 5
    assert _nothing_created()


def test_twenty_data_channels_are_refused_before_anything_is_uploaded(aws: str, source_dir: Path,
                                                                      tmp_path: Path) -> None:
    data = str(_data(tmp_path))
    with pytest.raises(ConfigError, match=r"inputs=20: .*at most 19"):
        _fit(source_dir, inputs={f"c{i}": data for i in range(20)})
    assert _nothing_created()
    assert len(_fit(source_dir, inputs={f"c{i}": data for i in range(19)}).plan.request["InputDataConfig"]) == 20


def test_an_s3_channel_holds_the_same_keys_in_the_cloud_job_and_the_rehearsal(aws: str, source_dir: Path,
                                                                            tmp_path: Path) -> None:
    """S3Prefix delivers every key starting with S3Uri (docs/PLATFORM.md §1.9): s3://datasets/train would also
    deliver train_v2/b and train.bak in the cloud, while local mode reads the folder train/."""
    import boto3

    from sm_dist.local.from_plan import local_channels

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="datasets")
    for key in ("train/a", "train_v2/b", "train.bak"):
        s3.put_object(Bucket="datasets", Key=key, Body=key.encode())
    settings = dict(source_dir=str(source_dir), instance_type="ml.p4d.24xlarge", role=ROLE_ARN, max_runtime_s=3600,
                    inputs={"train": "s3://datasets/train"})
    plan = sm_dist.plan("train.py", **settings)
    [train] = [c for c in plan.request["InputDataConfig"] if c["ChannelName"] == "train"]
    assert train["DataSource"]["S3DataSource"]["S3Uri"] == "s3://datasets/train/"
    assert any(w.startswith("channel train: s3://datasets/train is read as the folder s3://datasets/train/")
               for w in plan.warnings), plan.warnings
    folder = local_channels(sm_dist.plan("train.py", local=True, **settings), {}, True, tmp_path / "s3")["train"].folder
    assert [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()] == ["a"]
    # a source that is a folder already is taken as it is, without a warning
    plain = sm_dist.plan("train.py", **{**settings, "inputs": {"train": "s3://datasets/train/"}})
    assert not any("read as the folder" in w for w in plain.warnings)
