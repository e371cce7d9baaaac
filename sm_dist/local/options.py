"""`LocalOptions`: how local mode runs a plan — chaos, verify, where, how long — as one record.

`sm_dist.fit(..., local=True, local_options=LocalOptions(...))` (or a plain dict with the same
keys, checked here) and `sm-dist fit --local` (its flags become one in `local.cli.run_options`)
hand it to `sm_dist.local.run(plan, options)`. None of it changes the job itself: that is the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TextIO, TypedDict

from sm_dist.contract.sagemaker import STOP_GRACE_SECONDS
from sm_dist.errors import ConfigError, check_int
from sm_dist.local.chaos import Fault, parse_faults
from sm_dist.local.ckpt_sync import DEFAULT_INTERVAL
from sm_dist.local.run_records import DEFAULT_MAX_JOB_RESTARTS
from sm_dist.vocab import did_you_mean


@dataclass(frozen=True, kw_only=True)
class LocalOptions:
    """How to run a plan on this machine (every field has a default)."""

    chaos: Iterable[str | Fault] = ()
    """Faults to inject: "kill:STEP", "kill:SECONDSs", "sigterm:STEP", "crash-in-save:STEP",
    "s3-faults[:SECONDS]" (combinable; see `sm_dist.local.chaos`). A list, a tuple or one spec;
    held as a tuple."""
    verify: bool = False
    """Run the job again without chaos and compare the final models."""
    root: str | Path | None = None
    """Where the hosts' /opt/ml folders and logs go (default: a new folder under the temp dir)."""
    checkpoint_uri: str | None = None
    """The emulated CheckpointConfig.S3Uri: s3://... (local endpoint) or a folder standing in for it."""
    grace_seconds: float = STOP_GRACE_SECONDS
    """SIGTERM-to-SIGKILL grace of a stop (SageMaker's: 120 s)."""
    sync_interval: float = DEFAULT_INTERVAL
    """Seconds between passes of the emulated checkpoint sync."""
    echo: bool | None = None
    """Stream every host's log lines, prefixed by host (None: yes, except in a notebook, where the
    live view shows instead and `job.logs()` reads them afterwards)."""
    echo_stream: TextIO | None = None
    """Where the echo or the view goes (default: stdout; in a notebook, the view is one display)."""
    view: bool | None = None
    """A compact live progress view instead of the echo, the logs staying in files (None: in a
    notebook unless `echo=True`; `sm-dist fit --local` sets it unless --logs)."""
    nproc_per_node: int | None = None
    """Worker processes per emulated host (default: the plan's, else 1)."""
    max_job_restarts: int = DEFAULT_MAX_JOB_RESTARTS
    """Whole-job restarts after a spot interruption (a new job on the same checkpoint URI)."""
    max_runtime_s: float | None = None
    """Stop the run after this long (default: the plan's MaxRuntimeInSeconds)."""
    data: Mapping[str, str | Path] = field(default_factory=dict)
    """Folders standing in for data channels whose source local mode cannot read (s3://, a file
    system): channel name -> folder, laid out as SageMaker would deliver the source."""
    s3_data: bool = False
    """Download s3:// channels without a stand-in, read-only, with your own AWS configuration."""

    def __post_init__(self) -> None:
        if isinstance(self.chaos, (str, Fault)):
            object.__setattr__(self, "chaos", (self.chaos,))
        object.__setattr__(self, "chaos", tuple(self.chaos))
        self.faults()  # refuse a bad spec now, before anything is created
        if not isinstance(self.grace_seconds, (int, float)) or self.grace_seconds <= 0:
            raise ConfigError("grace_seconds", self.grace_seconds,
                              f"use a positive number of seconds (SageMaker: {STOP_GRACE_SECONDS})")
        check_int("nproc_per_node", self.nproc_per_node, 1, "use a whole number >= 1", optional=True)
        if self.max_runtime_s is not None and self.max_runtime_s <= 0:
            raise ConfigError("max_runtime_s", self.max_runtime_s, "use a positive number of seconds")

    def faults(self) -> tuple[Fault, ...]:
        """The chaos specs, parsed."""
        return parse_faults(self.chaos)

    @classmethod
    def coerce(cls, value: LocalOptions | Mapping[str, object] | None) -> LocalOptions:
        """`value` as LocalOptions: a record as is, a mapping checked key by key, None the defaults."""
        if value is None:
            return cls()
        if isinstance(value, LocalOptions):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError("local_options", type(value).__name__, "expected sm_dist.local.LocalOptions or a dict")
        names = [f.name for f in fields(cls)]
        for key in value:
            if key not in names:
                raise ConfigError(f"local_options.{key}", value[key], f"not an option{did_you_mean(str(key), names)}; "
                                  f"options: {', '.join(names)}")
        data = dict(value)
        if "chaos" in data and not isinstance(data["chaos"], (str, Fault)):
            data["chaos"] = tuple(_iterable(data["chaos"]))
        return cls(**data)  # type: ignore[arg-type]  # a dict is untyped; the values are checked as they are used


class LocalOptionsDict(TypedDict, total=False):
    """`LocalOptions` as a dict (`fit(..., local_options={"verify": True})`): its fields, each optional, so a user's
    type checker refuses a misspelled option. tests/test_public_types.py keeps the two equal."""

    chaos: Iterable[str | Fault]
    verify: bool
    root: str | Path | None
    checkpoint_uri: str | None
    grace_seconds: float
    sync_interval: float
    echo: bool | None
    echo_stream: TextIO | None
    view: bool | None
    nproc_per_node: int | None
    max_job_restarts: int
    max_runtime_s: float | None
    data: Mapping[str, str | Path]
    s3_data: bool


def _iterable(value: object) -> Iterable[str | Fault]:
    if not isinstance(value, Iterable):
        raise ConfigError("local_options.chaos", value, 'expected a list of specs, e.g. ["kill:10"]')
    return value


__all__ = ["LocalOptions", "LocalOptionsDict"]
