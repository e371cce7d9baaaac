"""Counting a script's checkpoint saves as they begin (sm_dist.local.save_watch): what chaos
kill-in-save:N fires on."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sm_dist.contract.faults import parse_fault
from sm_dist.errors import ConfigError
from sm_dist.local.chaos import parse_faults
from sm_dist.local.save_watch import QUIET_S, SaveWatch, checkpoint_of


@pytest.mark.parametrize(("rel", "unit"), [
    ("checkpoint-40/model.safetensors", "checkpoint-40"),
    ("checkpoint-40", "checkpoint-40"),
    ("step_4/.metadata", "step_4"),
    ("checkpoints/checkpoint_0/optimizer.bin", "checkpoints/checkpoint_0"),
    ("snapshot.pt", "snapshot.pt"),
    ("checkpoints/last.ckpt", "checkpoints/last.ckpt"),
    ("checkpoint-40/model.safetensors.sagemaker-uploaded", None),
    ("checkpoint-20/x.sm-dist-restore.sagemaker-ignore", None),
])
def test_the_checkpoint_a_write_belongs_to(rel: str, unit: str | None) -> None:
    assert checkpoint_of(rel) == unit


def test_writes_to_one_checkpoint_on_any_host_are_one_save() -> None:
    """Another checkpoint, or the same file after a quiet, begins the next save; another file of the
    same checkpoint after a pause (a busy machine) does not."""
    saves: list[tuple[int, str, str]] = []
    watch = SaveWatch({}, lambda n, host, rel: saves.append((n, host, rel)))
    watch.seen("algo-1", "checkpoint-20/model.safetensors", now=1.0)
    watch.seen("algo-1", "checkpoint-20/optimizer.pt", now=1.0 + 2 * QUIET_S)
    watch.seen("algo-2", "checkpoint-20/rng_state_1.pth", now=3.6)
    watch.seen("algo-1", "snapshot.pt", now=4.0)
    watch.seen("algo-1", "snapshot.pt", now=4.0 + QUIET_S / 2)  # the same torch.save
    watch.seen("algo-1", "snapshot.pt", now=4.0 + 3 * QUIET_S)  # rewritten in place: the next save
    watch.seen("algo-1", "checkpoints/checkpoint_0/model.safetensors", now=10.0)
    assert saves == [(1, "algo-1", "checkpoint-20/model.safetensors"), (2, "algo-1", "snapshot.pt"),
                     (3, "algo-1", "snapshot.pt"), (4, "algo-1", "checkpoints/checkpoint_0/model.safetensors")]


def test_the_watch_sees_a_save_begin_in_a_hosts_folder(tmp_path: Path) -> None:
    """inotify on every host's folder and the folders made under it: a save is seen as its first file
    appears, a folder alone is none."""
    folders = {"algo-1": tmp_path / "a1", "algo-2": tmp_path / "a2"}
    for folder in folders.values():
        folder.mkdir()
    second = threading.Event()
    saves: list[tuple[int, str, str]] = []

    def on_save(n: int, host: str, rel: str) -> None:
        saves.append((n, host, rel))
        if n == 2:
            second.set()

    watch = SaveWatch(folders, on_save)
    watch.start()
    try:
        (folders["algo-2"] / "step_2").mkdir()
        (folders["algo-2"] / "step_2" / "__1_0.distcp").write_bytes(b"x")
        (folders["algo-1"] / "step_4").mkdir()
        (folders["algo-1"] / "step_6").mkdir()
        (folders["algo-1"] / "step_6" / "__0_0.distcp").write_bytes(b"x")
        assert second.wait(30), saves
    finally:
        watch.stop()
    assert saves == [(1, "algo-2", "step_2/__1_0.distcp"), (2, "algo-1", "step_6/__0_0.distcp")]


def test_kill_in_save_takes_a_save_number_once() -> None:
    assert str(parse_fault("kill-in-save:2")) == "kill-in-save:2"
    with pytest.raises(ConfigError, match="give a save number >= 1, e.g. kill-in-save:2"):
        parse_fault("kill-in-save")
    with pytest.raises(ConfigError, match="give kill-in-save once"):
        parse_faults(["kill-in-save:1", "kill-in-save:2"])
