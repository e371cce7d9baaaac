"""The frozen `Plan`: everything `fit` will do, as a value, made by `sm_dist.plan(...)`.

The plan holds the exact CreateTrainingJob request, the code bundle's manifest, the job spec,
the cost limits and estimate, and every warning. `fit` submits exactly this request; a dry run
prints it (`str(plan)`: `planning.report`; `plan.to_dict()`: `--json`).

It is built from a LaunchConfig in `sm_dist.planning.build` (`make_plan`), the part that needs no
AWS (strategy, job spec, bundle) in `sm_dist.planning.code_plan`. Making a plan reads local files
and, only for what was not given explicitly (role, infra stack outputs), makes read-only AWS calls
— never an upload or a create. A local plan (`local=True`, for `sm_dist.local.run`) makes no AWS
call at all: what it does not need is filled once, with labels (`LOCAL_DEFAULTS`,
`locations.local_locations`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sm_dist.contract.chain import ChainPolicy
from sm_dist.jobspec import JobSpec
from sm_dist.planning import bundle as bundle_mod
from sm_dist.planning import request as request_mod
from sm_dist.planning.budget import Limits
from sm_dist.planning.channel_data import DataUpload
from sm_dist.planning.channels import Channel
from sm_dist.planning.report import render_plan
from sm_dist.planning.sizing import Sizing
from sm_dist.planning.warm_pool import PoolReuse
from sm_dist.vocab import Strategy

if TYPE_CHECKING:
    from IPython.lib.pretty import RepresentationPrinter

#: What a local plan needs and its user need not give: labels, never sent to AWS (the region's
#: catalog prices price the run; "on SageMaker $x" is for this instance type). The role label
#: and the output bucket come from `locations.local_locations`.
LOCAL_DEFAULTS: Mapping[str, str] = MappingProxyType({"region": "us-east-1", "instance_type": "ml.g5.xlarge"})


@dataclass(frozen=True, repr=False)
class Plan:
    """Everything `fit` will do, as a value. Build it with `sm_dist.plan(...)`."""

    job_name: str
    region: str
    request_json: str
    """The CreateTrainingJob parameters (JSON; see `request`)."""
    job_spec: JobSpec
    bundle: bundle_mod.Bundle
    code_s3_uri: str
    role_arn: str
    instance_type: str
    instance_count: int
    checkpoint_uri: str | None
    checkpoint_local_path: str
    limits: Limits
    sizing: Sizing
    default_bucket: str | None
    """The SDK default bucket fit creates if missing (None: an explicit or infra bucket)."""
    container_command: tuple[str, ...] = request_mod.PID1_COMMAND
    environment: Mapping[str, str] = field(default_factory=dict)
    hyperparameters: Mapping[str, str] = field(default_factory=dict)
    channels: Mapping[str, Channel] = field(default_factory=dict)
    """Data channels as the user gave them (a local folder stays a folder), without the code channel."""
    uploads: tuple[DataUpload, ...] = ()
    """Local channels the cloud backend uploads before CreateTrainingJob (to the prefixes the request names)."""
    warnings: tuple[str, ...] = ()
    local: bool = False
    """A plan for local mode: region, role and S3 URIs only label the request."""
    run: str | None = None
    """A chain's run name (`chain=True`): `job_name` is its first link, `<run>-1` (contract.chain)."""
    chain: ChainPolicy | None = None
    """A chain's policy: links, each link's MaxRuntime cap, the run's budget."""
    warm_pool: PoolReuse | None = None
    """The last warm pool of this base job name and whether this job starts on it (set by the cloud
    backend's read-only checks when keep_alive_s is set; planning.warm_pool)."""

    @property
    def request(self) -> dict[str, Any]:
        """A fresh copy of the CreateTrainingJob parameters."""
        request: dict[str, Any] = json.loads(self.request_json)
        return request

    @property
    def tensorboard_uri(self) -> str | None:
        """TensorBoardOutputConfig.S3OutputPath (None: tensorboard off): `tensorboard --logdir` it."""
        config = self.request.get("TensorBoardOutputConfig") or {}
        return str(config["S3OutputPath"]) if config.get("S3OutputPath") else None

    @property
    def strategy(self) -> Strategy:
        return self.job_spec.strategy

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what `sm-dist fit --dry-run --json` prints)."""
        return {
            "job_name": self.job_name, "region": self.region, "request": self.request,
            "container_command": list(self.container_command), "environment": dict(self.environment),
            "job_spec": self.job_spec.to_dict(), "code_s3_uri": self.code_s3_uri,
            "bundle": {"files": self.bundle.manifest(), "total_bytes": self.bundle.total_bytes},
            "cost": {**self.limits.to_dict(), "estimate": None if self.sizing.row is None else self.sizing.row.to_dict(),
                     "strategy_reason": self.sizing.reason},
            "channels": {name: c.to_dict() for name, c in self.channels.items()},
            "uploads": [u.to_dict() for u in self.uploads],
            "default_bucket": self.default_bucket, "warnings": list(self.warnings), "local": self.local,
            "chain": None if self.chain is None else {"run": self.run, **dataclasses.asdict(self.chain)},
            "warm_pool": None if self.warm_pool is None else self.warm_pool.to_dict(),
        }

    def __str__(self) -> str:
        return render_plan(self)

    def __repr__(self) -> str:
        return (f"Plan({self.job_name!r}, {self.instance_count} × {self.instance_type}, "
                f"strategy={self.strategy.value!r}, {len(self.bundle.files)} files, {len(self.warnings)} warnings)")

    def _repr_pretty_(self, printer: RepresentationPrinter, cycle: bool) -> None:
        """IPython/Jupyter: show the rendered plan, not the field dump."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        """Jupyter: the rendered plan as a table, the exact request one click away."""
        from sm_dist.notebook.markup import details, text_table

        return text_table(str(self), title=False,
                          extra=details("CreateTrainingJob request", json.dumps(self.request, indent=2)))


def tensorboard_uri(output_s3_uri: str, name: str) -> str:
    """Where SageMaker syncs a job's TensorBoard folder: `<output>/<job>/tensorboard` (a chain's jobs
    share the run's, `<output>/<run>/tensorboard`, so one TensorBoard shows the whole run)."""
    return request_mod.s3_join(output_s3_uri, name, "tensorboard")


__all__ = ["LOCAL_DEFAULTS", "Plan", "tensorboard_uri"]
