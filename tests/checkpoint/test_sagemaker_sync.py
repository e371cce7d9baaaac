"""The "sagemaker-sync" storage: what SageMaker's uploader could see, and when old steps may go."""

from __future__ import annotations

import errno
import logging
import os
import uuid
from pathlib import Path

import pytest
import torch
from torch import nn

from sm_dist.contract.checkpoint import MANIFEST_NAME, step_dirname
from sm_dist.runtime.checkpoint import Checkpointer, SageMakerSyncStorage
from sm_dist.runtime.checkpoint import storage as storage_module
from sm_dist.runtime.checkpoint.retention import apply_retention


def _model() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    return model, torch.optim.AdamW(model.parameters())


def _save(storage: SageMakerSyncStorage, steps: tuple[int, ...], keep: int | None = 2) -> nn.Module:
    model, optimizer = _model()
    with Checkpointer(storage=storage, keep=keep) as ckpt:
        for step in steps:
            ckpt.save(step, model=model, optimizer=optimizer)
    return model


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _mark_uploaded(root: Path, step: int) -> None:
    """What SageMaker's uploader leaves once a file is in S3 (docs/PLATFORM.md §1.4)."""
    for rel in _files(root / step_dirname(step)):
        (root / step_dirname(step) / (rel + ".sagemaker-uploaded")).touch()


def test_only_final_names_appear_and_temp_copies_use_the_ignore_suffix(tmp_path, monkeypatch):
    copies: list[str] = []
    real_replace, real_copy = os.replace, storage_module.shutil.copyfile

    def cross_device(src, dst):  # staging on another disk: a rename is impossible
        if "sm_dist-stage" in str(src):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_replace(src, dst)

    def spy_copy(src, dst):
        copies.append(str(dst))
        return real_copy(src, dst)

    monkeypatch.setattr(storage_module.os, "replace", cross_device)
    monkeypatch.setattr(storage_module.shutil, "copyfile", spy_copy)
    root = tmp_path / "checkpoints"
    _save(SageMakerSyncStorage(root), (1,))
    assert copies and all(name.endswith(".sagemaker-ignore") for name in copies)
    files = _files(root)
    assert not any(name.endswith(".sagemaker-ignore") for name in files)
    assert {f"{step_dirname(1)}/{MANIFEST_NAME}", f"{step_dirname(1)}/rng/rank-00000.pt"} <= files
    assert all(name.startswith(step_dirname(1)) for name in files)  # nothing staged inside LocalPath


def test_old_steps_stay_until_a_newer_one_is_confirmed_uploaded(tmp_path, caplog):
    root = tmp_path / "checkpoints"
    storage = SageMakerSyncStorage(root)
    with caplog.at_level(logging.INFO):
        _save(storage, (1, 2, 3))
    assert storage.list_steps() == [1, 2, 3]
    assert "confirmed durable yet" in caplog.text
    _mark_uploaded(root, 3)
    assert apply_retention(storage, 2, newest=3) == [1]
    assert storage.list_steps() == [2, 3]


def test_retention_counts_from_the_newest_confirmed_step(tmp_path):
    """A slow uploader delays deletions by a save or two; it does not stop them for good."""
    root = tmp_path / "checkpoints"
    storage = SageMakerSyncStorage(root)
    _save(storage, (1, 2, 3, 4, 5))
    _mark_uploaded(root, 3)  # 4 and 5 are committed locally but not uploaded yet
    assert apply_retention(storage, 2, newest=5) == [1]
    assert storage.list_steps() == [2, 3, 4, 5]


@pytest.fixture
def s3_bucket(moto_endpoint, aws_credentials, monkeypatch) -> str:
    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    name = f"sync-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def _mirror(root: Path, bucket: str, step: int) -> None:
    """Do what SageMaker's uploader does for one step folder."""
    import boto3

    client = boto3.client("s3")
    for rel in _files(root / step_dirname(step)):
        client.upload_file(str(root / step_dirname(step) / rel), bucket, f"ckpt/{step_dirname(step)}/{rel}")


def test_s3_is_asked_when_reachable(tmp_path, s3_bucket):
    root = tmp_path / "checkpoints"
    storage = SageMakerSyncStorage(root, s3_uri=f"s3://{s3_bucket}/ckpt")
    _save(storage, (1, 2), keep=None)
    assert not storage.is_durable(2)
    _mirror(root, s3_bucket, 2)
    assert storage.is_durable(2)


def test_files_missing_on_this_host_are_fetched_from_s3(tmp_path, s3_bucket):
    """After an in-job restart, another host's files exist only in S3."""
    root = tmp_path / "checkpoints"
    storage = SageMakerSyncStorage(root, s3_uri=f"s3://{s3_bucket}/ckpt")
    saved = _save(storage, (1,))
    _mirror(root, s3_bucket, 1)
    (root / step_dirname(1) / "model" / "full.pt").unlink()
    model, optimizer = _model()
    torch.nn.init.zeros_(model.weight)
    with Checkpointer(storage=storage) as ckpt:
        assert ckpt.resume(model=model, optimizer=optimizer).step == 1
    assert torch.equal(model.weight, saved.weight)
