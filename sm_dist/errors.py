"""The one error hierarchy of sm_dist (standard library only: PID 1, sm_dist.container.pid1, imports it too).

Every error sm_dist raises on purpose derives from :class:`SmDistError`. A message names the
value received, what was expected, and the fix. The CLI turns these into one line and the
class's `exit_code`.

    SmDistError
    ├── ConfigError              a setting, argument or file has a wrong value (exit 2)
    │   └── CatalogError         unknown instance type, region, model preset or price
    ├── DoesNotFitError          the model does not fit in GPU memory (exit 2)
    ├── MissingDependencyError   an optional dependency is not installed
    ├── LaunchError              building, submitting or following a SageMaker job failed
    │   └── SdkError             the SageMaker SDK refused or failed a request sm_dist built
    ├── InfraError               the infra stack (CloudFormation, S3) failed or is unusable
    ├── CheckpointError          a checkpoint could not be written, committed or loaded
    └── RuntimeEnvError          the run environment is inconsistent (exit 2)
        └── ContainerStartError  PID 1 (sm_dist.container.pid1) cannot start the job
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


def check_int(field: str, value: object, minimum: int, fix: str | None = None, *, maximum: int | None = None,
              optional: bool = False) -> None:
    """The one check for "a whole number, not a bool, at least `minimum` (at most `maximum`)": None passes
    when `optional`; anything else is ConfigError(field, value, fix), `fix` by default "expected an integer >= N"."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (maximum is not None and value > maximum):
        raise ConfigError(field, value, fix if fix is not None else f"expected an integer >= {minimum}")


class CatalogError(ConfigError):
    """An instance type, region, model preset or price is unknown."""


class DoesNotFitError(SmDistError):
    """The model does not fit in GPU memory with the chosen plan."""

    exit_code = 2


class MissingDependencyError(SmDistError):
    """A feature needs a package this install lacks; the message names the pip extra."""

    def __init__(self, feature: str, package: str, extra: str) -> None:
        self.feature = feature
        self.package = package
        self.extra = extra
        super().__init__(f"{feature} needs {package}, which is not installed: pip install 'sm_dist[{extra}]'")


class LaunchError(SmDistError):
    """Building, submitting or following a SageMaker job failed."""


class SdkError(LaunchError):
    """The SageMaker SDK (or the API behind it) refused or failed a request sm_dist built."""


class InfraError(SmDistError):
    """A CloudFormation or S3 call for the infra stack failed, or the stack is not usable."""


class CheckpointError(SmDistError):
    """A checkpoint could not be written, committed, verified or loaded."""


class RuntimeEnvError(SmDistError):
    """The run environment (torchrun, SageMaker, Slurm, an existing process group) is inconsistent."""

    exit_code = 2


class ContainerStartError(RuntimeEnvError):
    """PID 1 of the training container (sm_dist.container.pid1) cannot start the job: topology files,
    entry script, rendezvous."""


__all__ = [
    "SmDistError",
    "ConfigError",
    "CatalogError",
    "DoesNotFitError",
    "MissingDependencyError",
    "LaunchError",
    "SdkError",
    "InfraError",
    "CheckpointError",
    "RuntimeEnvError",
    "ContainerStartError",
]
