"""What CreateTrainingJob refuses and botocore lets through, checked on the built request.

botocore validates types, required members and minimums only. The service model also carries
maximum lengths, list and map sizes, patterns, enums and integer maximums, and the API reference
states rules in prose; SageMaker enforces them when the job is created, after sm_dist would
have uploaded the code. This module checks them on the request `make_plan` built, before
anything is uploaded: each a ConfigError naming the setting, the value and the limit, or, where
there is one right fix, that fix with a plan warning (docs/PLATFORM.md §9 lists every rule
and its test).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sm_dist.contract.container import OPT_ML
from sm_dist.errors import ConfigError
from sm_dist.planning.preflight import sagemaker_service_model, tag_text_ok

if TYPE_CHECKING:
    from botocore.model import Shape

    from sm_dist.catalog.hardware import Hardware

#: The API's `integer` is 32-bit (docs/PLATFORM.md §9).
INT32_MAX = 2**31 - 1
#: Patterns that constrain nothing sm_dist could send ("." read as any character, see §9).
_ANY = frozenset({".*", "[\\S\\s]*"})
#: The tag pattern uses Java's Unicode classes, which Python's `re` lacks.
_TAG_PATTERN = "([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)"
#: Request paths -> the setting a user gives (sm_dist.fit's keyword), longest prefix first.
_SETTINGS = (
    ("AlgorithmSpecification.TrainingImage", "image_uri"), ("AlgorithmSpecification.MetricDefinitions", "metrics"),
    ("ResourceConfig.VolumeKmsKeyId", "volume_kms_key"), ("ResourceConfig.VolumeSizeInGB", "volume_size_gb"),
    ("ResourceConfig.InstanceCount", "instance_count"), ("ResourceConfig.KeepAlivePeriodInSeconds", "keep_alive_s"), ("OutputDataConfig.KmsKeyId", "output_kms_key"),
    ("OutputDataConfig.S3OutputPath", "output_s3_uri"), ("CheckpointConfig.S3Uri", "checkpoint_s3_uri"),
    ("TensorBoardOutputConfig.S3OutputPath", "output_s3_uri"), ("TensorBoardOutputConfig", "tensorboard"),
    ("VpcConfig.Subnets", "subnets"), ("VpcConfig.SecurityGroupIds", "security_group_ids"),
    ("StoppingCondition.MaxRuntimeInSeconds", "max_runtime_s"), ("StoppingCondition.MaxWaitTimeInSeconds", "max_wait_s"),
    ("RetryStrategy", "retry_attempts"), ("InputDataConfig", "inputs"), ("HyperParameters", "hyperparameters"),
    ("Environment", "environment"), ("Tags", "tags"), ("RoleArn", "role"), ("TrainingJobName", "job_name"),
    ("MlflowConfig", "mlflow"),
)
#: TensorBoardOutputConfig.LocalPath prefixes CreateTrainingJob refuses, its own default included
#: (docs/PLATFORM.md §1.14): sm_dist sends no LocalPath, so the default applies.
TENSORBOARD_RESERVED = (OPT_ML, "/tmp", "/usr/local/nvidia")
#: An ECR image URI: account, region, domain, repository (docs/PLATFORM.md §6.2).
_ECR_URI = re.compile(r"(\d{12})\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?/([^:@]+)(?:[:@].*)?")


def check_request(request: Mapping[str, Any], hw: Hardware | None) -> tuple[dict[str, Any], list[str]]:
    """The request with its one-fix rules applied, and their warnings; or a ConfigError."""
    fixed = dict(request)
    warnings = _volume_kms_key(fixed, hw) + warm_pool_rules(fixed)
    _express_kms(fixed)
    _tensorboard_local_path(fixed)
    warnings += check_debug_settings(fixed)
    shape = sagemaker_service_model().operation_model("CreateTrainingJob").input_shape
    if shape is not None:
        _walk(fixed, shape, "")
    return fixed, warnings


def _volume_kms_key(request: dict[str, Any], hw: Hardware | None) -> list[str]:
    """"You can't request a VolumeKmsKeyId when using an instance type with local storage"
    (ResourceConfig.VolumeKmsKeyId): dropped with a warning, as SDK v2 drops it. The instance's
    NVMe storage is encrypted by the instance itself, with AWS's key, not this one."""
    resource = dict(request.get("ResourceConfig") or {})
    key = resource.get("VolumeKmsKeyId")
    if not key or hw is None or not hw.local_nvme:
        return []
    del resource["VolumeKmsKeyId"]
    request["ResourceConfig"] = resource
    return [f"volume_kms_key {key} not sent: {hw.instance_type} has local NVMe storage, for which SageMaker refuses a "
            "volume key; the instance encrypts that storage itself (hardware module, AWS-managed key). Only an EBS-only "
            "instance type (e.g. the CPU families ml.c5, ml.m5) takes your key"]


def _express_kms(request: Mapping[str, Any]) -> None:
    """OutputDataConfig.KmsKeyId: "KMS key is not supported for Amazon S3 Express One Zone"."""
    output = request.get("OutputDataConfig") or {}
    bucket = str(output.get("S3OutputPath", "")).split("/")[2:3]
    if output.get("KmsKeyId") and bucket and bucket[0].endswith("--x-s3"):
        raise ConfigError("output_kms_key", output["KmsKeyId"], f"the output bucket {bucket[0]} is an S3 Express One Zone "
                          "directory bucket, which SageMaker encrypts with S3-managed keys only; drop output_kms_key")


#: The developer guide's longest keep-alive, below the service model's 21600 (docs/PLATFORM.md §1.13).
KEEP_ALIVE_GUIDE_MAX_S = 3600


def warm_pool_rules(request: Mapping[str, Any]) -> list[str]:
    """ResourceConfig.KeepAlivePeriodInSeconds: warm pools "cannot be used with spot instances" nor "with
    heterogeneous cluster training" (refused); above the guide's 3600 s, a warning (docs/PLATFORM.md §1.13)."""
    resource = request.get("ResourceConfig") or {}
    keep = resource.get("KeepAlivePeriodInSeconds")
    if not keep:
        return []
    if request.get("EnableManagedSpotTraining"):
        raise ConfigError("keep_alive_s", keep, "SageMaker keeps no warm pool for managed spot training: drop spot=True "
                          "(--spot) or keep_alive_s (--keep-alive-s)")
    if resource.get("InstanceGroups"):
        raise ConfigError("keep_alive_s", keep, "SageMaker keeps no warm pool for a heterogeneous cluster "
                          "(ResourceConfig.InstanceGroups): drop keep_alive_s")
    if keep > KEEP_ALIVE_GUIDE_MAX_S:
        return [f"keep_alive_s {keep}: the API takes up to 21600 s, the SageMaker developer guide still says warm pools "
                f"are limited to {KEEP_ALIVE_GUIDE_MAX_S} s; if CreateTrainingJob refuses it, use {KEEP_ALIVE_GUIDE_MAX_S}"]
    return []


def _tensorboard_local_path(request: Mapping[str, Any]) -> None:
    """"LocalPath" of "TensorBoardOutputConfig" cannot start with a reserved path (/opt/ml, /tmp, /usr/local/nvidia)."""
    local = str((request.get("TensorBoardOutputConfig") or {}).get("LocalPath") or "")
    if any(local == p or local.startswith(p + "/") for p in TENSORBOARD_RESERVED):
        raise ConfigError("tensorboard", local, f"CreateTrainingJob refuses a TensorBoardOutputConfig.LocalPath under "
                          f"{', '.join(TENSORBOARD_RESERVED)}; leave it out (the job writes to /opt/ml/output/tensorboard)")


def check_debug_settings(request: Mapping[str, Any]) -> list[str]:
    """RemoteDebugConfig and InfraCheckConfig against what SageMaker offers (docs/PLATFORM.md §1.16): no SSM
    session reaches a container under network isolation; the infra check runs on accelerated instances only.
    A VPC's hosts reach SSM only through a NAT gateway or an SSM endpoint: a warning."""
    from sm_dist.estimator.cost import infra_check_offered

    debug = bool((request.get("RemoteDebugConfig") or {}).get("EnableRemoteDebug"))
    if debug and request.get("EnableNetworkIsolation"):
        raise ConfigError("remote_debug", True, "SSM cannot reach a container under network isolation (it blocks the "
                          "agent's outbound calls): drop network_isolation or remote_debug")
    kind = str((request.get("ResourceConfig") or {}).get("InstanceType", ""))
    if (request.get("InfraCheckConfig") or {}).get("EnableInfraCheck") and not infra_check_offered(kind):
        raise ConfigError("infra_check", True, f"SageMaker's infra check tests accelerated instances (ml.p*, ml.g*, "
                          f"ml.trn*), not {kind}: drop infra_check (--no-infra-check)")
    if debug and (request.get("VpcConfig") or {}).get("Subnets"):
        return ["remote_debug in a VPC: the hosts' SSM agent reaches SSM only through a NAT gateway or an SSM VPC "
                "endpoint (com.amazonaws.<region>.ssmmessages) in those subnets"]
    return []


def check_mlflow_region(request: Mapping[str, Any], region: str) -> None:
    """MlflowConfig's tracking server must be in the job's region: SageMaker's managed MLflow is regional
    and the sagemaker-mlflow plugin reaches the server at the ARN region's endpoint (docs/PLATFORM.md §1.15)."""
    arn = str((request.get("MlflowConfig") or {}).get("MlflowResourceArn", ""))
    server_region = arn.split(":")[3] if arn.count(":") >= 5 else None
    if server_region is not None and server_region != region:
        raise ConfigError("mlflow", arn, f"the tracking server is in {server_region}, the job in {region}; use a "
                          f"tracking server in {region}, or run the job there (region='{server_region}', --region)")


def check_image_pull(image_uri: str, allowed: tuple[str, ...] | None, stack: str) -> list[str]:
    """The infra stack's role must be allowed to pull the training image; ECR ARNs with IAM's * and ?.

    `allowed` None: the stack predates the record of its image permissions (a warning). An image
    outside ECR is not checked here.
    """
    match = _ECR_URI.fullmatch(image_uri)
    if match is None:
        return []
    account, region, china, repository = match.groups()
    arn = f"arn:{'aws-cn' if china else 'aws'}:ecr:{region}:{account}:repository/{repository}"
    redeploy = f"sm-dist infra deploy --stack-name {stack}"
    if allowed is None:
        return [f"infra stack {stack} does not say which images its role may pull (deployed by an older sm_dist); "
                f"if CreateTrainingJob is refused access to {image_uri}, redeploy: {redeploy}"]
    if any(fnmatch.fnmatchcase(arn, pattern) for pattern in allowed):
        return []
    raise ConfigError("image_uri", image_uri, f"the role of infra stack {stack} may pull only from {', '.join(allowed)}; "
                      f"redeploy it for this region and image table ({redeploy}), or pass image_uri= (--image-uri) an image in one of "
                      "those repositories")


def _setting(path: str) -> str:
    plain = re.sub(r"\[\d+\]", "", path)
    for prefix, name in _SETTINGS:
        if plain == prefix or plain.startswith(prefix + "."):
            return f"{name} ({path})"
    return path


def _shown(value: Any) -> Any:
    return value[:60] + "…" if isinstance(value, str) and len(value) > 60 else value


@functools.cache
def pattern_matcher(pattern: str) -> Callable[[str], bool]:
    """A full-match test for a service-model pattern (Java syntax): Python's `re`, the tag
    pattern's Unicode classes by hand."""
    if pattern in _ANY:
        return lambda text: True
    if pattern == _TAG_PATTERN:
        return tag_text_ok
    compiled = re.compile(pattern.replace("\\p{Alnum}", "a-zA-Z0-9"))
    return lambda text: compiled.fullmatch(text) is not None


def _walk(value: Any, shape: Shape, path: str) -> None:
    """Every model constraint botocore does not check, on `value` and what it holds."""
    from botocore.model import ListShape, MapShape, StructureShape

    meta = shape.metadata
    if isinstance(shape, StructureShape) and isinstance(value, Mapping):
        for name, item in value.items():
            if name in shape.members:
                _walk(item, shape.members[name], f"{path}.{name}" if path else name)
    elif isinstance(shape, (ListShape, MapShape)) and isinstance(value, (list, Mapping)):
        if "max" in meta and len(value) > meta["max"]:
            raise ConfigError(_setting(path), len(value), f"{len(value)} entries; CreateTrainingJob takes at most "
                              f"{meta['max']} ({shape.name})")
        if isinstance(shape, MapShape) and isinstance(value, Mapping):
            for key, item in value.items():
                _walk(key, shape.key, f"{path}.{key}")
                _walk(item, shape.value, f"{path}.{key}")
        elif isinstance(shape, ListShape):
            for index, item in enumerate(value):
                _walk(item, shape.member, f"{path}[{index}]")
    elif shape.type_name == "string" and isinstance(value, str):
        _string(value, shape, path)
    elif shape.type_name in ("integer", "long") and isinstance(value, int):
        top = min(meta.get("max", INT32_MAX), INT32_MAX) if shape.type_name == "integer" else meta.get("max")
        if top is not None and value > top:
            raise ConfigError(_setting(path), value, f"above {top}, the most CreateTrainingJob takes ({shape.name})")


def _string(value: str, shape: Shape, path: str) -> None:
    meta = shape.metadata
    if "max" in meta and len(value) > meta["max"]:
        raise ConfigError(_setting(path), _shown(value), f"{len(value)} characters; CreateTrainingJob takes at most "
                          f"{meta['max']} ({shape.name})")
    enum = getattr(shape, "enum", None)
    if enum and value not in enum:
        raise ConfigError(_setting(path), value, f"not a value CreateTrainingJob takes for {shape.name}")
    if "pattern" in meta and not pattern_matcher(meta["pattern"])(value):
        raise ConfigError(_setting(path), _shown(value), f"CreateTrainingJob refuses it: {shape.name} must match "
                          f"{meta['pattern']}")


__all__ = ["INT32_MAX", "KEEP_ALIVE_GUIDE_MAX_S", "TENSORBOARD_RESERVED", "check_image_pull", "check_mlflow_region",
           "check_request", "pattern_matcher", "warm_pool_rules", "check_debug_settings"]
