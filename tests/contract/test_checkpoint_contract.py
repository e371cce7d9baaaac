"""One checkpoint contract: "committed", keep and the modes mean the same to spec, launch, local and runtime."""

from __future__ import annotations

from pathlib import Path

import pytest

from sm_dist.contract.checkpoint import (
    MANIFEST_NAME,
    MIN_KEEP,
    CheckpointMode,
    CheckpointSettings,
    FileEntry,
    Manifest,
    committed_manifest,
    step_dirname,
)
from sm_dist.errors import ConfigError
from sm_dist.jobspec import JobSpec
from sm_dist.local.job import list_checkpoints, store_manifests
from sm_dist.local.stores import FolderStore
from sm_dist.planning.config import LaunchConfig
from sm_dist.runtime.checkpoint.load import select_checkpoint
from sm_dist.runtime.checkpoint.retention import apply_retention
from sm_dist.runtime.checkpoint.storage import LocalStorage

#: A manifest file that is there but is not a manifest: the loader skips it, so nobody may call it a commit.
UNPARSABLE = (b'{"step": 2, "world_size": 1', b'{"step": 2, "world_size": 1, "files": {}}', b"[]")


def _write_step(root: Path, step: int, manifest: bytes | None) -> None:
    folder = root / step_dirname(step)
    (folder / "model").mkdir(parents=True)
    data = b"weights of step %d" % step
    (folder / "model" / "full.pt").write_bytes(data)
    if manifest is not None:
        (folder / MANIFEST_NAME).write_bytes(manifest)


def _manifest(root: Path, step: int) -> bytes:
    from sm_dist.contract.checkpoint import sha256_file

    path = root / step_dirname(step) / "model" / "full.pt"
    files = {"model/full.pt": FileEntry(size=path.stat().st_size, sha256=sha256_file(path))}
    return Manifest(step=step, epoch=0, world_size=1, sharded=False, files=files).to_json().encode()


@pytest.mark.parametrize("bad", UNPARSABLE)
def test_unparsable_manifest_is_not_committed_anywhere(tmp_path: Path, bad: bytes) -> None:
    _write_step(tmp_path, 1, None)
    (tmp_path / step_dirname(1) / MANIFEST_NAME).write_bytes(_manifest(tmp_path, 1))
    _write_step(tmp_path, 2, bad)
    _write_step(tmp_path, 3, None)
    assert committed_manifest(bad, where="t") is None
    assert committed_manifest(None, where="t") is None
    # the runtime's loader
    selected = select_checkpoint(LocalStorage(tmp_path))
    assert selected is not None and selected[0] == 1
    # local mode's listing (keys and manifests read from its store)
    store = FolderStore(tmp_path)
    infos = list_checkpoints("s3://b/run", store.list(), store_manifests(store))
    assert [(i.step, i.committed) for i in infos] == [(3, False), (2, False), (1, True)]
    assert infos[2].uri == "s3://b/run/step-000000001/" and infos[2].world_size == 1


def test_retention_treats_an_unparsable_manifest_as_debris(tmp_path: Path) -> None:
    for step in (1, 2, 4):
        _write_step(tmp_path, step, None)
        (tmp_path / step_dirname(step) / MANIFEST_NAME).write_bytes(_manifest(tmp_path, step))
    _write_step(tmp_path, 3, UNPARSABLE[0])
    deleted = apply_retention(LocalStorage(tmp_path), 2, newest=4)
    # kept: the two newest commits (4, 2); step 3 is not a commit and is older than the newest one
    assert sorted(deleted) == [1, 3]


def test_keep_one_is_refused_by_spec_launch_config_and_runtime() -> None:
    with pytest.raises(ConfigError, match="checkpoint.keep"):
        CheckpointSettings(keep=1)
    with pytest.raises(ConfigError, match="checkpoint.keep"):
        JobSpec.from_dict({"entry": "t.py", "checkpoint": {"keep": 1}})
    with pytest.raises(ConfigError, match="checkpoint.keep"):
        CheckpointSettings(keep=1)
    with pytest.raises(ConfigError, match="checkpoint_keep"):
        LaunchConfig(entry="t.py", instance_type="ml.g5.xlarge", checkpoint_keep=1)
    assert CheckpointSettings(keep=MIN_KEEP).keep == CheckpointSettings(keep=MIN_KEEP).keep == MIN_KEEP


def test_one_mode_enum_everywhere() -> None:
    assert JobSpec(entry="t.py").checkpoint == CheckpointSettings()  # one record: the spec's is the runtime's
    assert CheckpointSettings(mode="sagemaker-sync").mode is CheckpointMode.SAGEMAKER_SYNC
    assert LaunchConfig(entry="t.py", instance_type="ml.g5.xlarge", checkpoint_mode="off").checkpoint_mode is CheckpointMode.OFF
    for build in (lambda: CheckpointSettings(mode="cloud"), lambda: CheckpointSettings(mode="cloud")):
        with pytest.raises(ConfigError, match="checkpoint.mode"):
            build()
    with pytest.raises(ConfigError, match="checkpoint_mode"):
        LaunchConfig(entry="t.py", instance_type="ml.g5.xlarge", checkpoint_mode="cloud")


def test_job_spec_json_keeps_its_shape() -> None:
    spec = JobSpec(entry="t.py", checkpoint={"mode": "s3", "uri": "s3://b/p", "keep": 3, "interval_steps": 5})
    data = spec.to_dict()["checkpoint"]
    assert data == {"mode": "s3", "uri": "s3://b/p", "local_path": None, "keep": 3, "interval_steps": 5,
                    "async_checkpoint": False}
    assert JobSpec.from_json(spec.to_json()) == spec
    assert JobSpec.from_dict({"entry": "t.py", "checkpoint": {"keep": None}}).checkpoint.keep is None


@pytest.mark.parametrize(("flag", "value", "field"), [("--checkpoint-mode", "cloud", "checkpoint_mode='cloud'"),
                                                      ("--checkpoint-keep", "1", "checkpoint_keep=1")])
def test_cli_refuses_what_the_contract_refuses(capsys: pytest.CaptureFixture[str], flag: str, value: str,
                                               field: str) -> None:
    from sm_dist.cli import main

    entrypoints = Path(__file__).parents[2] / "entrypoints"
    assert main(["fit", "cnn.py", "--source-dir", str(entrypoints), "--local", "--dry-run", flag, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0], err
