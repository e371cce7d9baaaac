"""The `mlflow=` setting: SageMaker managed MLflow for a job (CreateTrainingJob's MlflowConfig).

A user gives the tracking server's (or MLflow App's) ARN, or a `MlflowSettings` dict with the ARN
and the experiment and run names. The plan turns it into the request's `MlflowConfig` and into the
script's MLflow environment (`MLFLOW_TRACKING_URI` = the ARN, which the `sagemaker-mlflow` plugin
resolves; `MLFLOW_EXPERIMENT_NAME`; `MLFLOW_RUN_NAME`), below the user's own `environment=`, which
wins; `SM_DIST_MLFLOW=1` tells sm_dist's runtime to log its metric lines there too
(`sm_dist.runtime.mlflow_log`). Local mode points `MLFLOW_TRACKING_URI` at a file store instead.
The API's rules are in docs/PLATFORM.md §1.15.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from sm_dist.errors import ConfigError

#: An ARN the sagemaker-mlflow plugin can reach: a tracking server or an MLflow App (docs/PLATFORM.md
#: §1.15); the service model's own pattern, `mlflow-[a-zA-Z-]*/.*`, is checked on the request too.
ARN_RE = re.compile(r"arn:aws[a-z\-]*:sagemaker:([a-z0-9\-]+):([0-9]{12}):mlflow-(tracking-server|app)/\S+")
#: MlflowConfig.MlflowResourceArn, MlflowExperimentName and MlflowRunName: at most these characters.
MAX_ARN_CHARS = 2048
MAX_NAME_CHARS = 256
#: What sm_dist's runtime looks for before it imports mlflow (rank 0 logs its metric lines when "1").
LOG_ENV = "SM_DIST_MLFLOW"
#: The run's name: mlflow itself reads no such variable; sm_dist's runtime does, and a script may.
RUN_NAME_ENV = "MLFLOW_RUN_NAME"
_FIX = ("expected a SageMaker MLflow ARN, arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name> "
        "(or mlflow-app/<id>; aws sagemaker list-mlflow-tracking-servers), or {'arn': ..., 'experiment': ..., 'run': ...}")


class _MlflowNames(TypedDict, total=False):
    experiment: str
    """MLflow experiment (default: the job's base name, e.g. "sm-dist")."""
    run: str
    """MLflow run name (default: the job's name; a chain's: its run name)."""


class MlflowSettings(_MlflowNames):
    """`mlflow=` as a dict: the tracking server's ARN, and optionally experiment and run names."""

    arn: str


@dataclass(frozen=True)
class MlflowTarget:
    """The checked `mlflow=` setting; names None until the plan gives the defaults (`named`)."""

    arn: str
    experiment: str | None = None
    run: str | None = None

    @property
    def region(self) -> str:
        return self.arn.split(":")[3]

    def named(self, experiment: str, run: str) -> MlflowTarget:
        """This target with the defaults for names not given."""
        return MlflowTarget(self.arn, self.experiment or experiment, self.run or run)

    def request(self) -> dict[str, str]:
        """CreateTrainingJob's MlflowConfig."""
        config = {"MlflowResourceArn": self.arn}
        if self.experiment:
            config["MlflowExperimentName"] = self.experiment
        if self.run:
            config["MlflowRunName"] = self.run
        return config

    def environment(self) -> dict[str, str]:
        """The script's MLflow variables (the plan puts the user's `environment=` over them)."""
        env = {"MLFLOW_TRACKING_URI": self.arn, LOG_ENV: "1"}
        if self.experiment:
            env["MLFLOW_EXPERIMENT_NAME"] = self.experiment
        if self.run:
            env[RUN_NAME_ENV] = self.run
        return env

    def to_dict(self) -> dict[str, str | None]:
        return {"arn": self.arn, "experiment": self.experiment, "run": self.run}


def parse_mlflow(value: object) -> MlflowTarget | None:
    """`mlflow=` as given (None, an ARN, a MlflowSettings dict, a MlflowTarget) -> MlflowTarget, or a ConfigError."""
    if value is None:
        return None
    if isinstance(value, str):
        target = MlflowTarget(value)
    elif isinstance(value, MlflowTarget):
        target = value
    elif isinstance(value, Mapping):
        unknown = sorted(map(str, set(value) - {"arn", "experiment", "run"}))
        if unknown:
            raise ConfigError("mlflow", dict(value), f"unknown key {', '.join(map(repr, unknown))}: the keys are 'arn', "
                              "'experiment' and 'run'")
        if "arn" not in value:
            raise ConfigError("mlflow", dict(value), _FIX)
        target = MlflowTarget(value["arn"], value.get("experiment"), value.get("run"))
    else:
        raise ConfigError("mlflow", value, _FIX)
    if not isinstance(target.arn, str) or len(target.arn) > MAX_ARN_CHARS or not ARN_RE.fullmatch(target.arn):
        raise ConfigError("mlflow", target.arn, _FIX)
    for name in ("experiment", "run"):
        text = getattr(target, name)
        if text is not None and not (isinstance(text, str) and 0 < len(text) <= MAX_NAME_CHARS and text.strip()):
            raise ConfigError(f"mlflow.{name}", text, f"expected 1-{MAX_NAME_CHARS} characters (MlflowConfig's limit)")
    return target


__all__ = ["ARN_RE", "LOG_ENV", "RUN_NAME_ENV", "MlflowSettings", "MlflowTarget", "parse_mlflow"]
