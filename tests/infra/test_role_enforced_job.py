"""The job itself, under the stack's role with IAM enforced: nothing it needs is denied.

`sm-dist infra deploy` into moto's server, then the README's cnn.py planned with that stack (2 hosts of one process
each, sagemaker-sync checkpoints) and started as SageMaker starts it: each host's PID 1 (`python3 -m
sm_dist.container.pid1`) in a folder laid out as /opt/ml, with the role's own STS credentials and moto's S3 as its
endpoint, and moto's IAM enforcement switched on (every request signed by a known key and allowed by that key's
policies, moto's evaluator). The platform's checkpoint upload (SageMaker's, done with the same role) is local mode's
sync over a client with those credentials. A rank is killed while it saves; the restarted hosts restore their
folders from S3 (the container lists and reads the checkpoint prefix itself) and the job completes on both hosts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _harness import HANG_GUARD_S, Group, free_port
from _iam_simulator import store_as_iam_does
from container.test_pid1_as_sagemaker_starts_it import sagemaker_opt_ml

import sm_dist
from sm_dist.launch.api import build_bundle
from sm_dist.local import mountns
from sm_dist.provision import stack

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")]
ENTRYPOINTS = Path(__file__).resolve().parents[2] / "entrypoints"
HOSTS = ["algo-1", "algo-2"]


def test_the_job_under_its_role_with_iam_enforced_completes_after_a_kill(
        moto_endpoint: str, config_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if mountns.unshare_prefix() is None:
        pytest.skip("no private mount namespace here (`unshare --mount`): /opt/ml and algo-N cannot be provided")
    import _iam_simulator
    import boto3
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    from sm_dist.local.ckpt_sync import CheckpointSync
    from sm_dist.local.stores import S3Store

    _iam_simulator.install(monkeypatch)
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": moto_endpoint}.items():
        monkeypatch.setenv(key, value)
    session = boto3.Session(region_name="us-east-1")
    out = stack.deploy("enforced", {"Prefix": "team"}, session=session, poll_seconds=0).outputs
    plan = sm_dist.plan("cnn.py", source_dir=str(ENTRYPOINTS), instance_type="ml.g5.xlarge", instance_count=2,
                        nproc_per_node=1, hyperparameters={"steps": "12"}, checkpoint_interval_steps=4,
                        checkpoint_mode="sagemaker-sync", infra_stack="enforced", session=session, max_runtime_s=900)
    assert plan.checkpoint_uri.startswith(out["checkpoint_uri"] + "/")
    store_as_iam_does(out["role_arn"])
    creds = session.client("sts").assume_role(RoleArn=out["role_arn"], RoleSessionName="job")["Credentials"]
    role_env = {"AWS_ACCESS_KEY_ID": creds["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
                "AWS_SESSION_TOKEN": creds["SessionToken"]}
    as_role = boto3.Session(aws_access_key_id=role_env["AWS_ACCESS_KEY_ID"], region_name="us-east-1",
                            aws_secret_access_key=role_env["AWS_SECRET_ACCESS_KEY"],
                            aws_session_token=role_env["AWS_SESSION_TOKEN"])

    bundle = build_bundle(plan, tmp_path / "bundle")
    hosts_file = tmp_path / "etc-hosts"
    hosts_file.write_text(mountns.hosts_file_text(HOSTS, Path(mountns.ETC_HOSTS).read_text()))
    roots = [sagemaker_opt_ml(tmp_path / h, h, bundle, dict(plan.hyperparameters)) for h in HOSTS]
    platform = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TRAINING_JOB_NAME": plan.job_name,
                "TRAINING_JOB_ARN": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{plan.job_name}",
                **plan.environment, **role_env, "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
                "AWS_ENDPOINT_URL_S3": moto_endpoint, "SM_DIST_FAULT": "crash-in-save:8",
                "SM_DIST_RDZV_PORT": str(free_port()), "SM_DIST_MASTER_PORT": str(free_port())}
    command = [sys.executable if a == "python3" else a for a in plan.container_command]

    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # enforcement on from here
    monkeypatch.setattr(ActionAuthenticatorMixin, "request_count", 0)
    store = S3Store(plan.checkpoint_uri, moto_endpoint, client=as_role.client("s3", endpoint_url=moto_endpoint))
    sync = CheckpointSync(store, {h: root / "checkpoints" for h, root in zip(HOSTS, roots)})
    sync.restore()
    sync.start()
    try:
        group = Group([mountns.command(root, command, hosts_file) or [] for root in roots], [platform] * len(roots),
                      cwd=tmp_path)
        codes = group.wait(timeout=HANG_GUARD_S)
    finally:
        sync.stop(flush=True)
    logs = group.output
    assert codes == [0, 0], group.report()
    assert "AccessDenied" not in logs and "Forbidden" not in logs and "NoCredentials" not in logs, group.report()
    # rank 1 was killed while saving step 8; the restarted workers restored from S3 and resumed at step 4
    assert "fault hook crash-in-save:8" in logs and "resumed from /opt/ml/checkpoints at step 4" in logs, logs
    assert not sync.problems(), sync.problems()
    keys = [o["Key"] for o in as_role.client("s3", endpoint_url=moto_endpoint).list_objects_v2(
        Bucket=out["bucket"], Prefix="team/checkpoints/")["Contents"]]
    assert any("manifest" in k for k in keys), keys
    # enforcement was on: the same credentials may not write outside the stack's prefix
    with pytest.raises(Exception, match="AccessDenied"):
        as_role.client("s3", endpoint_url=moto_endpoint).put_object(Bucket=out["bucket"], Key="elsewhere/x", Body=b"")
