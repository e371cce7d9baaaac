"""The commit protocol in one process: what is saved, what counts as committed, retention."""

from __future__ import annotations

import json
import logging
import random
import signal

import numpy as np
import pytest
import torch
from torch import nn

from sm_dist.contract.checkpoint import MANIFEST_NAME, Manifest, step_dirname
from sm_dist.errors import CheckpointError, ConfigError
from sm_dist.runtime.checkpoint import Checkpointer, LocalStorage
from sm_dist.runtime.checkpoint.faults import parse_faults
from sm_dist.runtime.checkpoint.retention import plan_deletions
from sm_dist.runtime.checkpoint.signals import final_save_fits, grace_seconds


def _setup(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 12), nn.Dropout(0.2), nn.Linear(12, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return model, optimizer, torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)


def _train(model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: object, steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        x = torch.randn(5, 6) + random.random() + float(np.random.rand())
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses


def _same(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_resume_restores_everything_and_continues_bit_identically(tmp_path):
    model, optimizer, scheduler = _setup()
    _train(model, optimizer, scheduler, 3)
    scaler = torch.amp.GradScaler("cpu", init_scale=512.0)
    with Checkpointer(uri=str(tmp_path), mode="local") as ckpt:
        ckpt.save(3, model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler, epoch=1,
                  extras={"tokens": 123, "history": [torch.arange(3), {"best": 0.5}]})
    expected = _train(model, optimizer, scheduler, 3)

    random.seed(99), np.random.seed(99), torch.manual_seed(99)  # resume must put the RNGs back
    model2, optimizer2, scheduler2 = _setup(seed=7)
    scaler2 = torch.amp.GradScaler("cpu")
    with Checkpointer(uri=str(tmp_path), mode="local") as ckpt:
        state = ckpt.resume(model=model2, optimizer=optimizer2, scheduler=scheduler2, scaler=scaler2)
    assert (state.step, state.epoch, state.extras["tokens"], scaler2.get_scale()) == (3, 1, 123, 512.0)
    assert torch.equal(state.extras["history"][0], torch.arange(3))
    assert _train(model2, optimizer2, scheduler2, 3) == expected
    assert _same(model, model2)


def test_no_checkpoint_resumes_to_none(tmp_path):
    model, optimizer, _ = _setup()
    with Checkpointer(uri=str(tmp_path / "empty"), mode="local") as ckpt:
        assert ckpt.resume(model=model, optimizer=optimizer) is None


def _two_checkpoints(tmp_path):
    model, optimizer, scheduler = _setup()
    with Checkpointer(uri=str(tmp_path), mode="local", keep=None) as ckpt:
        for step in (1, 2):
            _train(model, optimizer, scheduler, 1)
            ckpt.save(step, model=model, optimizer=optimizer)
    return tmp_path / step_dirname(2)


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_damaged_file_is_detected_and_skipped_with_a_warning(tmp_path, caplog, damage):
    newest = _two_checkpoints(tmp_path)
    shard = newest / "model" / "full.pt"
    data = bytearray(shard.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
        shard.write_bytes(bytes(data))
    elif damage == "truncate":
        shard.write_bytes(bytes(data[: len(data) // 3]))
    else:
        shard.unlink()
    model, optimizer, _ = _setup()
    with caplog.at_level(logging.WARNING), Checkpointer(uri=str(tmp_path), mode="local") as ckpt:
        assert ckpt.resume(model=model, optimizer=optimizer).step == 1
    assert f"skipping {tmp_path}/{step_dirname(2)}: model/full.pt" in caplog.text


@pytest.mark.parametrize("manifest", [None, b'{"format": "sm_dist.checkpoint/1", "st', b"[]"])
def test_folder_without_a_valid_manifest_is_not_a_checkpoint(tmp_path, caplog, manifest):
    newest = _two_checkpoints(tmp_path)
    (newest / MANIFEST_NAME).unlink()
    if manifest is not None:  # a torn write on a file system without atomic rename
        (newest / MANIFEST_NAME).write_bytes(manifest)
    model, optimizer, _ = _setup()
    with caplog.at_level(logging.WARNING), Checkpointer(uri=str(tmp_path), mode="local") as ckpt:
        assert ckpt.resume(model=model, optimizer=optimizer).step == 1
    assert step_dirname(2) in caplog.text


def test_manifest_lists_every_file_with_size_and_sha256(tmp_path):
    newest = _two_checkpoints(tmp_path)
    manifest = Manifest.from_json((newest / MANIFEST_NAME).read_text(), where="test")
    on_disk = {p.relative_to(newest).as_posix() for p in newest.rglob("*") if p.is_file()} - {MANIFEST_NAME}
    assert set(manifest.files) == on_disk
    assert all(manifest.files[rel].size == (newest / rel).stat().st_size for rel in on_disk)
    assert manifest.rng_files == {"0": "rng/rank-00000.pt"} and manifest.step == 2


def test_path_traversal_in_a_manifest_is_refused():
    bad = {"format": "sm_dist.checkpoint/1", "step": 1, "epoch": 0, "world_size": 1, "sharded": False,
           "files": {"../../etc/passwd": {"size": 1, "sha256": "0" * 64}}}
    with pytest.raises(CheckpointError, match="leaves the step folder"):
        Manifest.from_json(json.dumps(bad), where="test")


def test_retention_keeps_the_newest_k_and_cleans_debris(tmp_path):
    model, optimizer, _ = _setup()
    (tmp_path / step_dirname(2)).mkdir(parents=True)  # debris of a crashed save
    with Checkpointer(uri=str(tmp_path), mode="local", keep=2) as ckpt:
        for step in (1, 3, 4, 5):
            ckpt.save(step, model=model, optimizer=optimizer)
    assert LocalStorage(tmp_path).list_steps() == [4, 5]


def test_retention_plan_never_deletes_the_newest_commits():
    assert plan_deletions([1, 2, 3, 4], {1, 2, 4}, keep=2, newest=4) == [1, 3]
    assert plan_deletions([1, 5], {1, 5}, keep=2, newest=1) == []  # a newer folder is not ours to judge
    assert plan_deletions([3], {3}, keep=2, newest=3) == []


def test_saving_a_step_again_replaces_the_old_commit(tmp_path):
    model, optimizer, scheduler = _setup()
    with Checkpointer(uri=str(tmp_path), mode="local") as ckpt:
        ckpt.save(2, model=model, optimizer=optimizer)
        _train(model, optimizer, scheduler, 1)
        ckpt.save(2, model=model, optimizer=optimizer)  # e.g. a rerun after resuming from step 1
    model2, optimizer2, _ = _setup(seed=5)
    with Checkpointer(uri=str(tmp_path), mode="local") as ckpt:
        ckpt.resume(model=model2, optimizer=optimizer2)
    assert _same(model, model2)


@pytest.mark.parametrize(("field", "kwargs"), [
    ("checkpoint.keep", {"keep": 1}),
    ("checkpoint.mode", {"mode": "s4"}),
    ("checkpoint.uri", {"mode": "s3", "uri": "/tmp/x"}),
    ("checkpoint.interval_steps", {"interval_steps": 0}),
    ("checkpoint.uri", {}),
])
def test_bad_settings_name_the_field(tmp_path, field, kwargs):
    with pytest.raises(ConfigError) as info:
        Checkpointer(**kwargs)
    assert info.value.field == field


def test_extras_that_need_code_to_load_are_rejected(tmp_path):
    model, optimizer, _ = _setup()
    with Checkpointer(uri=str(tmp_path), mode="local") as ckpt:
        with pytest.raises(ConfigError, match="weights_only"):
            ckpt.save(1, model=model, optimizer=optimizer, extras={"obj": object()})


def test_background_save_copies_state_and_commits(tmp_path):
    model, optimizer, scheduler = _setup()
    _train(model, optimizer, scheduler, 1)
    snapshot = {k: v.clone() for k, v in model.state_dict().items()}
    with Checkpointer(uri=str(tmp_path), mode="local") as ckpt:
        assert ckpt.save(1, model=model, optimizer=optimizer, blocking=False) is None
        _train(model, optimizer, scheduler, 2)  # training goes on while the save runs
    model2, optimizer2, _ = _setup(seed=3)
    with Checkpointer(uri=str(tmp_path), mode="local") as ckpt:
        assert ckpt.resume(model=model2, optimizer=optimizer2).step == 1
    assert all(torch.equal(snapshot[k], v) for k, v in model2.state_dict().items())


class _BrokenStorage(LocalStorage):
    def publish(self, step, src, rel):
        raise OSError(28, "No space left on device")


def test_failed_background_save_is_reported_and_never_committed(tmp_path):
    model, optimizer, _ = _setup()
    ckpt = Checkpointer(storage=_BrokenStorage(tmp_path))
    ckpt.save(1, model=model, optimizer=optimizer, blocking=False)
    with pytest.raises(CheckpointError, match="No space left"):
        ckpt.wait()
    assert LocalStorage(tmp_path).read_manifest(1) is None
    ckpt.close()


def test_sigterm_makes_maybe_save_commit_and_exit_interrupted(tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    monkeypatch.setenv("SM_DIST_INTERRUPT_MARKER", str(marker))
    model, optimizer, _ = _setup()
    ckpt = Checkpointer(uri=str(tmp_path / "ckpt"), mode="local", interval_steps=100)
    ckpt.maybe_save(1, model=model, optimizer=optimizer)
    assert not ckpt.stop_requested()
    signal.raise_signal(signal.SIGTERM)  # the handler only records it
    with pytest.raises(SystemExit) as info:
        ckpt.maybe_save(2, model=model, optimizer=optimizer)
    assert info.value.code == 143
    assert marker.read_text().strip() == "2"
    assert LocalStorage(tmp_path / "ckpt").read_manifest(2) is not None
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler put back


def test_grace_comes_from_torchruns_shutdown_timeout():
    new = "2.13.0"
    assert grace_seconds({}, torch_version=new) == 30.0
    assert grace_seconds({"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "100"}, torch_version=new) == 100.0
    assert grace_seconds({"PET_SHUTDOWN_TIMEOUT": "50", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "100"}, torch_version=new) == 50.0


@pytest.mark.parametrize(("version", "grace"), [("2.11.0", 30.0), ("2.6.0+cu124", 30.0), ("2.12.0", 100.0),
                                                 ("2.13.0+cpu", 100.0)])
def test_grace_is_torchruns_fixed_30s_where_it_ignores_the_variable(version, grace):
    # torch < 2.12's torchrun SIGKILLs 30 s after forwarding SIGTERM (docs/PLATFORM.md §1.3):
    # planning a final save against PID 1's 100 s would lose it
    assert grace_seconds({"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "100"}, torch_version=version) == grace


def test_final_save_only_when_it_fits_in_the_grace_time():
    assert final_save_fits(elapsed=1.0, predicted=None, grace=30)
    assert final_save_fits(elapsed=1.0, predicted=10.0, grace=30)
    assert not final_save_fits(elapsed=20.0, predicted=10.0, grace=30)


def test_fault_hook_spec_is_parsed_and_fires_only_in_the_first_attempt():
    assert parse_faults({"SM_DIST_FAULT": "crash-in-save:7"}) == {"crash-in-save": 7}
    assert parse_faults({"SM_DIST_FAULT": "crash-in-save:7", "TORCHELASTIC_RESTART_COUNT": "1"}) == {}
    with pytest.raises(ConfigError):
        parse_faults({"SM_DIST_FAULT": "crash-everywhere"})
