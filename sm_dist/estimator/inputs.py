"""The types of `sm_dist.estimate()`'s flexible inputs, and the duck types the estimator reads.

Type aliases in the manner of httpx's `_types.py`: one name per kind of input a caller may give
in more than one form ("ml.p5.48xlarge" or a list of names; a preset name or an nn.Module; a
path or a parsed config). The Protocols say what the estimator reads of objects it never imports
(a torch nn.Module, a boto3 Pricing client), so the core world stays standard-library only.
Nothing here runs at `estimate-cost` start-up: the estimator imports this module for type
checking only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias

from sm_dist.estimator.calibration import Calibration
from sm_dist.vocab import Precision, PrecisionName, Strategy, StrategyName


class TensorLike(Protocol):
    """A parameter or buffer, as far as counting bytes goes."""

    def numel(self) -> int: ...

    def element_size(self) -> int: ...


class ModuleLike(Protocol):
    """What the estimator reads of a torch `nn.Module`: its parameters and buffers (counted
    exactly) and its submodules (the block structure, hf_config.shape_of_module)."""

    def parameters(self) -> Iterator[TensorLike]: ...

    def buffers(self) -> Iterator[TensorLike]: ...

    def modules(self) -> Iterator[ModuleLike]: ...


class PricingClient(Protocol):
    """The one call live prices make on a boto3 `pricing` client (prices_live.py); boto3's client
    and its typed stubs (mypy-boto3-pricing) satisfy it."""

    def get_products(self, *, ServiceCode: str, Filters: Sequence[Any] = ..., MaxResults: int = ...,
                     NextToken: str = ...) -> Mapping[str, Any]: ...


#: A file path, as `open()` takes it.
StrPath: TypeAlias = str | os.PathLike[str]
#: `model=`: a preset name ("llama2-7b") or an nn.Module (parameters counted, shape read).
ModelLike: TypeAlias = str | ModuleLike
#: `hf_config=`: the path of a Hugging Face config.json, or the parsed object (`config.to_dict()`).
HfConfigLike: TypeAlias = StrPath | Mapping[str, object]
#: `precision=`: a Precision or its value ("fp32", "amp", "mixed", "bf16").
PrecisionLike: TypeAlias = Precision | PrecisionName
#: One strategy (a Strategy or its value, "fsdp") or several.
StrategiesLike: TypeAlias = Strategy | StrategyName | Sequence[Strategy | StrategyName]
#: One instance type name or several.
InstanceTypesLike: TypeAlias = str | Sequence[str]
#: One instance count or several.
CountsLike: TypeAlias = int | Sequence[int]
#: `activation_checkpointing=`: "none" | "selective" | "selective-op" | "full", or True (full) / False (none).
CheckpointingLike: TypeAlias = str | bool
#: `calibration=`: a calibration file (`sm-dist calibrate --out`), a record, or several (one per GPU family).
CalibrationLike: TypeAlias = StrPath | Calibration | Sequence[StrPath | Calibration]

__all__ = ["CalibrationLike", "CheckpointingLike", "CountsLike", "HfConfigLike", "InstanceTypesLike", "ModelLike", "ModuleLike",
           "PrecisionLike", "PricingClient", "StrPath", "StrategiesLike", "TensorLike"]
