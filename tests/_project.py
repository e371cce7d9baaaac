"""A user's project and AWS account as the plan, cloud and facade tests see them (moto; names only)."""

from __future__ import annotations

ROLE_ARN = "arn:aws:iam::123456789012:role/sm-dist-test"
CKPT_BUCKET = "ckpt-bucket"
DEFAULT_BUCKET = "sagemaker-us-east-1-123456789012"
TRAIN_PY = """import sys
print("[sm_dist] step=1 loss=0.5", sys.argv[1:])
"""


def aws_state() -> tuple[list[str], list[str], int]:
    """What the (moto) account holds: bucket names, training job names, the number of objects."""
    import boto3

    s3 = boto3.client("s3")
    buckets = sorted(b["Name"] for b in s3.list_buckets()["Buckets"])
    objects = sum(s3.list_objects_v2(Bucket=b).get("KeyCount", 0) for b in buckets)
    jobs = [j["TrainingJobName"] for j in boto3.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]]
    return buckets, jobs, objects
