"""A checkpoint's step from its name or metadata, the worker's `[sm_dist] restored` line, and what
local mode makes of it (resumed_from for scripts that print no resumed line of sm_dist's)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sm_dist.contract.checkpoint_names import metadata_step, name_step, newest_checkpoint, save_number
from sm_dist.contract.log_lines import RestoredLine, read_line, restored_line
from sm_dist.local.progress import Progress


@pytest.mark.parametrize(("name", "step"), [
    ("checkpoint-860", 860),  # Hugging Face Trainer
    ("checkpoint_2", None),  # Accelerate's automatic naming: its third save, not a step (save_number)
    ("step-00000008", 8),  # sm_dist's step folders
    ("step_8", 8),  # a DCP script's
    ("epoch=19-step=20.ckpt", 20),  # Lightning's ModelCheckpoint: the step, not the epoch
    ("global_step20", 20),  # DeepSpeed
    ("last.ckpt", None), ("snapshot.pt", None), ("checkpoints", None), ("stepper-3", None), ("model-v2.pt", None),
])
def test_the_step_in_a_checkpoints_name(name: str, step: int | None) -> None:
    assert name_step(name) == step


def test_the_step_in_a_torch_save_files_top_level_keys(tmp_path: Path) -> None:
    """Lightning's last.ckpt (global_step), pytorch/examples' snapshot.pt (EPOCHS_RUN): the top-level
    dict's entry, never a nested one (an optimizer's per-parameter "step"), a key used twice (memoized) too."""
    torch = pytest.importorskip("torch")
    torch.save({"epoch": 2, "global_step": 12, "state_dict": {"w": torch.ones(2)}}, tmp_path / "last.ckpt")
    torch.save({"MODEL_STATE": {"w": torch.ones(3)}, "OPTIMIZER_STATE": {"state": {0: {"step": 99}}},
                "EPOCHS_RUN": 5}, tmp_path / "snapshot.pt")
    torch.save({"optimizer": {"state": {0: {"step": torch.tensor(7.0)}}}, "step": 30}, tmp_path / "memo.pt")
    torch.save({"model": {"w": torch.ones(1)}}, tmp_path / "none.pt")
    (tmp_path / "notes.txt").write_text("step 3")
    assert metadata_step(tmp_path / "last.ckpt") == 12
    assert metadata_step(tmp_path / "snapshot.pt") == 5
    assert metadata_step(tmp_path / "memo.pt") == 30
    assert metadata_step(tmp_path / "none.pt") is None and metadata_step(tmp_path / "notes.txt") is None
    assert metadata_step(tmp_path / "missing.pt") is None


def _touch(path: Path, when: float, folder: bool = True) -> None:
    path.mkdir(parents=True) if folder else path.write_bytes(b"x")
    os.utime(path, (when, when))


def test_accelerates_checkpoint_n_counts_saves_and_a_registered_step_is_read(tmp_path: Path) -> None:
    """checkpoint_10 is newer than checkpoint_9 whatever the times; its step is known only from an object
    the script registered (custom_checkpoint_0.pkl), never from random_states_0.pkl's accumulation counter."""
    torch = pytest.importorskip("torch")
    assert [save_number(n) for n in ("checkpoint_0", "checkpoint_12", "checkpoint-12", "checkpoints")] == [0, 12, None, None]
    acc = tmp_path / "checkpoints"
    for index in (9, 10):
        _touch(acc / f"checkpoint_{index}", 200 - index)
        torch.save({"step": 1, "random_state": 3}, acc / f"checkpoint_{index}" / "random_states_0.pkl")
    assert newest_checkpoint(tmp_path) == ("checkpoints/checkpoint_10", None)
    torch.save({"step": 33}, acc / "checkpoint_10" / "custom_checkpoint_0.pkl")
    assert newest_checkpoint(tmp_path) == ("checkpoints/checkpoint_10", 33)
    # Accelerate's examples count completed_steps; a registered object holding it names the step
    torch.save({"completed_steps": 36, "epoch": 1}, acc / "checkpoint_10" / "custom_checkpoint_0.pkl")
    assert newest_checkpoint(tmp_path) == ("checkpoints/checkpoint_10", 36)


def test_a_fabric_checkpoints_iteration_is_its_step(tmp_path: Path) -> None:
    """Lightning Fabric's examples save {"model", "optimizer", "iteration"} with fabric.save: the top-level
    iteration, read from the pickle's opcodes (the optimizer's own per-parameter "step" never)."""
    torch = pytest.importorskip("torch")
    torch.save({"model": {"w": torch.ones(2)}, "optimizer": {"state": {0: {"step": torch.tensor(5.0)}}},
                "iteration": 14}, tmp_path / "fabric.ckpt")
    assert metadata_step(tmp_path / "fabric.ckpt") == 14
    assert newest_checkpoint(tmp_path) == ("fabric.ckpt", 14)


def test_the_newest_checkpoint_of_each_kind_of_folder(tmp_path: Path) -> None:
    """The highest step by name, whatever the times (a restored folder is newer than the step it
    holds); Accelerate's checkpoints/ is opened; a file without a step in its name: the newest."""
    hf, acc, light, dcp, empty = (tmp_path / n for n in ("hf", "acc", "light", "dcp", "empty"))
    _touch(hf / "checkpoint-40", 100)
    _touch(hf / "checkpoint-860", 50)
    _touch(hf / "runs", 200)
    for index in range(3):
        _touch(acc / "checkpoints" / f"checkpoint_{index}", 100 + index)
    _touch(light, 0)
    _touch(light / "last.ckpt", 300, folder=False)
    _touch(light / "epoch=1-step=8.ckpt", 200, folder=False)
    _touch(dcp / "step_4", 100)
    _touch(dcp / "step_8.sagemaker-uploading", 300, folder=False)
    empty.mkdir()
    assert newest_checkpoint(hf) == ("checkpoint-860", 860)
    assert newest_checkpoint(acc) == ("checkpoints/checkpoint_2", None)  # a save number, not a step
    assert newest_checkpoint(light) == ("epoch=1-step=8.ckpt", 8)
    assert newest_checkpoint(dcp) == ("step_4", 4)
    assert newest_checkpoint(empty) is None and newest_checkpoint(tmp_path / "missing") is None
    _touch(empty / "snapshot.pt", 10, folder=False)
    assert newest_checkpoint(empty) == ("snapshot.pt", None)  # not a torch.save file: its step unknown


def test_the_restored_line_is_read_back_and_is_no_step_line() -> None:
    line = restored_line("algo-2", "/opt/ml/checkpoints/epoch=2-step=12.ckpt", 12)
    assert line == "[sm_dist] restored step=12 on algo-2: /opt/ml/checkpoints/epoch=2-step=12.ckpt"
    assert read_line("[rank0]: " + line) == RestoredLine("algo-2", "/opt/ml/checkpoints/epoch=2-step=12.ckpt", 12)
    unknown = restored_line("algo-1", "/opt/ml/checkpoints/snapshot.pt", None)
    assert read_line(unknown) == RestoredLine("algo-1", "/opt/ml/checkpoints/snapshot.pt", None)


def test_the_worker_names_what_it_restored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sm_dist.container.worker import _name_restored

    command = ["python", "-m", "sm_dist.runtime.restore.folder_restore", "--folder", str(tmp_path), "--uri", "s3://b/c"]
    _name_restored(command, {"SM_CURRENT_HOST": "algo-2"})
    assert capsys.readouterr().err == ""  # an empty folder: nothing restored, nothing said
    (tmp_path / "checkpoint-20").mkdir()
    _name_restored(command, {"SM_CURRENT_HOST": "algo-2"})
    assert capsys.readouterr().err == f"[sm_dist] restored step=20 on algo-2: {tmp_path}/checkpoint-20\n"


#: What the byo scripts print, as their host logs show it (local mode prefixes nothing on a line).
HF_BAR = " 17%|█▋        | 25/150 [00:04<00:19,  6.31it/s]"
LIGHTNING_BAR = "Epoch 2:  50%|█████     | 2/4 [00:00<00:00, 41.12it/s]"
ACCELERATE_BAR = " 40%|████      | 8/20 [00:01<00:01,  7.70it/s]"  # the docs' tqdm(range(num_training_steps))


def test_progress_takes_resumed_from_the_restore_where_the_script_prints_none() -> None:
    """A Lightning run killed at epoch 2: both hosts restore epoch=1-step=8.ckpt, the bar goes on; the
    restores of the host that printed most count once per restart, not once per host."""
    progress = Progress()
    for n in range(1, 5):
        progress.feed(f"Epoch 0:  {n * 25}%|██| {n}/4 [00:00<00:00, 41.12it/s]", "algo-1")
    progress.feed(LIGHTNING_BAR, "algo-1")
    for host in ("algo-1", "algo-2"):
        progress.feed(restored_line(host, "/opt/ml/checkpoints/epoch=1-step=8.ckpt", 8), host)
    progress.feed("Epoch 7: 100%|██████████| 4/4 [00:00<00:00, 40.00it/s]", "algo-1")
    assert progress.steps == 32 and progress.resumed_from == []
    assert progress.restores == [("/opt/ml/checkpoints/epoch=1-step=8.ckpt", 8)]
    other = Progress()
    other.feed(HF_BAR, "algo-1")
    other.feed(ACCELERATE_BAR, "algo-2")  # a bar of another total on another host: its own first bar
    assert other.steps == 25


def test_the_summary_names_the_checkpoint_resumed_from() -> None:
    from sm_dist.local.cost import LocalCost
    from sm_dist.local.summary import LocalSummary

    cost = LocalCost(local_usd=0.0, sagemaker_usd=None, instance_count=2, instance_type="ml.g5.xlarge",
                     billable_seconds=1.0, usd_per_hour=None, price_date=None, price_source=None)
    base = {"job_name": "j", "status": "Completed", "hosts": 2, "processes_per_host": 1, "wall_seconds": 1.0,
            "cost": cost, "restarts": 1, "in_job_restarts": 1}
    known = LocalSummary(**base, resumed_from=(20,), resumed_checkpoints=("/opt/ml/checkpoints/checkpoint-20",))
    assert "resumed from    step 20  (/opt/ml/checkpoints/checkpoint-20)" in str(known)
    assert known.to_dict()["resumed_checkpoints"] == ["/opt/ml/checkpoints/checkpoint-20"]
    accelerate = LocalSummary(**base, resumed_checkpoints=("/opt/ml/checkpoints/checkpoints/checkpoint_2",))
    assert ("resumed from    save 2, its step unknown (Accelerate numbers its saves from 0)  "
            "(/opt/ml/checkpoints/checkpoints/checkpoint_2)") in str(accelerate)
    unknown = LocalSummary(**base, resumed_checkpoints=("/opt/ml/checkpoints/model.bin",))
    assert "resumed from    /opt/ml/checkpoints/model.bin  (its step unknown" in str(unknown)
