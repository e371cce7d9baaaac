"""A user's project and AWS account as the plan, cloud and facade tests see them (moto; names only)."""

from __future__ import annotations

ROLE_ARN = "arn:aws:iam::123456789012:role/sm-dist-test"
CKPT_BUCKET = "ckpt-bucket"
DEFAULT_BUCKET = "sagemaker-us-east-1-123456789012"
TRAIN_PY = """import sys
print("[sm_dist] step=1 loss=0.5", sys.argv[1:])
"""
