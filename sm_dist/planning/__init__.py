"""The plan layer: a LaunchConfig becomes a frozen `Plan`, creating nothing.

Both backends take a Plan — the cloud one (`sm_dist.cloud`) and the local one (`sm_dist.local`) —
and neither imports the other; the facade (`sm_dist.launch.api`: `sm_dist.plan`, `sm_dist.fit`)
makes the plan and picks the backend. Modules: config (LaunchConfig), ignore + bundle (the code
channel), sizing (estimator → strategy), budget (StoppingCondition), locations (role, S3), preflight
(checks), request (ModelTrainer → CreateTrainingJob), tags, plan (the frozen Plan), report
(rendering), profile (a missing AWS_PROFILE). boto3 and sagemaker load only inside functions.
"""
