"""Compare the final weights two runs left in their model folders, tensor by tensor.

`python -m sm_dist.tools.weights_compare DIR_A DIR_B` prints one JSON object:
{"result": "identical" | "differs" | "cannot compare", "detail": "...", "files": [...]}.
Local mode (local world, no torch) runs it as a subprocess for `--verify` of scripts that do not
print sm_dist's model hash. Weight files: `.safetensors` read from its documented layout (an
8-byte little-endian header length, a JSON header of name -> dtype, shape, data_offsets, then the
raw bytes; no package needed), `.pt`/`.pth`/`.bin`/`.ckpt` through `torch.load(weights_only=True)`;
nested dicts and lists are flattened to dotted names. A pickle that names classes weights-only
loading refuses (Lightning's `.ckpt`: its hyper-parameters' AttributeDict, paths, callback state)
is read the same way, each such class standing in as an empty mapping that is never constructed:
no code from the file runs, the tensors are all read. Two tensors are equal when name, shape,
dtype and every byte are; the verdict is the tensors'. Other entries that differ (counters, paths)
are named, not counted as a difference.
"""

from __future__ import annotations

import json
import pickle
import struct
import sys
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

import torch

from sm_dist.contract.container import WEIGHT_SUFFIXES as SUFFIXES


class Comparison(TypedDict):
    """The verdict `python -m sm_dist.tools.weights_compare` prints as one JSON object."""

    result: Literal["identical", "differs", "cannot compare"]
    files: list[str]
    detail: str


class CannotCompare(Exception):
    """A file exists but cannot be read as weights."""


def weight_files(folder: Path) -> list[str]:
    """Weight files under `folder`, relative, sorted."""
    if not folder.is_dir():
        return []
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.suffix in SUFFIXES)


@dataclass(frozen=True)
class RawTensor:
    """A safetensors entry: compared by dtype name, shape and bytes."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes


def load_safetensors(path: Path) -> dict[str, RawTensor]:
    """name -> RawTensor of a .safetensors file (the `__metadata__` entry is skipped)."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise CannotCompare(f"{path.name}: too short for a safetensors file")
    (size,) = struct.unpack("<Q", raw[:8])
    try:
        header = json.loads(raw[8:8 + size])
    except ValueError:
        raise CannotCompare(f"{path.name}: not a safetensors header") from None
    body = raw[8 + size:]
    return {name: RawTensor(info["dtype"], tuple(info["shape"]), body[info["data_offsets"][0]:info["data_offsets"][1]])
            for name, info in header.items() if name != "__metadata__"}


def _flatten(value: object, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list, tuple, torch.Tensor)) for v in value):
        for index, item in enumerate(value):
            _flatten(item, f"{prefix}.{index}" if prefix else str(index), out)
    else:
        out[prefix] = value


class _StandIn:
    """Stands in for a class weights-only loading refuses: "constructing" it gives an empty
    OrderedDict (a type that loading fills and builds); the class itself is never imported."""

    def __new__(cls, *args: object, **kwargs: object) -> Any:
        return OrderedDict()


def _load_weights_only(path: Path) -> Any:
    """torch.load(weights_only=True); the classes it refuses stand in as empty mappings."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        refused = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
        if not refused:
            raise
    stand_ins = [(type(f"StandIn{i}", (_StandIn,), {}), name) for i, name in enumerate(refused)]
    with torch.serialization.safe_globals(stand_ins):
        return torch.load(path, map_location="cpu", weights_only=True)


def load_flat(path: Path) -> dict[str, Any]:
    """name -> tensor (or plain value) of one weight file."""
    try:
        if path.suffix == ".safetensors":
            return dict(load_safetensors(path))
        else:
            data: Any = _load_weights_only(path)
    except CannotCompare:
        raise
    except (OSError, EOFError, RuntimeError, ValueError, AttributeError, pickle.UnpicklingError) as exc:
        # a corrupt file, or one weights_only refuses (custom classes): say so, do not guess
        raise CannotCompare(f"{path.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from None
    flat: dict[str, Any] = {}
    _flatten(data, "", flat)
    return flat


def _as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def _unequal(x: object, y: object) -> bool:
    try:
        return bool(x != y)
    except Exception:  # noqa: BLE001 - e.g. an array's elementwise answer: call it different
        return True


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the first tensor difference, the first other entry that differs), each a sentence or None."""
    tensors = {name for name, v in a.items() if isinstance(v, (torch.Tensor, RawTensor))}
    tensors |= {name for name, v in b.items() if isinstance(v, (torch.Tensor, RawTensor))}
    if tensors - set(a) or tensors - set(b):
        only = sorted(tensors - (set(a) & set(b)))
        return f"tensor names differ (e.g. {only[0]!r})", None
    other = next((f"{name!r}" for name in sorted((set(a) | set(b)) - tensors)
                  if name not in a or name not in b or _unequal(a[name], b[name])), None)
    for name in sorted(tensors):
        x, y = a[name], b[name]
        if isinstance(x, RawTensor) or isinstance(y, RawTensor):
            if x != y:
                return f"{name!r}: " + ("values differ" if (x.dtype, x.shape) == (y.dtype, y.shape)
                                        else f"{x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"), other
            continue
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return f"{name!r}: a tensor in one run only", other
        if x.shape != y.shape:
            return f"{name!r}: shape {tuple(x.shape)} vs {tuple(y.shape)}", other
        if x.dtype != y.dtype:
            return f"{name!r}: dtype {x.dtype} vs {y.dtype}", other
        if not torch.equal(_as_bytes(x), _as_bytes(y)):
            return f"{name!r}: values differ", other
    return None, other


def compare(dir_a: Path, dir_b: Path) -> Comparison:
    """The comparison of two model folders, as printed."""
    files_a, files_b = weight_files(dir_a), weight_files(dir_b)
    if not files_a or not files_b:
        missing = [str(d) for d, f in ((dir_a, files_a), (dir_b, files_b)) if not f]
        return {"result": "cannot compare", "files": files_a or files_b,
                "detail": f"no weight file ({', '.join(SUFFIXES)}) in {' and '.join(missing)}"}
    if files_a != files_b:
        return {"result": "differs", "files": files_a,
                "detail": f"different weight files: {files_a} vs {files_b}"}
    tensors = 0
    skipped: list[str] = []  # pickles that hold no weights in either run
    others: list[str] = []  # entries other than tensors that differ
    for name in files_a:
        try:
            a = load_flat(dir_a / name)
        except CannotCompare as exc:
            # a pickle of other objects in both runs (Hugging Face's training_args.bin) is not weights:
            # skipped and named; one readable in a single run only is a difference in what was saved
            try:
                load_flat(dir_b / name)
            except CannotCompare:
                skipped.append(name)
                continue
            return {"result": "cannot compare", "files": files_a, "detail": str(exc)}
        try:
            b = load_flat(dir_b / name)
        except CannotCompare as exc:
            return {"result": "cannot compare", "files": files_a, "detail": str(exc)}
        diff, other = first_difference(a, b)
        if diff is not None:
            return {"result": "differs", "files": files_a, "detail": f"{name}: {diff}"}
        found = sum(isinstance(v, (torch.Tensor, RawTensor)) for v in a.values())
        if found == 0:  # a pickle of settings (Hugging Face's training_args.bin): not weights
            skipped.append(name)
            continue
        tensors += found
        if other is not None:
            others.append(f"{name}: {other}")
    note = f"; not weights in either run, skipped: {', '.join(skipped)}" if skipped else ""
    if others:
        note += f"; entries other than tensors differ ({', '.join(others[:3])})"
    if tensors == 0:
        return {"result": "cannot compare", "files": files_a, "detail": f"no tensor in {', '.join(files_a)}{note}"}
    compared = len(files_a) - len(skipped)
    return {"result": "identical", "files": files_a, "detail": f"{tensors} tensors in {compared} file(s){note}"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m sm_dist.tools.weights_compare DIR_A DIR_B", file=sys.stderr)
        return 2
    print(json.dumps(compare(Path(args[0]), Path(args[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
