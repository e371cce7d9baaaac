"""Launch on SageMaker: plan (pure) → submit (upload + CreateTrainingJob) → Job handle.

Modules: config (LaunchConfig), ignore + bundle (the code channel), sizing (estimator),
budget (StoppingCondition), locations (role, S3), preflight (checks), request (ModelTrainer →
CreateTrainingJob), plan (the frozen Plan), report (rendering), submit, job + logs +
checkpoints + report_job (the Job handle), api (plan/fit/build_bundle), cli (the commands).
Nothing is imported eagerly; boto3 and sagemaker only inside the functions that need them.
"""
