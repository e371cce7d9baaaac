"""sm_dist: plan, launch and run multi-instance PyTorch training on Amazon SageMaker.

`import sm_dist` is cheap: it imports neither torch nor boto3/sagemaker. The public functions
are resolved on first use:

- `sm_dist.estimate(...)` — memory, time and cost per strategy/instance (standard library only)
- `sm_dist.plan(...)`, `sm_dist.fit(...)` — plan, then launch on SageMaker (boto3, sagemaker) or,
  with `local=True`, run on this machine; either way the result is a `JobHandle` (`sm_dist.Job` in
  the cloud, `sm_dist.Run` for a chained run, which holds its jobs, `sm_dist.LocalJob` here, run as
  `sm_dist.LocalOptions` say); their keyword arguments
  are `sm_dist.LaunchSettings`, so an editor or mypy checks them (a dict of settings too, annotated
  `settings: sm_dist.LaunchSettings = {...}`), some grouped in sections if you like (`sm_dist.Compute`,
  `StoppingCondition`, `Data`, `Networking`, `Observability`, `Chaining`, `Checkpointing`)
- `sm_dist.attach(name)` — the `JobHandle` of an existing job by name: a local run on this machine, else a
  SageMaker training job (or chained run)
- `sm_dist.runtime` — what runs inside the job (torch)
"""

from __future__ import annotations

from sm_dist._lazy import lazy_exports
from sm_dist._records import TYPE_CHECKING
from sm_dist._version import __version__
from sm_dist.errors import (
    CatalogError,
    CheckpointError,
    ConfigError,
    ContainerStartError,
    DoesNotFitError,
    InfraError,
    LaunchError,
    MissingDependencyError,
    RuntimeEnvError,
    SdkError,
    SmDistError,
)

# public name -> "module:attribute", imported on first access (PEP 562)
_LAZY = {
    "estimate": "sm_dist.estimator.api:estimate",
    "plan": "sm_dist.launch.api:plan",
    "fit": "sm_dist.launch.api:fit",
    "attach": "sm_dist.launch.attach:attach",
    "Job": "sm_dist.cloud.job:Job",
    "Run": "sm_dist.cloud.run:Run",
    "LocalJob": "sm_dist.local.job:LocalJob",
    "LocalOptions": "sm_dist.local.options:LocalOptions",
    "JobHandle": "sm_dist.contract.job:JobHandle",
    "Channel": "sm_dist.planning.channels:Channel",
    "LaunchSettings": "sm_dist.planning.settings:LaunchSettings",
    "Checkpointing": "sm_dist.planning.settings:Checkpointing",
    "Compute": "sm_dist.planning.request:Compute",
    "StoppingCondition": "sm_dist.planning.budget:StoppingCondition",
    "Data": "sm_dist.planning.request:Data",
    "Networking": "sm_dist.planning.request:Networking",
    "Observability": "sm_dist.planning.request:Observability",
    "Chaining": "sm_dist.planning.budget:Chaining",
    "MlflowSettings": "sm_dist.planning.mlflow_setting:MlflowSettings",
}

if TYPE_CHECKING:  # what type checkers and editors see: the same names, never imported at run time
    # (`x as x`: an explicit re-export, as mypy's no_implicit_reexport wants; tests/test_public_types.py
    # keeps this list equal to _LAZY)
    from sm_dist.cloud.job import Job as Job
    from sm_dist.cloud.run import Run as Run
    from sm_dist.contract.job import JobHandle as JobHandle
    from sm_dist.estimator.api import estimate as estimate
    from sm_dist.launch.api import fit as fit
    from sm_dist.launch.api import plan as plan
    from sm_dist.launch.attach import attach as attach
    from sm_dist.local.job import LocalJob as LocalJob
    from sm_dist.local.options import LocalOptions as LocalOptions
    from sm_dist.planning.budget import Chaining as Chaining
    from sm_dist.planning.budget import StoppingCondition as StoppingCondition
    from sm_dist.planning.channels import Channel as Channel
    from sm_dist.planning.mlflow_setting import MlflowSettings as MlflowSettings
    from sm_dist.planning.request import Compute as Compute
    from sm_dist.planning.request import Data as Data
    from sm_dist.planning.request import Networking as Networking
    from sm_dist.planning.request import Observability as Observability
    from sm_dist.planning.settings import Checkpointing as Checkpointing
    from sm_dist.planning.settings import LaunchSettings as LaunchSettings
else:
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "__version__",
    "estimate",
    "plan",
    "fit",
    "attach",
    "Job",
    "Run",
    "LocalJob",
    "LocalOptions",
    "JobHandle",
    "Channel",
    "LaunchSettings",
    "Checkpointing",
    "Compute",
    "StoppingCondition",
    "Data",
    "Networking",
    "Observability",
    "Chaining",
    "MlflowSettings",
    "SmDistError",
    "ConfigError",
    "CatalogError",
    "DoesNotFitError",
    "LaunchError",
    "SdkError",
    "MissingDependencyError",
    "InfraError",
    "CheckpointError",
    "RuntimeEnvError",
    "ContainerStartError",
]
