"""Which checkpoint a folder holds and its step, for scripts sm_dist did not write (stdlib).

After an in-job restart the worker restores each host's checkpoint folder (sm_dist.container.worker)
and names the checkpoint a script resuming from "the newest in my folder" takes, in the
`[sm_dist] restored` line (sm_dist.contract.log_lines) local mode reads as `resumed_from`. The step
comes from the checkpoint's own name where its community puts one there:

    checkpoint-860              Hugging Face Trainer (its global step)
    step-00000008, step_8       sm_dist's step folders, DCP scripts
    epoch=19-step=20.ckpt       Lightning's ModelCheckpoint (its global step)
    global_step20               DeepSpeed

else from the checkpoint's metadata: a `torch.save` file's top-level `global_step` (Lightning's
last.ckpt), `step`, `completed_steps`, `iteration` (Lightning Fabric's examples) or `EPOCHS_RUN` (pytorch/examples' snapshot.pt, whose bar counts epochs), read
from the pickle's opcodes, never by unpickling (nothing in the file is run). Neither: the step is
None, unknown, never guessed.

Accelerate's automatic naming, `checkpoints/checkpoint_2`, numbers its saves from 0, not steps
(`save_number`): the newest is the highest number, and its step is known only where the script
registered an object whose state holds one (`custom_checkpoint_0.pkl`'s top-level `step` or
`completed_steps`);
`random_states_0.pkl`'s `step` is Accelerate's gradient-accumulation counter, never read.
"""

from __future__ import annotations

import os
import pickletools
import re
import zipfile
from pathlib import Path

#: A step in a name: "step-8", "step_00000008", "step=20" (Lightning), "global_step20" (DeepSpeed).
_STEP_RE = re.compile(r"(?:^|[^a-z])step[-_=]?(\d+)", re.IGNORECASE)
#: Hugging Face's checkpoint-N (its global step).
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$", re.IGNORECASE)
#: Accelerate's checkpoint_N (ProjectConfiguration(automatic_checkpoint_naming=True)): the Nth save, from 0.
_SAVE_RE = re.compile(r"^checkpoint_(\d+)$")
#: What Accelerate names the state of an object the script registered for checkpointing.
_CUSTOM_RE = re.compile(r"^custom_checkpoint_\d+\.pkl$")
#: Top-level keys of a torch.save dict that hold the step, in order of preference.
#: Lightning's `global_step`, `step`, pytorch/examples' `EPOCHS_RUN`, Fabric's `iteration` (its examples'
#: state dict), Accelerate's examples' `completed_steps` (in a registered object's state).
META_KEYS = ("global_step", "step", "completed_steps", "iteration", "EPOCHS_RUN")
#: Names that are sync markers or partial writes, never a checkpoint.
_SKIP = (".sagemaker-uploaded", ".sagemaker-uploading", ".sagemaker-ignore", ".tmp")
#: Files that make the folder holding them a checkpoint, not a group of checkpoints (DCP's data, HF's and
#: Accelerate's weights, optimizer and RNG states).
_OWN_FILES = (".distcp", ".safetensors", "optimizer.pt", "optimizer.bin", "trainer_state.json", "random_states_0.pkl")
_PUT_OPS = {"BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"}
_GET_OPS = {"BINGET", "LONG_BINGET", "GET"}
_INT_OPS = {"BININT", "BININT1", "BININT2", "LONG1", "INT", "LONG"}
#: The largest pickle read for metadata (a checkpoint's tensors are separate records of its zip).
_PICKLE_LIMIT = 16 << 20


def name_step(name: str) -> int | None:
    """The step in a checkpoint's name (see the module's table), or None."""
    stem = name.rstrip("/")
    match = _STEP_RE.search(stem) or _CHECKPOINT_RE.match(stem)
    return int(match.group(1)) if match else None


def save_number(name: str) -> int | None:
    """N of Accelerate's `checkpoint_N` (its saves counted from 0, not a step), else None."""
    match = _SAVE_RE.match(name.rstrip("/"))
    return int(match.group(1)) if match else None


def _registered_step(folder: Path) -> int | None:
    """The step an Accelerate save's registered objects record (`custom_checkpoint_N.pkl`), else None."""
    for path in sorted(p for p in _entries(folder) if _CUSTOM_RE.match(p.name)):
        step = metadata_step(path)
        if step is not None:
            return step
    return None


def _pickle_of(path: Path) -> bytes | None:
    """The pickle of a torch.save zip (its `*/data.pkl` record), else None."""
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.filename.endswith("/data.pkl") and info.file_size <= _PICKLE_LIMIT:
                    return archive.read(info)
    except (OSError, zipfile.BadZipFile, ValueError):
        return None
    return None


def _root_items(data: bytes) -> dict[str, int]:
    """The int values of str keys set on the pickle's root dict, from its opcodes on a stack of
    placeholders (strings and ints kept as they are; nothing is built or run)."""
    found: dict[str, int] = {}
    stack: list[object] = []
    marks: list[int] = []
    memo: dict[int, object] = {}

    def record(pairs: list[object]) -> None:
        if len(stack) == 1:  # set on the object at the bottom: the root dict
            for k, v in zip(pairs[::2], pairs[1::2], strict=False):
                if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool):
                    found.setdefault(k, v)

    for op, arg, _ in pickletools.genops(data):
        before, after = op.stack_before, op.stack_after
        if op.name == "MARK":
            marks.append(len(stack))
        elif op.name in _PUT_OPS:  # a key used again is fetched from the memo
            memo[arg if isinstance(arg, int) else len(memo)] = stack[-1]  # MEMOIZE: the next index
        elif op.name in _GET_OPS:
            stack.append(memo.get(arg, object()) if isinstance(arg, int) else object())
        elif op.name in ("SETITEM", "SETITEMS"):
            start = marks.pop() if op.name == "SETITEMS" else len(stack) - 2
            pairs = stack[start:]
            del stack[start:]
            record(pairs)
        elif pickletools.markobject in before:
            del stack[marks.pop() - before.index(pickletools.markobject):]
            stack.extend(object() for _ in after)
        else:
            del stack[len(stack) - len(before):]
            value = arg if op.name in _INT_OPS or "UNICODE" in op.name else object()
            stack.extend(value for _ in after)
    return found


def metadata_step(path: Path) -> int | None:
    """The step a torch.save checkpoint's top-level dict records under one of META_KEYS, or None."""
    data = _pickle_of(path)
    if data is None:
        return None
    try:
        found = _root_items(data)
    except (ValueError, EOFError, IndexError, KeyError, TypeError):  # a truncated or odd pickle
        return None
    return next((found[k] for k in META_KEYS if k in found), None)


def _entries(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if not p.name.endswith(_SKIP) and not p.name.startswith(".")]
    except OSError:
        return []


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _groups(folder: Path) -> bool:
    """Whether a folder only groups checkpoints (no number in its name, no checkpoint's own files)."""
    if re.search(r"\d", folder.name):
        return False
    return not any(p.name.endswith(_OWN_FILES) or p.name.startswith(".metadata") for p in _entries(folder))


def checkpoint_entries(folder: Path, depth: int = 3) -> list[tuple[str, Path]]:
    """Each checkpoint in `folder`: (its path relative to `folder`, its path). A file is one, a folder
    with a number in its name or a checkpoint's own files is one; a folder that only groups
    checkpoints (Accelerate's `checkpoints/`, Lightning's) is looked into, down to `depth` levels."""
    out: list[tuple[str, Path]] = []
    for path in sorted(_entries(folder)):
        if path.is_dir() and depth > 1 and _groups(path):
            out.extend((f"{path.name}/{rel}", inner) for rel, inner in checkpoint_entries(path, depth - 1))
        else:
            out.append((path.name, path))
    return out


def newest_checkpoint(folder: Path, depth: int = 3) -> tuple[str, int | None] | None:
    """(its path relative to `folder`, its step or None) of the folder's newest checkpoint: the
    highest step among entries with a step in their name, else the newest entry (a folder whose
    name holds no number only groups checkpoints, Accelerate's `checkpoints/`: its own newest, down
    to `depth` levels), its step from its metadata. None for an empty or missing folder."""
    entries = _entries(folder)
    if not entries:
        return None
    named = [(step, p.name) for p in entries if (step := name_step(p.name)) is not None]
    if named:
        step, name = max(named)
        return name, step
    saves = [(n, p.name) for p in entries if (n := save_number(p.name)) is not None and p.is_dir()]
    if saves:
        name = max(saves)[1]
        return name, _registered_step(folder / name)
    newest = max(entries, key=lambda p: (_mtime(p), p.name))
    if newest.is_dir() and depth > 1 and not re.search(r"\d", newest.name):
        inner = newest_checkpoint(newest, depth - 1)
        if inner is not None:
            return f"{newest.name}/{inner[0]}", inner[1]
    return newest.name, metadata_step(newest) if newest.is_file() else None


__all__ = ["META_KEYS", "checkpoint_entries", "metadata_step", "name_step", "newest_checkpoint", "save_number"]
