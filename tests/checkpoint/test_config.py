"""Choosing the storage: job spec defaults, "auto", container paths, and what imports what."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from sm_dist.contract.checkpoint import DEFAULT_KEEP, CheckpointSettings
from sm_dist.errors import ConfigError
from sm_dist.jobspec import JobSpec
from sm_dist.runtime.checkpoint import (
    Checkpointer,
    LocalStorage,
    S3Storage,
    SageMakerSyncStorage,
)
from sm_dist.runtime.checkpoint.config import (
    open_storage,
    resolve_mode,
)
from sm_dist.runtime.entry import build_parser
from sm_dist.runtime.train_args import checkpoint_settings, parse_flags


def _env(**fields: object) -> SimpleNamespace:
    base = {"rank": 0, "world_size": 1, "on_sagemaker": False, "checkpoint_dir": None}
    return SimpleNamespace(**{**base, **fields})


def test_from_env_takes_the_job_spec_and_explicit_arguments_win(tmp_path, monkeypatch):
    spec = JobSpec(entry="train.py", checkpoint=CheckpointSettings(mode="local", local_path=str(tmp_path / "ck"),
                                                                interval_steps=7, keep=3, async_checkpoint=True))
    monkeypatch.setenv("SM_DIST_JOB_SPEC", str(spec.write(tmp_path)))
    with Checkpointer.from_env(None, keep=4) as ckpt:
        assert isinstance(ckpt.storage, LocalStorage) and ckpt.storage.root == tmp_path / "ck"
        assert (ckpt.config.interval_steps, ckpt.config.keep, ckpt.config.async_checkpoint) == (7, 4, True)


def test_the_settings_record_travels_whole_and_the_spec_keeps_the_default(tmp_path):
    settings = JobSpec(entry="t.py", checkpoint={"mode": "local", "local_path": str(tmp_path / "ck"),
                                                 "interval_steps": 7}).checkpoint
    assert type(settings) is CheckpointSettings and settings.keep == DEFAULT_KEEP
    with Checkpointer(None, settings) as ckpt:
        assert ckpt.config is settings and isinstance(ckpt.storage, LocalStorage)
    with pytest.raises(ConfigError, match="not both"):
        Checkpointer(None, settings, keep=3)


@pytest.mark.parametrize("flag", ["--checkpoint-interval-steps", "--checkpoint_interval_steps"])
def test_the_entrypoint_flags_replace_fields_of_the_job_specs_record(flag):
    parser = build_parser("t", lambda group: None, batch_size=4, lr=0.1)
    args = parse_flags(parser, ["--checkpoint-dir", "/d", flag, "5", "--keep", "3"])
    base = CheckpointSettings(mode="s3", uri="s3://b/p", interval_steps=2, async_checkpoint=True)
    assert checkpoint_settings(args, base) == CheckpointSettings(mode="local", local_path="/d", interval_steps=5,
                                                                 keep=3, async_checkpoint=True)
    assert checkpoint_settings(parse_flags(parser, []), base) == base


@pytest.mark.parametrize(("argv", "old", "new"), [
    (["--save-every", "5"], "--save-every", "--checkpoint-interval-steps"),
    (["--save_every=5"], "--save-every", "--checkpoint-interval-steps"),
    (["--async_save", "true"], "--async-save", "--async-checkpoint"),  # a SageMaker hyperparameter {"async_save": true}
])
def test_a_removed_spelling_is_one_line_naming_its_new_one(argv: list[str], old: str, new: str) -> None:
    parser = build_parser("t", lambda group: None, batch_size=4, lr=0.1)
    with pytest.raises(ConfigError) as refused:
        parse_flags(parser, argv)
    assert str(refused.value).startswith(f"{old}=") and f"renamed: use {new}" in str(refused.value)
    assert "\n" not in str(refused.value)
    with pytest.raises(ConfigError, match=r"^async_save=True: renamed: use async_checkpoint="):
        Checkpointer(CheckpointSettings(), async_save=True)  # type: ignore[arg-type]  # the runtime's keyword


@pytest.mark.parametrize(("config", "env", "mode"), [
    (CheckpointSettings(uri="s3://b/p"), _env(on_sagemaker=True, checkpoint_dir="/opt/ml/checkpoints"),
     "sagemaker-sync"),
    (CheckpointSettings(uri="s3://b/p"), _env(on_sagemaker=True), "s3"),
    (CheckpointSettings(local_path="/data/ck"), _env(), "local"),
    (CheckpointSettings(), _env(checkpoint_dir="/x"), "local"),
    (CheckpointSettings(mode="off"), _env(), "off"),
])
def test_auto_resolution(config, env, mode):
    assert resolve_mode(config, env) == mode


def test_container_paths_follow_the_emulated_host_root():
    config = CheckpointSettings(mode="sagemaker-sync", local_path="/opt/ml/checkpoints", uri="s3://b/p")
    storage = open_storage(config, _env(), 0, environ={"SM_DIST_OPT_ML": "/tmp/hosts/algo-2"})
    assert isinstance(storage, SageMakerSyncStorage)
    assert str(storage.root) == "/tmp/hosts/algo-2/checkpoints" and storage.s3_uri == "s3://b/p"
    assert isinstance(open_storage(CheckpointSettings(uri="s3://bucket/p"), _env(), 0), S3Storage)
    assert open_storage(CheckpointSettings(mode="off"), _env(), 0) is None


def test_bad_s3_uri_names_the_field():
    with pytest.raises(ConfigError) as info:
        S3Storage("s3:///prefix-without-bucket")
    assert info.value.field == "checkpoint.uri"


@pytest.mark.slow
def test_manifest_and_storages_import_without_torch_or_boto3():
    code = ("import sys, json, sm_dist.contract.checkpoint, sm_dist.runtime.checkpoint.storage, "
            "sm_dist.runtime.checkpoint.s3, sm_dist.runtime.checkpoint.sagemaker_sync, sm_dist.local.s3_endpoint; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'boto3', 'moto'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == []
