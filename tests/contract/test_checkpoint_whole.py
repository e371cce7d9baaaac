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
