"""Compare the final weights two runs left in their model folders, tensor by tensor.

`python -m sm_dist.runtime.weights_compare DIR_A DIR_B` prints one JSON object:
{"result": "identical" | "differs" | "cannot compare", "detail": "...", "files": [...]}.
Local mode (launch world, no torch) runs it as a subprocess for `--verify` of scripts that do not
print sm_dist's model hash. Weight files: `.safetensors` read from its documented layout (an
8-byte little-endian header length, a JSON header of name -> dtype, shape, data_offsets, then the
raw bytes; no package needed), `.pt`/`.pth`/`.bin` through `torch.load(weights_only=True)`; nested
dicts and lists are flattened to dotted names. Two tensors are equal when name, shape, dtype and
every byte are.
"""

from __future__ import annotations

import json
import pickle
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

SUFFIXES = (".safetensors", ".pt", ".pth", ".bin")


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


def load_flat(path: Path) -> dict[str, Any]:
    """name -> tensor (or plain value) of one weight file."""
    try:
        if path.suffix == ".safetensors":
            return dict(load_safetensors(path))
        else:
            data: Any = torch.load(path, map_location="cpu", weights_only=True)
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


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """A sentence naming the first difference, or None when equal."""
    if sorted(a) != sorted(b):
        only = sorted(set(a) ^ set(b))
        return f"tensor names differ (e.g. {only[0]!r})"
    for name in sorted(a):
        x, y = a[name], b[name]
        if isinstance(x, RawTensor) or isinstance(y, RawTensor):
            if x != y:
                return f"{name!r}: " + ("values differ" if (x.dtype, x.shape) == (y.dtype, y.shape)
                                        else f"{x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
            continue
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return f"{name!r}: a tensor in one run only"
        if not isinstance(x, torch.Tensor):
            if x != y:
                return f"{name!r}: {x!r} vs {y!r}"
            continue
        if x.shape != y.shape:
            return f"{name!r}: shape {tuple(x.shape)} vs {tuple(y.shape)}"
        if x.dtype != y.dtype:
            return f"{name!r}: dtype {x.dtype} vs {y.dtype}"
        if not torch.equal(_as_bytes(x), _as_bytes(y)):
            return f"{name!r}: values differ"
    return None


def compare(dir_a: Path, dir_b: Path) -> dict[str, Any]:
    """The comparison of two model folders, as printed."""
    files_a, files_b = weight_files(dir_a), weight_files(dir_b)
    if not files_a or not files_b:
        missing = [str(d) for d, f in ((dir_a, files_a), (dir_b, files_b)) if not f]
        return {"result": "cannot compare", "files": files_a or files_b,
                "detail": f"no weight file ({', '.join(SUFFIXES)}) in {' and '.join(missing)}"}
    if files_a != files_b:
        return {"result": "differs", "files": files_a,
                "detail": f"different weight files: {files_a} vs {files_b}"}
    tensors, skipped = 0, []
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
        diff = first_difference(a, b)
        if diff is not None:
            return {"result": "differs", "files": files_a, "detail": f"{name}: {diff}"}
        tensors += sum(isinstance(v, (torch.Tensor, RawTensor)) for v in a.values())
    note = f"; not weights in either run, skipped: {', '.join(skipped)}" if skipped else ""
    if tensors == 0:
        return {"result": "cannot compare", "files": files_a, "detail": f"no tensor in {', '.join(files_a)}{note}"}
    compared = len(files_a) - len(skipped)
    return {"result": "identical", "files": files_a, "detail": f"{tensors} tensors in {compared} file(s){note}"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m sm_dist.runtime.weights_compare DIR_A DIR_B", file=sys.stderr)
        return 2
    print(json.dumps(compare(Path(args[0]), Path(args[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
