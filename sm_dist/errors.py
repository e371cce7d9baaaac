"""The one error hierarchy of sm_dist.

Every error a user can cause derives from :class:`SmDistError`. A message names the value
received, what was expected, and the fix. The CLI turns these into one line and an exit code.
"""

from __future__ import annotations


class SmDistError(Exception):
    """Root of every error sm_dist raises on purpose."""

    #: Exit code the CLI uses for this kind of error.
    exit_code = 1


class ConfigError(SmDistError, ValueError):
    """A setting, argument or file has a wrong value. Nothing was created."""

    exit_code = 2

    def __init__(self, field: str, value: object, fix: str) -> None:
        self.field = field
        self.value = value
        self.fix = fix
        super().__init__(f"{field}={value!r}: {fix}")


class CatalogError(ConfigError):
    """An instance type, region, model preset or price is unknown."""


class DoesNotFitError(SmDistError):
    """The model does not fit in GPU memory with the chosen plan."""

    exit_code = 2


class LaunchError(SmDistError):
    """Building, submitting or following a SageMaker job failed."""


class CheckpointError(SmDistError):
    """A checkpoint could not be written, committed, verified or loaded."""


class RuntimeEnvError(SmDistError):
    """The launcher environment (torchrun, SageMaker, Slurm) is inconsistent."""

    exit_code = 2


__all__ = [
    "SmDistError",
    "ConfigError",
    "CatalogError",
    "DoesNotFitError",
    "LaunchError",
    "CheckpointError",
    "RuntimeEnvError",
]
