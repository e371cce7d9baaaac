"""Local mode: emulate a multi-instance SageMaker job on this machine (CPU, gloo, moto S3).

The local backend, a peer of the cloud one (`sm_dist.cloud.submit.run`): `run(plan)` takes a
plan from `sm_dist.plan(..., local=True)` and returns the finished `LocalJob`. Names resolve on
first access, so a helper run inside an emulated host (`python -m sm_dist.local.mountns`) does
not import the whole backend.

A local run, as SageMaker would run the same plan (each step's details are its module's docstring):

- before anything is created, requirements.txt is checked against this environment
  (`sm_dist.planning.requirements_check`: the hosts do not pip-install) and the plan becomes a `config.LocalJobConfig`
  and the bundle on disk (`from_plan`; without a checkpoint URI the job spec becomes "sagemaker-sync"
  on a URI of the local S3 endpoint, so a restart resumes); a plan with `keep_alive_s` takes over the
  warm pool an earlier matching job kept, or starts one (`warm_pool`: the hosts' persistent caches);
- an attempt (`runner`) gives each host `algo-N` a folder laid out like /opt/ml (`layout`: config
  files, data channels, the code) and runs the plan's container command as its first process
  (`agent`), with only what the platform gives (`hostenv`), in a private mount namespace where the
  OS allows one (`mountns`: the folder at /opt/ml, `algo-N` in /etc/hosts), else with
  `$SM_DIST_OPT_ML`; S3 is moto's server on 127.0.0.1 (`s3_endpoint`, `stores`), and
  CheckpointConfig's sync is played from this process (`ckpt_sync`);
- while it runs: the hosts' log lines give the progress (`progress`, `view`), /proc the workers and
  their restarts (`procs`, `pgwatch`, `chaos_driver`), `--chaos` faults fire (`chaos`; a spot
  interruption starts a new attempt), SIGINT/SIGTERM stop every host (`interrupt`);
- at the end: the error a user should read (`failure`), each restart's cause (`restarts`),
  `--verify` against an uninterrupted run (`verify`), the result (`summary`, `job`, `cost`); a chain
  (`chain=True`) runs its jobs one after another (`chain`). `cli` holds `sm-dist fit --local`'s
  flags, `options` the same settings as `LocalOptions`, `clean` `sm-dist local clean`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sm_dist._lazy import lazy_exports

_LAZY = {
    "run": "sm_dist.local.api:run",
    "LocalJob": "sm_dist.local.job:LocalJob",
    "LocalOptions": "sm_dist.local.options:LocalOptions",
}

if TYPE_CHECKING:  # what type checkers see; tests/test_public_types.py keeps it equal to _LAZY
    from sm_dist.local.api import run as run
    from sm_dist.local.job import LocalJob as LocalJob
    from sm_dist.local.options import LocalOptions as LocalOptions
else:
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = ["LocalJob", "LocalOptions", "run"]
