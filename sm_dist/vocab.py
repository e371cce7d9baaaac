"""Closed vocabularies shared by the estimator, the plan and the runtime.

Strings are converted to these enums once, at the boundary (CLI, config file, public function).
This module is standard library only: the estimator keys its formulas by the same names the
runtime uses for its strategy plug-ins, without importing torch.
"""

from __future__ import annotations

from enum import Enum

from sm_dist._records import TYPE_CHECKING
from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from typing import Literal, TypeAlias, TypeVar


class _StrEnum(str, Enum):
    """`enum.StrEnum` for Python 3.10 too."""

    def __str__(self) -> str:
        return str(self.value)


#: What sm_dist's string enums derive from: `enum.StrEnum` is Python 3.11+, sm_dist supports 3.10
#: (mypy checks the package as 3.10, so a 3.11-only name fails the type check, not a user's import).
StrEnum = _StrEnum


class Strategy(_StrEnum):
    """How the model and optimizer are spread over GPUs."""

    DP = "dp"  #: torch.nn.DataParallel, one process, one instance only
    DDP = "ddp"  #: DistributedDataParallel, full replica per GPU
    ZERO1 = "zero1"  #: DDP + ZeroRedundancyOptimizer (optimizer states sharded)
    ZERO2 = "zero2"  #: FSDP2 without resharding after forward (optimizer + grads sharded)
    FSDP = "fsdp"  #: FSDP2 full shard (ZeRO-3: params, grads, optimizer sharded)
    HSDP = "hsdp"  #: full shard inside an instance, replicated across instances


class Precision(_StrEnum):
    """Numeric precision of parameters, gradients and optimizer states."""

    FP32 = "fp32"  #: everything fp32
    AMP = "amp"  #: torch.autocast; fp32 params, grads and Adam states
    MIXED = "mixed"  #: half-precision params/grads + fp32 master copy and Adam (ZeRO paper's K=12)
    BF16 = "bf16"  #: everything bf16 (params, grads, optimizer states)


if TYPE_CHECKING:
    #: The words a user's type checker accepts for each (the public API takes these or the enum;
    #: tests/test_public_types.py keeps each equal to its enum's values).
    StrategyName: TypeAlias = Literal["dp", "ddp", "zero1", "zero2", "fsdp", "hsdp"]
    PrecisionName: TypeAlias = Literal["fp32", "amp", "mixed", "bf16"]

    E = TypeVar("E", bound=_StrEnum)

#: The same Literal aliases at run time, made on first use (PEP 562): `typing` stays off the path of
#: `sm-dist estimate-cost` (sm_dist/_records.py).
_WORDS: dict[str, type[_StrEnum]] = {"StrategyName": Strategy, "PrecisionName": Precision}


def __getattr__(name: str) -> object:
    kind = _WORDS.get(name)
    if kind is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from typing import Literal

    values = tuple(str(member.value) for member in kind)
    words = Literal[values]  # type: ignore[valid-type]
    globals()[name] = words
    return words


def parse_enum(kind: type[E], value: object, field: str) -> E:
    """Convert a user-given string to `kind`, or raise a ConfigError with a suggestion."""
    if isinstance(value, kind):
        return value
    text = str(value).strip().lower()
    for member in kind:
        if member.value == text:
            return member
    import difflib  # only on the error path: keeps CLI start-up lean

    choices = [m.value for m in kind]
    close = difflib.get_close_matches(text, choices, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(field, value, f"{hint}expected one of {', '.join(choices)}")


def did_you_mean(value: str, choices: list[str] | tuple[str, ...]) -> str:
    """Return ' (did you mean X?)' for the closest choice, or ''."""
    import difflib

    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
