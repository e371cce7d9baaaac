"""Whether a checkpoint a third-party script wrote was written to its end (stdlib).

A fault can hit a script while it writes a checkpoint (a rank killed, a spot interruption without
grace). SageMaker's sync uploads what is there, half-written folders too (docs/PLATFORM.md §1.4),
and a script that resumes from "the newest checkpoint in my folder" then fails on it (Hugging Face
Trainer: `Can't find a valid checkpoint`) or, worse, loads what it finds. Each community writes
one file last, or writes files whose end can be checked:

    checkpoint-N/               Hugging Face Trainer: trainer_state.json, written after the config,
                                model, optimizer, scheduler and RNG files (a checkpoint-N holding
                                Accelerate's files, as diffusers' scripts write it, is Accelerate's)
    step_N/ (any name)          torch.distributed.checkpoint: .metadata, written by the coordinator
                                after every rank's *.distcp
    checkpoint_N/               Accelerate's save_state: random_states_0.pkl, after the model,
                                optimizer, scheduler and sampler files (registered objects' states
                                come after it and are not checked: their number is the script's)
    *.pt *.pth *.ckpt *.bin     torch.save's zip (Lightning's .ckpt too): its central directory is
    *.pkl                       written at the end, so a file cut short has none
    *.safetensors               its header names every tensor's byte range: the data must end there

A checkpoint folder none of these rules knows (`ckpt_000200/` with a script's own files) is judged
by its kind's older folder beside it: a script's save writes the same files into its folder each time
(numbers in their names aside: `rank3.npy`, `model-00001-of-00004.bin`), so a folder lacking files the
newest older whole one of its kind holds was still being written when the fault hit. Nothing else
says so for every copy of the folder alike: its files' times are the download's after SageMaker's
restore, and a marker would need the script's help. The files' names survive the sync, the S3 copy
and the restore, so every host, the cloud container after SageMaker's restore and local mode after
its own judge a folder the same, and the sync deletes at the URI what the worker removed (a file
deleted locally is deleted there), so a later restore does not hand the folder back.
The first save of such a kind (nothing older to compare), files of its subfolders and a last file cut
short in a format whose end nothing checks are not caught: nothing here guesses beyond that.

:func:`interrupted` lists a folder's checkpoints that fail these checks and are newer than every whole
one of their kind (what a script resuming from its newest would take). On every start of the
script's workers after the checkpoint folder was restored (SageMaker's restore at a job's start,
sm_dist's after an in-job restart: `sm_dist.container.worker`, in SageMaker's container and on a Slurm
node alike), they are removed from the folder with a line that names each and why, so the script
resumes from the newest whole one. sm_dist's own step folders (`step-000000120/`) are not looked at:
their manifest is their commit (`sm_dist.contract.checkpoint`).
"""

from __future__ import annotations

import json
import re
import struct
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sm_dist.contract.checkpoint import parse_step
from sm_dist.contract.checkpoint_names import checkpoint_entries, name_step, save_number
from sm_dist.contract.container import sync_skipped

#: What Hugging Face Trainer writes last into checkpoint-N.
HF_LAST = "trainer_state.json"
_HF_NAME = re.compile(r"^checkpoint-\d+$")
#: What torch.distributed.checkpoint writes last, and its data files.
DCP_LAST = ".metadata"
DCP_DATA_SUFFIX = ".distcp"
#: The global .metadata, or a rank's own `__0.metadata` when the save coordinated no ranks.
_DCP_METADATA = re.compile(r"^(__\d+)?\.metadata$")
#: What Accelerate's save_state writes after the model, optimizer, scheduler and sampler files.
ACCELERATE_LAST = "random_states_0.pkl"
_ACCELERATE_FILES = re.compile(r"^(optimizer|scheduler|sampler|scaler)(_\d+)?\.bin$|^random_states_\d+\.pkl$"
                               r"|^custom_checkpoint_\d+\.pkl$")
#: Files whose end is checked: torch.save's zip, safetensors.
ZIP_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".pkl", ".tar")
#: Suffixes only torch.save's files carry (an empty one is a save cut short; .bin and .pkl are others' too).
TORCH_SAVE_SUFFIXES = (".pt", ".pth", ".ckpt")
SAFETENSORS_SUFFIX = ".safetensors"
_ZIP_MAGIC = b"PK\x03\x04"
#: A safetensors header larger than this is not read (the format caps it at 100 MB).
_HEADER_LIMIT = 100 << 20
#: Files looked at inside one checkpoint folder (a sharded save of thousands of files is DCP's, judged by .metadata).
_FILES_CHECKED = 64


@dataclass(frozen=True)
class Interrupted:
    """A checkpoint that was not written to its end: its path relative to the folder, and why."""

    rel: str
    why: str


def cut_short(path: Path) -> str | None:
    """Why a torch.save zip or a safetensors file is not whole (it ends before its own end), or None
    (whole, or a format this does not check)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
            size = path.stat().st_size
            if size == 0 and path.name.endswith(TORCH_SAVE_SUFFIXES):
                return f"{path.name} is empty (a torch.save file never is: created, and the fault hit before its first byte)"
            if path.name.endswith(ZIP_SUFFIXES) and head[:4] == _ZIP_MAGIC:
                try:
                    with zipfile.ZipFile(path):
                        return None
                except (zipfile.BadZipFile, ValueError):
                    return f"{path.name} is cut short ({size} bytes, no zip directory: torch.save writes it last)"
            if path.name.endswith(SAFETENSORS_SUFFIX):
                return _safetensors_short(handle, head, size, path.name)
    except OSError:
        return None
    return None


def _safetensors_short(handle: object, head: bytes, size: int, name: str) -> str | None:
    if len(head) < 8:
        return f"{name} is cut short ({size} bytes, no header)"
    (length,) = struct.unpack("<Q", head)
    if length > _HEADER_LIMIT:
        return None  # not a header this reads
    if 8 + length > size:
        return f"{name} is cut short ({size} bytes, its header alone is {8 + length})"
    try:
        header = json.loads(handle.read(length))  # type: ignore[attr-defined]
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None
    if 8 + length + int(end) > size:
        return f"{name} is cut short ({size} bytes of {8 + length + int(end)} its header names)"
    return None


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.rglob("*") if p.is_file())[:_FILES_CHECKED]
    except OSError:
        return []


def known(folder: Path) -> bool:
    """Whether a checkpoint folder is of a format the module's table knows (its own rule judges it)."""
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return False
    return (any(n.endswith(DCP_DATA_SUFFIX) or _DCP_METADATA.match(n) or _ACCELERATE_FILES.match(n) for n in names)
            or save_number(folder.name) is not None or bool(_HF_NAME.match(folder.name)))


def _shape(folder: Path) -> Counter[str]:
    """The files a save wrote into `folder` itself, counted by name with its numbers as `#`, sync markers left
    out. Files in its subfolders are not compared: a folder of runs (Lightning's `version_N/`, its checkpoints a
    level down, written later in the run) is not a checkpoint cut short for lacking them."""
    try:
        return Counter(re.sub(r"\d+", "#", p.name) for p in folder.iterdir() if p.is_file() and not sync_skipped(p.name))
    except OSError:
        return Counter()


def lacking(folder: Path, older: Path) -> str | None:
    """Why `folder` (a checkpoint of a format no rule knows) was still being written when the fault hit:
    it lacks files its kind's `older` whole folder holds (a save writes the same files each time), or None."""
    have, had = _shape(folder), _shape(older)
    missing = [name if not have[name] else f"{had[name] - have[name]} of {had[name]} {name}"
               for name in sorted(had) if have[name] < had[name]]
    if not missing:
        return None
    more = f" and {len(missing) - 2} more" if len(missing) > 2 else ""
    return (f"no {', '.join(missing[:2])}{more} of what {older.name} holds (a save writes the same files each time: "
            "it was still being written)")


def folder_why(folder: Path) -> str | None:
    """Why a checkpoint folder was not written to its end (the module's table), or None."""
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return None
    if any(n.endswith(DCP_DATA_SUFFIX) for n in names) and not any(_DCP_METADATA.match(n) for n in names):
        return f"*{DCP_DATA_SUFFIX} files but no {DCP_LAST} (torch.distributed.checkpoint writes it last)"
    accelerate = any(_ACCELERATE_FILES.match(n) for n in names)  # diffusers' checkpoint-N are Accelerate's
    if (accelerate or save_number(folder.name) is not None) and ACCELERATE_LAST not in names:
        return f"no {ACCELERATE_LAST} (Accelerate's save_state writes it after the model and optimizer)"
    if _HF_NAME.match(folder.name) and not accelerate and HF_LAST not in names:
        # whatever else is there: Trainer's save_pretrained begins with config.json, no weights yet
        return f"no {HF_LAST} (Hugging Face Trainer writes it last)"
    if not names and re.search(r"\d", folder.name):
        return "empty"
    for path in _files(folder):
        why = cut_short(path)
        if why is not None:
            return why
    return None


def _family(name: str) -> str:
    """A checkpoint's kind by its name, numbers aside: `checkpoint-40` and `checkpoint-20` are one family."""
    return re.sub(r"\d+", "#", name)


def _number(name: str) -> int | None:
    """A checkpoint's order in its family: its step or save number, else the one number in its name (`ckpt_000300`)."""
    for number in (name_step(name), save_number(name)):
        if number is not None:
            return number
    numbers = re.findall(r"\d+", name)
    return int(numbers[0]) if len(numbers) == 1 else None


def _newer(one: Path, other: Path) -> bool:
    """Whether `one` is a newer checkpoint than `other` of its family: by the number in their names, else by time."""
    a, b = _number(one.name), _number(other.name)
    if a is not None and b is not None:
        return a > b
    try:
        return one.stat().st_mtime > other.stat().st_mtime
    except OSError:
        return False


def interrupted(folder: Path) -> list[Interrupted]:
    """The checkpoints in `folder` that were not written to their end (see the module's table) and that a
    script resuming from its newest would take: none of their family beside them is whole and newer (an
    older leftover, such as the `checkpoint-N/rng_state_1.pth` Trainer's rotation leaves on the other
    hosts, is no script's resume point and is left alone). sm_dist's own step folders and names
    SageMaker's sync skips are never among them."""
    found: list[tuple[str, Path, str | None]] = []
    for rel, path in checkpoint_entries(folder):
        if parse_step(rel.split("/", 1)[0]) is not None:
            continue  # sm_dist's step folder: its manifest is its commit
        found.append((rel, path, folder_why(path) if path.is_dir() else cut_short(path)))
    found = _by_older(found)
    whole = [(path.parent, _family(path.name), path) for _, path, why in found if why is None]
    return [Interrupted(rel, why) for rel, path, why in found if why is not None and not any(
        parent == path.parent and family == _family(path.name) and _newer(other, path) for parent, family, other in whole)]


def _by_older(found: list[tuple[str, Path, str | None]]) -> list[tuple[str, Path, str | None]]:
    """`found` with each folder of a format no rule knows judged by the newest older whole one of its kind (`lacking`)."""
    kinds: dict[tuple[Path, str], list[int]] = {}
    for index, (_, path, why) in enumerate(found):
        if why is None and path.is_dir() and not known(path):
            kinds.setdefault((path.parent, _family(path.name)), []).append(index)
    out = list(found)
    for indices in kinds.values():
        last_whole: Path | None = None
        for index in sorted(indices, key=lambda i: _age(found[i][1])):
            rel, path, _ = found[index]
            why = lacking(path, last_whole) if last_whole is not None else None
            if why is None:
                last_whole = path
            out[index] = (rel, path, why)
    return out


def _age(path: Path) -> tuple[int, float]:
    """Oldest first: by the number in the name (`_number`), else by time."""
    number = _number(path.name)
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    return (number if number is not None else -1, mtime)


#: What the worker prints (after its `[sm_dist worker] ` prefix) for each checkpoint it removed; local mode
#: reads it back (`read_removed`) for the summary.
_REMOVED = "{host}: {path} was not written to its end ({why}): a fault hit the save; removed, so the script " \
           "resumes from the newest whole checkpoint"
_REMOVED_RE = re.compile(r"\[sm_dist worker\] (?P<host>\S+): (?P<path>\S.*?) was not written to its end \((?P<why>.*)\): "
                         r"a fault hit the save; removed")


def removed_line(host: str, path: str, why: str) -> str:
    """The worker's line (less its prefix) for a checkpoint it removed from the restored folder."""
    return _REMOVED.format(host=host, path=path, why=why)


def read_removed(line: str) -> tuple[str, str, str] | None:
    """(host, path, why) of a worker's removed-checkpoint line anywhere in `line`, else None."""
    match = _REMOVED_RE.search(line)
    return (match.group("host"), match.group("path"), match.group("why")) if match else None


__all__ = ["ACCELERATE_LAST", "DCP_LAST", "HF_LAST", "Interrupted", "cut_short", "folder_why", "interrupted", "known",
           "lacking", "read_removed", "removed_line"]
