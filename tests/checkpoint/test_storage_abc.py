"""The Storage ABC declares every method the checkpointer calls (no hasattr probing)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from sm_dist.runtime.checkpoint import checkpointer
from sm_dist.runtime.checkpoint.storage import LocalStorage, Storage


def test_every_storage_method_the_checkpointer_calls_is_declared() -> None:
    tree = ast.parse(inspect.getsource(checkpointer))
    called = {node.func.attr for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "storage"}
    assert "release" in called
    assert called <= set(dir(Storage)), sorted(called - set(dir(Storage)))


def test_release_of_a_local_folder_keeps_the_checkpoint(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    folder = storage.stage_dir(4, 0)
    (folder / "x").write_bytes(b"1")
    storage.release(4)  # the ABC's default: the folder is the checkpoint itself
    assert (folder / "x").read_bytes() == b"1"
