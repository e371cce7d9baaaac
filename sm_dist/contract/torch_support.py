"""The torch versions the sm_dist runtime supports, and the torch facts that differ between them.

Standard library only: PID 1 in the container (before torch is imported) and the runtime
both check against the same range. The floor is the oldest torch the runtime's tests passed on;
the newest is the newest they passed on (and the default image's torch, sm_dist/catalog/images.json).
A torch below the floor is refused; one above the newest runs with a warning (untested, not
known broken). docs/PLATFORM.md §2.5 says how the range was tested.
"""

from __future__ import annotations

import re

#: (major, minor) of the oldest torch the runtime tests passed on (docs/PLATFORM.md §2.5): on 2.6
#: DCP's save has no `no_dist` and FSDP2 cannot run on CPU; on 2.8 FSDP2 sums gloo gradients
#: instead of averaging them (pytorch/pytorch#162338). 2.10 passed every runtime test.
FLOOR = (2, 10)
#: (major, minor) of the newest torch the runtime tests passed on.
NEWEST = (2, 13)
#: torchrun reads TORCH_ELASTIC_SHUTDOWN_TIMEOUT from torch 2.12; before, it waits a fixed 30 s
#: between forwarding SIGTERM and SIGKILLing the workers (docs/PLATFORM.md §1.3).
SHUTDOWN_TIMEOUT_FROM = (2, 12)
TORCHRUN_FIXED_SHUTDOWN_S = 30.0

_VERSION = re.compile(r"(\d+)\.(\d+)")


def parse(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version string such as "2.13.0+cpu" or "2.6.0a0+git1234"."""
    match = _VERSION.match(version.strip())
    return (int(match[1]), int(match[2])) if match else None


def _text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def supported_range() -> str:
    """The range as a sentence fragment: "torch 2.6–2.13"."""
    return f"torch {_text(FLOOR)}–{_text(NEWEST)}"


def refusal(version: str) -> str | None:
    """Why the runtime cannot run on torch `version`, with the fix; None when it can."""
    parsed = parse(version)
    if parsed is None or parsed >= FLOOR:
        return None
    return (f"torch {version} is older than sm_dist's runtime supports ({supported_range()}); use an image with a "
            f"newer torch (sm_dist.fit(torch_version='{_text(NEWEST)}'), the default) or pip install 'torch>={_text(FLOOR)}'")


def untested(version: str) -> str | None:
    """A warning for a torch newer than the newest tested; None otherwise."""
    parsed = parse(version)
    if parsed is None or parsed <= NEWEST:
        return None
    return f"torch {version} is newer than the newest sm_dist's runtime was tested on ({_text(NEWEST)})"


def honours_shutdown_timeout(version: str) -> bool:
    """Whether this torch's torchrun reads TORCH_ELASTIC_SHUTDOWN_TIMEOUT (else: a fixed 30 s)."""
    parsed = parse(version)
    return parsed is None or parsed >= SHUTDOWN_TIMEOUT_FROM


__all__ = ["FLOOR", "NEWEST", "SHUTDOWN_TIMEOUT_FROM", "TORCHRUN_FIXED_SHUTDOWN_S", "honours_shutdown_timeout",
           "parse", "refusal", "supported_range", "untested"]
