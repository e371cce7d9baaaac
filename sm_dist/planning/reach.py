"""What an infra stack's role may reach, checked on the built request before anything is uploaded.

`sm-dist infra deploy` records what its execution role was granted (stack outputs ArtifactUri,
KmsKeyArn, VpcMode, DataBuckets; infra/sm-dist.yaml). A request that names an S3 URI, a KMS key
or a VPC outside that reach passes every API check and fails on SageMaker minutes later (an
AccessDenied while downloading a channel, writing a checkpoint or creating the network
interfaces). So a plan made with the stack's role refuses it here, in one line with the
`sm-dist infra deploy --param …` that widens the reach, or the setting that stays inside it.
This is pure: the stack's outputs were read when the plan resolved its locations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sm_dist.errors import ConfigError

#: The value a stack output has when the stack grants nothing of that kind (infra/sm-dist.yaml).
NONE = "none"


def s3_parts(uri: str) -> tuple[str, str]:
    """("bucket", "key/prefix") of an s3:// URI; the prefix without a trailing slash."""
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key.rstrip("/")


def under(uri: str, base: str) -> bool:
    """`uri` is `base` or below it (whole key segments: s3://b/team is not under s3://b/te)."""
    bucket, key = s3_parts(uri)
    base_bucket, base_key = s3_parts(base)
    return bucket == base_bucket and (not base_key or key == base_key or key.startswith(base_key + "/"))


def _deploy(stack: str, param: str) -> str:
    return f"sm-dist infra deploy --stack-name {stack} --param {param}"


def _listed(value: str | None) -> list[str]:
    return [] if value in (None, "", NONE) else [v for v in str(value).split(",") if v]


def check_reach(request: Mapping[str, Any], reach: Mapping[str, str], stack: str,
                checkpoint_uri: str | None = None) -> list[str]:
    """Refuse (ConfigError) what the stack's role cannot reach; warnings for what the stack does not record.

    `reach`: the stack's resolved outputs (sm_dist.provision.outputs.resolve), `stack` its name;
    `checkpoint_uri`: the job spec's S3 checkpoint URI, which the runtime writes itself when the request
    has no CheckpointConfig.
    """
    warnings: list[str] = []
    own = reach.get("artifact_uri") or f"s3://{reach['bucket']}"
    output = request.get("OutputDataConfig") or {}
    writes = {"output_s3_uri": output.get("S3OutputPath"),
              "checkpoint_s3_uri": (request.get("CheckpointConfig") or {}).get("S3Uri") or checkpoint_uri,
              "tensorboard": (request.get("TensorBoardOutputConfig") or {}).get("S3OutputPath")}
    for field, uri in writes.items():
        if uri and not under(uri, own):
            raise ConfigError(field, uri, f"the role of infra stack {stack} may write only under {own}; "
                              f"use a URI under it (or leave {field} unset: the stack's is the default)")
    recorded = all(key in reach for key in ("kms_key_arn", "vpc_mode", "data_buckets"))
    if not recorded:
        warnings.append(f"infra stack {stack} does not record its role's data buckets, KMS key and VPC mode "
                        f"(deployed by an older sm_dist); redeploy it so fit can check them: sm-dist infra deploy "
                        f"--stack-name {stack}")
    _check_channels(request, reach, stack, own, recorded)
    if not recorded:
        return warnings
    key = output.get("KmsKeyId")
    granted = reach.get("kms_key_arn", NONE)
    if key and granted != key and not granted.endswith("/" + str(key)):
        raise ConfigError("output_kms_key", key, f"the role of infra stack {stack} may use only "
                          f"{'no KMS key' if granted == NONE else granted}; leave output_kms_key unset (the bucket's "
                          f"key applies) or redeploy with that key: {_deploy(stack, f'KmsKeyArn={key}')}")
    if request.get("VpcConfig") and reach.get("vpc_mode") != "true":
        raise ConfigError("subnets", ",".join((request.get("VpcConfig") or {}).get("Subnets", [])),
                          f"the role of infra stack {stack} may not create a job's network interfaces (VpcMode=false); "
                          f"redeploy it: {_deploy(stack, 'VpcMode=true')}")
    return warnings


def _check_channels(request: Mapping[str, Any], reach: Mapping[str, str], stack: str, own: str,
                    recorded: bool) -> None:
    """Every S3 channel is under the stack's prefix or in one of its data buckets."""
    buckets = _listed(reach.get("data_buckets"))
    for channel in request.get("InputDataConfig") or []:
        uri = ((channel.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri")
        if not uri or under(uri, own):
            continue
        bucket = s3_parts(uri)[0]
        if bucket in buckets or not recorded:
            continue
        wanted = ",".join([*buckets, bucket])
        fix = (_deploy(stack, f"DataBuckets={wanted}") if len(buckets) < 3 else
               f"the stack grants at most three data buckets ({', '.join(buckets)}); copy the data into one of them")
        raise ConfigError(f"inputs[{channel.get('ChannelName')}]", uri,
                          f"the role of infra stack {stack} may not read bucket {bucket}; {fix}")


__all__ = ["NONE", "check_reach", "s3_parts", "under"]
