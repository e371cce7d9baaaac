"""The cloud backend: act on a plan — read-only checks, upload the bundle, CreateTrainingJob.

`run(plan)` is what `sm_dist.fit` hands a plan to (its peer is `sm_dist.local.run`); it never
calls back into the facade.

Order matters: every check that can refuse (role, bucket regions) runs before the first thing
is created (the default bucket, the uploaded code, the job).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from sm_dist.cloud.job import Job
from sm_dist.cloud.remote_checks import remote_checks
from sm_dist.errors import ConfigError, LaunchError

if TYPE_CHECKING:
    from boto3.session import Session
    from mypy_boto3_s3 import S3Client

    from sm_dist.cloud.run import Run
    from sm_dist.planning.bundle import BundleFile
    from sm_dist.planning.channel_data import DataUpload
    from sm_dist.planning.plan import Plan

_log = logging.getLogger(__name__)

#: Parallel PUTs for the bundle (boto3 clients are thread-safe); bundles are small files.
UPLOAD_THREADS = 8


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


def _kms_key(plan: Plan) -> str | None:
    """The output KMS key, if the plan has one: everything sm_dist uploads is encrypted with it."""
    return plan.request["OutputDataConfig"].get("KmsKeyId")


def _put(s3: S3Client, bucket: str, key: str, body: bytes, kms: str | None) -> None:
    if kms:
        s3.put_object(Bucket=bucket, Key=key, Body=body, ServerSideEncryption="aws:kms", SSEKMSKeyId=kms)
    else:
        s3.put_object(Bucket=bucket, Key=key, Body=body)


def ensure_default_bucket(s3: S3Client, bucket: str, region: str) -> None:
    """Create the SDK-style default bucket if missing (what ModelTrainer would do)."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
        return
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise LaunchError(f"cannot use the default bucket {bucket}: {exc}") from None
    _log.info("creating the SageMaker default bucket %s", bucket)
    if region == "us-east-1":  # the API refuses a LocationConstraint naming us-east-1
        s3.create_bucket(Bucket=bucket)
    else:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})  # type: ignore[typeddict-item]  # any region string


def upload_bundle(plan: Plan, s3: S3Client) -> int:
    """PUT every bundle file under plan.code_s3_uri (bytes checked against the plan); returns bytes."""
    bucket, prefix = _split(plan.code_s3_uri)
    kms = _kms_key(plan)

    def put(item_data: tuple[BundleFile, bytes]) -> int:
        item, data = item_data
        _put(s3, bucket, prefix + item.path, data, kms)
        return len(data)

    with ThreadPoolExecutor(max_workers=UPLOAD_THREADS) as pool:
        total = sum(pool.map(put, plan.bundle.payloads()))
    _log.info("uploaded %d files (%.2f MiB) to %s", len(plan.bundle.files), total / 2**20, plan.code_s3_uri)
    return total


def upload_data(upload: DataUpload, s3: S3Client, kms: str | None = None, log_every: int = 256 * 2**20) -> int:
    """Upload one local channel to its content-named prefix, unless a complete copy is there already
    (its marker object, written last); returns the bytes sent (0 when skipped)."""
    from botocore.exceptions import ClientError

    bucket, prefix = _split(upload.s3_uri)
    _, marker = _split(upload.complete_marker)
    try:
        s3.head_object(Bucket=bucket, Key=marker)
        _log.info("data %s: already at %s (same files, sizes and times), not uploaded again", upload.channel,
                  upload.s3_uri)
        return 0
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
            raise LaunchError(f"cannot check {upload.complete_marker}: {exc}") from None
    total, sent, next_log = upload.data.total_bytes, 0, log_every
    _log.info("data %s: uploading %d files (%.1f MiB) from %s to %s", upload.channel, len(upload.data.files),
              total / 2**20, upload.data.folder, upload.s3_uri)

    def put(item: tuple[str, int]) -> int:
        rel, size = item
        path = upload.data.folder / rel
        if path.stat().st_size != size:
            raise LaunchError(f"{path} changed since the plan was made; plan again")
        encryption = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms} if kms else None
        s3.upload_file(str(path), bucket, prefix + rel, ExtraArgs=encryption)
        return size

    with ThreadPoolExecutor(max_workers=UPLOAD_THREADS) as pool:
        for size in pool.map(put, upload.data.files):
            sent += size
            if sent >= next_log:
                _log.info("data %s: %.0f%% (%.1f of %.1f MiB)", upload.channel, 100 * sent / total, sent / 2**20,
                          total / 2**20)
                next_log += log_every
    _put(s3, bucket, marker, upload.data.fingerprint.encode(), kms)
    return sent


def submit(plan: Plan, session: Session, validate_role: bool = True) -> Plan:
    """Run the remote checks, upload the code, create the job; returns the plan with what the checks
    found (the warm pool it starts on, or why not)."""
    import dataclasses

    from botocore.exceptions import ClientError

    pool = remote_checks(plan, session, validate_role=validate_role, skip_code_bucket=bool(plan.default_bucket))
    if pool is not None:
        plan = dataclasses.replace(plan, warm_pool=pool)
        _log.info("warm pool: %s", pool.line())
    s3 = session.client("s3", region_name=plan.region)
    if plan.default_bucket:
        ensure_default_bucket(s3, plan.default_bucket, plan.region)
    for upload in plan.uploads:
        upload_data(upload, s3, _kms_key(plan))
    upload_bundle(plan, s3)
    client = session.client("sagemaker", region_name=plan.region)
    try:
        client.create_training_job(**plan.request)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") in ("ValidationException", "ResourceLimitExceeded"):
            raise ConfigError("CreateTrainingJob", plan.job_name, f"{error.get('Code')}: {error.get('Message')} "
                              f"(code left at {plan.code_s3_uri})") from None
        raise LaunchError(f"CreateTrainingJob {plan.job_name} failed: {exc} (code left at {plan.code_s3_uri})") from None
    _log.info("created training job %s", plan.job_name)
    return plan


def run(plan: Plan, *, session: Session | None = None, validate_role: bool = True,
        wait: bool = False) -> Job | Run:
    """Launch `plan` on SageMaker and return its `Job`, or a chained run's `Run` (`wait=True`: after it ended).

    `session`: a boto3 Session (default: one for the plan's region). `validate_role=False`
    skips the SDK's IAM permission simulation.
    """
    if plan.local:
        raise ConfigError("plan", repr(plan), "a local plan (local=True) runs with sm_dist.local.run; "
                          "plan it again without local=True to launch on SageMaker")
    if session is None:
        import boto3

        session = boto3.Session(region_name=plan.region)
    for warning in plan.warnings:
        _log.warning("%s", warning)
    plan = submit(plan, session, validate_role=validate_role)
    if plan.run is not None:  # a chain: its first job now, the chain stack's supervisor the next ones
        from sm_dist.cloud.run import Run

        job: Job | Run = Run(plan.run, session=session, region=plan.region, plan=plan)
    else:
        job = Job(plan.job_name, session=session, region=plan.region, plan=plan)
    if wait:
        job.wait()
    return job


__all__ = ["ensure_default_bucket", "run", "submit", "upload_bundle"]
