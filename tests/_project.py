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


#: The trust policy of an execution role: SageMaker may assume it.
SAGEMAKER_TRUST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
#: The test role's permissions: a broad execution role (any bucket, SageMaker's logs and metrics, any ECR
#: image, a VPC's interfaces), so the tests that are not about permissions pass fit's real role check.
TEST_ROLE_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation", "s3:GetObject", "s3:PutObject",
                                   "s3:DeleteObject"], "Resource": ["arn:aws:s3:::*", "arn:aws:s3:::*/*"]},
    {"Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams",
                                   "logs:PutLogEvents"], "Resource": "arn:aws:logs:*:*:log-group:/aws/sagemaker/*"},
    {"Effect": "Allow", "Action": ["cloudwatch:PutMetricData", "ecr:GetAuthorizationToken", "ec2:Describe*"],
     "Resource": "*"},
    {"Effect": "Allow", "Action": ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
     "Resource": "arn:aws:ecr:*:*:repository/*"},
    {"Effect": "Allow", "Action": ["ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
                                   "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission",
                                   "kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], "Resource": "*"}]}


def create_test_role(session: object, policy: dict[str, object] | None = None, name: str = "sm-dist-test") -> str:
    """Create ROLE_ARN's role in (moto's) IAM, trusted by SageMaker, with `policy` (TEST_ROLE_POLICY); its ARN."""
    import json

    iam = session.client("iam")  # type: ignore[attr-defined]
    arn: str = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="execution",
                        PolicyDocument=json.dumps(TEST_ROLE_POLICY if policy is None else policy))
    return arn


def deploy_chain_stack(role: str = ROLE_ARN, region: str = "us-east-1") -> str:
    """The chain stack (infra/sm-dist-chain.yaml) deployed to moto, its supervisor passing `role`, as
    fit(chain=True) requires; the URL of its queue of failed events."""
    import boto3

    from sm_dist.provision import stack

    stack.deploy("sm-dist-chain", {"ExecutionRoleArn": role}, session=boto3.Session(region_name=region),
                 template_name="sm-dist-chain.yaml", poll_seconds=0)
    described = boto3.client("cloudformation", region_name=region).describe_stacks(StackName="sm-dist-chain")
    url: str = next(o["OutputValue"] for o in described["Stacks"][0]["Outputs"]
                    if o["OutputKey"] == "FailedEventsQueueUrl")
    return url
