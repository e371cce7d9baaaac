"""The plan layer: a LaunchConfig becomes a frozen `Plan`, creating nothing.

Both backends take a Plan — the cloud one (`sm_dist.cloud`) and the local one (`sm_dist.local`) —
and neither imports the other; the facade (`sm_dist.launch.api`: `sm_dist.plan`, `sm_dist.fit`)
makes the plan and picks the backend. One path (`build.launch_config`, `build.make_plan`): the
keyword settings (settings: LaunchSettings) →
config (LaunchConfig, each field checked) → the code bundle (ignore, bundle, wheels), the strategy
(sizing: the estimator), locations (role, S3, an infra stack's outputs), the request (request:
ModelTrainer → CreateTrainingJob; budget: MaxRuntime/MaxWait; tags; channels) and the checks that
need no AWS call (preflight, constraints, reach) → the frozen `Plan`, which report renders.
Checkpoint mode "auto" is resolved here (`preflight.check_checkpointing`). The modules are listed in
docs/ARCHITECTURE.md's layout. boto3 and sagemaker load only inside functions.
"""
