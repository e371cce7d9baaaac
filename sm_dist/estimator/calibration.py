"""Calibration: a measured throughput in place of the MFU prior, for one GPU family.

The estimator's step time is FLOPs per token × tokens ÷ (peak × MFU), with MFU a literature
prior per GPU family (timing.MFU_PRIORS). A team that has run its own model for a few steps
(`sm-dist calibrate`) or to the end (a finished job's tokens and seconds, `from_job`) knows
better. A calibration record keeps what was measured (tokens per second per GPU, the FLOPs per
token they were counted with, peak memory, device, torch, date) and the MFU it implies against
the family's catalog peak; `estimate(calibration=...)` then uses that MFU for the instance types
of that family only, which makes the estimated compute time of the same model exactly the
measured one (tokens ÷ tokens per second). MFU, not tokens per second, is what carries over to
another model size, sequence length or GPU count: less faithfully the further it goes, which the
estimate says in a warning.

Standard library only (core world): the measurement itself runs in the runtime
(sm_dist.tools.selfcheck) and writes this record as JSON.
"""

# Annotations evaluated, not postponed (no `from __future__ import annotations`): typing.NamedTuple
# would compile each field's annotation string at import, a visible share of `sm-dist estimate-cost`
# start-up (tests/test_imports.py).

import datetime as dt
import json
import math
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from sm_dist.catalog import CATALOG_REGION, get_instance, list_instances
from sm_dist.errors import ConfigError

#: The JSON format's name and version (the "format" field).
FORMAT = "sm_dist.calibration/1"
#: Where a record came from: a measurement of N steps, a finished job, or the GPU self-check.
SOURCES = ("calibrate", "job", "selfcheck")
#: A calibration model this many times larger or smaller than the estimated one gets a warning:
#: MFU moves with model size (kernel shapes, communication share).
SIZE_WARNING_FACTOR = 4.0


class Calibration(NamedTuple):
    """One measurement of training throughput on one kind of GPU (the JSON record)."""

    gpu_family: str | None  #: the catalog's GPU model ("H100"); None: not a catalog GPU (e.g. CPU)
    device_name: str  #: what the device calls itself ("NVIDIA H100 80GB HBM3"), or the instance type
    tokens_per_second: float  #: training tokens per second per GPU
    flops_per_token: float  #: training FLOPs per token it was counted with (6·Ψ; 8·Ψ with full recompute)
    mfu: float | None  #: implied MFU against the family's catalog peak; None without a family
    peak_tflops: float | None  #: the dense peak the MFU is relative to
    model: str  #: what ran
    params: int  #: its parameter count (FLOPs basis)
    source: str  #: "calibrate", "job" or "selfcheck"
    date: str  #: ISO 8601, UTC
    gpus: int = 1  #: GPUs the throughput was measured on (it is per GPU either way)
    peak_memory_bytes: int | None = None  #: torch.cuda.max_memory_allocated per GPU, when measured
    torch_version: str | None = None
    seq_len: int | None = None
    micro_batch: int | None = None
    precision: str | None = None
    steps: int | None = None
    detail: str = ""  #: free text: instance type and count of a job, layers kept, ...

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **self._asdict()}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def describe(self) -> str:
        """One line for the estimate's assumptions."""
        mfu = f"MFU {self.mfu:.3f}" if self.mfu is not None else "no MFU (not a catalog GPU)"
        return (f"{mfu} measured on {self.device_name} ({self.model}, {self.tokens_per_second:,.0f} tokens/s per GPU, "
                f"{self.source}, {self.date[:10]})")


def _peak(family: str) -> float:
    """The catalog's dense bf16 peak (TFLOP/s) of a GPU family."""
    for inst in list_instances():
        if inst.gpu_model == family:
            return inst.peak_tflops
    raise ConfigError("gpu_family", family, f"not a GPU of the catalog; known: {', '.join(families())}")


def families() -> list[str]:
    """The catalog's GPU families (instance gpu_model values), in catalog order."""
    return list(dict.fromkeys(inst.gpu_model for inst in list_instances()))


def family_of(device_name: str) -> str | None:
    """The catalog family of a CUDA device name ("NVIDIA A100-SXM4-80GB" -> "A100"), or None.
    Longer family names are tried first, so "L40S" is not taken for "L4", nor "A100" for "A10G"."""
    text = device_name.upper().replace(" ", "")
    for family in sorted(families(), key=len, reverse=True):
        if family.upper() in text:
            return family
    return None


def from_throughput(
    *, device_name: str, tokens_per_second: float, flops_per_token: float, model: str, params: int, source: str,
    gpu_family: str | None = None, gpus: int = 1, date: str | None = None, peak_memory_bytes: int | None = None,
    torch_version: str | None = None, seq_len: int | None = None, micro_batch: int | None = None,
    precision: str | None = None, steps: int | None = None, detail: str = "",
) -> Calibration:
    """The record of a measured throughput; the family (from the device name unless given) fixes the
    peak, and MFU = FLOPs per token × tokens per second ÷ peak."""
    for field, value in (("tokens_per_second", tokens_per_second), ("flops_per_token", flops_per_token),
                         ("params", params), ("gpus", gpus)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise ConfigError(field, value, "expected a positive number")
    if source not in SOURCES:
        raise ConfigError("source", source, f"expected one of {', '.join(SOURCES)}")
    family = gpu_family if gpu_family is not None else family_of(device_name)
    peak = _peak(family) if family is not None else None
    mfu = flops_per_token * tokens_per_second / (peak * 1e12) if peak else None
    if mfu is not None and mfu > 1:
        raise ConfigError("tokens_per_second", tokens_per_second,
                          f"implies MFU {mfu:.2f} > 1 on {family} ({peak:g} TFLOP/s peak): check the tokens, the "
                          "seconds and the parameter count")
    when = date or dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    return Calibration(family, device_name, float(tokens_per_second), float(flops_per_token), mfu, peak, model,
                       int(params), source, when, int(gpus), peak_memory_bytes, torch_version, seq_len, micro_batch,
                       precision, steps, detail)


def from_job(
    *, tokens: float, training_seconds: float, instance_type: str, instance_count: int = 1,
    params: int | None = None, flops_per_token: float | None = None, full_recompute: bool = False,
    model: str = "job", date: str | None = None,
) -> Calibration:
    """A finished job's figures as a calibration: `tokens` trained in `training_seconds` (training
    time, without start-up) on `instance_count` × `instance_type`, with FLOPs per token given or
    6·`params` (8·`params` when every block was recomputed). For `sm-dist cost JOB`.

    The throughput is end to end: communication and any data stalls are in it, so on a
    multi-GPU job the MFU is lower than the compute-only figure the estimator's prior stands for
    (the estimate adds communication again, and warns so)."""
    if (params is None) == (flops_per_token is None):
        raise ConfigError("params", params, "give exactly one of params=N or flops_per_token=F")
    inst = get_instance(instance_type, CATALOG_REGION)
    for field, value in (("tokens", tokens), ("training_seconds", training_seconds), ("instance_count", instance_count)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise ConfigError(field, value, "expected a positive number")
    gpus = inst.gpus * int(instance_count)
    per_token = float(flops_per_token) if flops_per_token is not None else (8.0 if full_recompute else 6.0) * int(params or 0)
    count = int(params) if params is not None else int(per_token / 6)
    return from_throughput(
        device_name=inst.name, gpu_family=inst.gpu_model, tokens_per_second=tokens / training_seconds / gpus,
        flops_per_token=per_token, model=model, params=count, source="job", gpus=gpus, date=date,
        detail=f"{instance_count}× {inst.name}, {tokens:.3g} tokens in {training_seconds / 3600:.2f} h",
    )


_NUMBER = (int, float)
_NONE = type(None)
#: The JSON types each field may have.
_KINDS: dict[str, tuple[type, ...]] = {
    "gpu_family": (str, _NONE), "device_name": (str,), "tokens_per_second": _NUMBER, "flops_per_token": _NUMBER,
    "mfu": (*_NUMBER, _NONE), "peak_tflops": (*_NUMBER, _NONE), "model": (str,), "params": (int,), "source": (str,),
    "date": (str,), "gpus": (int,), "peak_memory_bytes": (int, _NONE), "torch_version": (str, _NONE),
    "seq_len": (int, _NONE), "micro_batch": (int, _NONE), "precision": (str, _NONE), "steps": (int, _NONE),
    "detail": (str,),
}


def from_dict(data: Mapping[str, object], where: str = "calibration") -> Calibration:
    """A record read back (the object of to_dict), every field checked; ConfigError names the field."""
    if data.get("format") != FORMAT:
        raise ConfigError("calibration", where, f"format={data.get('format')!r}: expected {FORMAT!r} (a file written "
                          "by `sm-dist calibrate` or Calibration.to_json())")
    unknown = sorted(set(data) - set(Calibration._fields) - {"format"})
    if unknown:
        raise ConfigError("calibration", where, f"unknown field {unknown[0]!r}; write the file with `sm-dist calibrate`")
    checked: dict[str, Any] = {}
    for name, kinds in _KINDS.items():
        if name not in data and name not in Calibration._field_defaults:
            raise ConfigError("calibration", where, f"{name!r} is missing; write the file with `sm-dist calibrate`")
        value = data.get(name, Calibration._field_defaults.get(name))
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise ConfigError("calibration", where, f"{name}={value!r}: expected {' or '.join(k.__name__ for k in kinds)}")
        checked[name] = value
    record = Calibration(**checked)
    for name in ("tokens_per_second", "flops_per_token", "params", "gpus"):
        if getattr(record, name) <= 0:
            raise ConfigError("calibration", where, f"{name}={getattr(record, name)!r}: expected a positive number")
    if record.mfu is not None and not 0 < record.mfu <= 1:
        raise ConfigError("calibration", where, f"mfu={record.mfu!r}: expected 0 < mfu <= 1")
    if record.gpu_family is not None and record.gpu_family not in families():
        raise ConfigError("calibration", where, f"gpu_family={record.gpu_family!r}: not a GPU of the catalog "
                          f"({', '.join(families())})")
    if record.source not in SOURCES:
        raise ConfigError("calibration", where, f"source={record.source!r}: expected one of {', '.join(SOURCES)}")
    return record


def load(path: str | os.PathLike[str]) -> Calibration:
    """Read a calibration file."""
    text_path = os.fspath(path)
    try:
        with open(text_path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise ConfigError("calibration", text_path, f"cannot read it ({exc.strerror}); give the file "
                          "`sm-dist calibrate --out FILE` wrote") from None
    except ValueError as exc:
        raise ConfigError("calibration", text_path, f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError("calibration", text_path, "expected a JSON object")
    return from_dict(data, text_path)


def by_family(records: list[Calibration]) -> dict[str, Calibration]:
    """The records that calibrate a family, keyed by it; two for one family is an error."""
    found: dict[str, Calibration] = {}
    for record in records:
        if record.gpu_family is None or record.mfu is None:
            raise ConfigError("calibration", record.device_name, "measured on a device that is not a catalog GPU "
                              f"(e.g. --device cpu): it calibrates none of {', '.join(families())}")
        if record.gpu_family in found:
            raise ConfigError("calibration", record.gpu_family, "two calibrations for one GPU family; give one")
        found[record.gpu_family] = record
    return found


__all__ = ["FORMAT", "SOURCES", "Calibration", "by_family", "families", "family_of", "from_dict", "from_job",
           "from_throughput", "load"]
