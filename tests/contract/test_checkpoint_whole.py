"""Which third-party checkpoints were not written to their end (sm_dist.contract.checkpoint_whole), and
the worker removing them from a restored folder before the script starts, saying which and why."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from sm_dist.container import worker
from sm_dist.contract.checkpoint_whole import cut_short, interrupted


def _safetensors(path: Path, data_bytes: int, *, cut: int = 0) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [data_bytes // 4], "data_offsets": [0, data_bytes]}}).encode()
    blob = struct.pack("<Q", len(header)) + header + b"\0" * data_bytes
    path.write_bytes(blob[: len(blob) - cut])


def _hf(folder: Path, *, last: bool) -> Path:
    folder.mkdir(parents=True)
    _safetensors(folder / "model.safetensors", 64)
    (folder / "training_args.bin").write_bytes(b"x")
    if last:
        (folder / "trainer_state.json").write_text("{}")
    return folder


def test_each_formats_last_file_decides(tmp_path: Path) -> None:
    """Trainer's trainer_state.json, DCP's .metadata, Accelerate's random_states_0.pkl; a folder with no
    file yet; sm_dist's own step folders, markers and formats no rule knows are left alone."""
    _hf(tmp_path / "checkpoint-20", last=True)
    _hf(tmp_path / "checkpoint-40", last=False)
    (tmp_path / "checkpoint-60").mkdir()  # killed right after Trainer made the folder
    (tmp_path / "checkpoint-80").mkdir()  # killed after save_pretrained's first file, before the weights
    (tmp_path / "checkpoint-80" / "config.json").write_text("{}")
    diffusers = tmp_path / "diffusers" / "checkpoint-90"  # accelerator.save_state into checkpoint-N: Accelerate's
    diffusers.mkdir(parents=True)
    for file in ("optimizer.bin", "random_states_0.pkl"):
        (diffusers / file).write_bytes(b"a")
    for name, files in (("step_4", ["__0_0.distcp", "__1_0.distcp", ".metadata"]), ("step_5", ["__0_0.distcp", "__0.metadata"]),
                        ("step_6", ["__0_0.distcp", ".metadata.tmp"])):
        (tmp_path / name).mkdir()
        for file in files:
            (tmp_path / name / file).write_bytes(b"d")
    for name, files in (("checkpoint_0", ["optimizer.bin", "random_states_0.pkl"]), ("checkpoint_1", ["optimizer.bin"])):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
        for file in files:
            (tmp_path / "checkpoints" / name / file).write_bytes(b"a")
    (tmp_path / "checkpoint-10").mkdir()  # older than checkpoint-20, whole: a leftover no script resumes from
    (tmp_path / "checkpoint-10" / "rng_state_1.pth").write_bytes(b"r")  # (Trainer rotates rank 0's host only)
    (tmp_path / "step-000000008").mkdir()  # sm_dist's: its manifest decides, elsewhere
    (tmp_path / "notes-3").mkdir()
    (tmp_path / "notes-3" / "plan.txt").write_text("a format nothing here knows")
    (tmp_path / "step_6.sagemaker-uploaded").touch()
    found = {i.rel: i.why for i in interrupted(tmp_path)}
    assert set(found) == {"checkpoint-40", "checkpoint-60", "checkpoint-80", "step_6", "checkpoints/checkpoint_1"}, found
    assert found["checkpoint-40"] == "no trainer_state.json (Hugging Face Trainer writes it last)"
    assert found["checkpoint-60"] == found["checkpoint-80"] == found["checkpoint-40"]  # the same rule
    assert found["step_6"].startswith("*.distcp files but no .metadata")
    assert found["checkpoints/checkpoint_1"].startswith("no random_states_0.pkl")
    assert interrupted(diffusers.parent) == []  # whole by Accelerate's rule, though named as Trainer's


def test_a_torch_save_or_safetensors_file_cut_short(tmp_path: Path) -> None:
    """The end of the file is checked: torch.save's zip directory, the bytes a safetensors header names;
    a Lightning folder of .ckpt files is looked into, each file judged alone."""
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.ones(64)}, tmp_path / "snapshot.pt")
    whole = (tmp_path / "snapshot.pt").read_bytes()
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "epoch=0-step=4.ckpt").write_bytes(whole)
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(whole[: len(whole) // 2])
    _safetensors(tmp_path / "adapter-3.safetensors", 256, cut=10)
    _safetensors(tmp_path / "whole-3.safetensors", 256)
    assert cut_short(tmp_path / "snapshot.pt") is None and cut_short(tmp_path / "whole-3.safetensors") is None
    found = {i.rel: i.why for i in interrupted(tmp_path)}
    assert set(found) == {"checkpoints/last.ckpt", "adapter-3.safetensors"}, found
    assert "no zip directory" in found["checkpoints/last.ckpt"]
    assert found["adapter-3.safetensors"].endswith("(318 bytes of 328 its header names)")


def test_the_worker_removes_what_a_fault_cut_short_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The restored folder loses the half-written checkpoint-40 before the script looks; the `[sm_dist]
    restored` line then names the newest whole one, checkpoint-20."""
    folder = tmp_path / "checkpoints"
    _hf(folder / "checkpoint-20", last=True)
    _hf(folder / "checkpoint-40", last=False)
    command = ["python", "-m", "x", "--folder", str(folder), "--uri", "s3://b/p"]
    env = {"SM_CURRENT_HOST": "algo-2"}
    worker._drop_interrupted(command, env)
    worker._name_restored(command, env)
    err = capsys.readouterr().err
    assert not (folder / "checkpoint-40").exists() and (folder / "checkpoint-20" / "trainer_state.json").is_file()
    assert (f"[sm_dist worker] algo-2: {folder}/checkpoint-40 was not written to its end (no trainer_state.json "
            "(Hugging Face Trainer writes it last)): a fault hit the save; removed, so the script resumes from the "
            "newest whole checkpoint\n") in err, err
    assert f"[sm_dist] restored step=20 on algo-2: {folder}/checkpoint-20\n" in err


def test_hosts_sharing_one_folder_remove_a_cut_short_checkpoint_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A Slurm job's nodes restore from one shared folder: both judge checkpoint-40 cut short, the first removes it
    and says so, the second (its scan made before the first removed it) finds it gone and says nothing."""
    from sm_dist.contract import checkpoint_whole

    folder = tmp_path / "checkpoints"
    _hf(folder / "checkpoint-20", last=True)
    _hf(folder / "checkpoint-40", last=False)
    command = ["python", "-m", "x", "--folder", str(folder), "--uri", "s3://b/p"]
    seen_by_both = interrupted(folder)
    assert [i.rel for i in seen_by_both] == ["checkpoint-40"]
    monkeypatch.setattr(checkpoint_whole, "interrupted", lambda _folder: seen_by_both)
    worker._drop_interrupted(command, {"SM_CURRENT_HOST": "sm-n1"})
    worker._drop_interrupted(command, {"SM_CURRENT_HOST": "sm-n2"})
    err = capsys.readouterr().err
    assert err.count("was not written to its end") == 1 and f"sm-n1: {folder}/checkpoint-40 was not" in err, err
    assert "sm-n2" not in err
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint-20"]  # nothing set aside is left


def _own(folder: Path, *files: str) -> None:
    folder.mkdir(parents=True)
    for file in files:
        (folder / file).write_bytes(b"o")


def test_a_folder_no_rule_knows_is_judged_by_the_older_one_of_its_kind(tmp_path: Path) -> None:
    """A script's own format (numpy shards, a JSON of its step): the newest folder lacking files its older
    whole sibling holds (numbers in names aside) was still being written; a folder with every file, a first
    save with nothing to compare, an older leftover and a folder of runs whose checkpoints sit a level down
    are left alone."""
    _own(tmp_path / "ckpt_000100", "rank0.npy", "rank1.npy", "meta.json")
    _own(tmp_path / "ckpt_000200", "rank0.npy", "rank1.npy", "meta.json", "meta.json.sagemaker-uploaded")
    _own(tmp_path / "ckpt_000300", "rank0.npy")  # the fault hit after its first shard
    _own(tmp_path / "weights-7", "model-00001-of-00002.npz", "model-00002-of-00002.npz")  # a first save
    _own(tmp_path / "runs" / "version_0", "hparams.yaml")
    _own(tmp_path / "runs" / "version_0" / "checkpoints", "epoch=1.npz")
    _own(tmp_path / "runs" / "version_1", "hparams.yaml")  # the restarted run has not saved yet
    found = {i.rel: i.why for i in interrupted(tmp_path)}
    assert found == {"ckpt_000300": "no meta.json, 1 of 2 rank#.npy of what ckpt_000200 holds (a save writes the same "
                                    "files each time: it was still being written)"}, found
    for file in ("meta.json", "rank1.npy"):  # every file: nothing to say
        (tmp_path / "ckpt_000300" / file).write_bytes(b"o")
    assert interrupted(tmp_path) == []
    _own(tmp_path / "ckpt_000050", "rank0.npy")  # an older leftover of another host: no resume point
    assert interrupted(tmp_path) == []


def test_an_empty_torch_save_file_was_cut_short_before_its_first_byte(tmp_path: Path) -> None:
    """Lightning copies a .ckpt into a folder on another mount (open, then the bytes): a fault between the two
    leaves an empty file, which no torch.save writes; an empty file of another suffix is left alone."""
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.ones(4)}, tmp_path / "epoch=1-step=8.ckpt")
    (tmp_path / "epoch=2-step=12.ckpt").touch()
    (tmp_path / "notes.txt").touch()
    found = {i.rel: i.why for i in interrupted(tmp_path)}
    assert list(found) == ["epoch=2-step=12.ckpt"] and found["epoch=2-step=12.ckpt"].startswith("epoch=2-step=12.ckpt is empty"), found
