"""Checks made before anything is uploaded or created: each a clear error or a warning.

Pure checks (no AWS call) run while the plan is made: the instance type is offered for
training and can run the sm_dist runtime, `dp` is single-instance, spot has a checkpoint URI,
hyperparameters are not secrets and can be passed to the script, the environment and the data
channels fit the API. The request as a whole is checked in `constraints`; the checks that need
AWS run in the cloud backend just before the upload (`sm_dist.cloud.remote_checks`).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from sm_dist.contract.container import NETWORK_ISOLATION_ENV
from sm_dist.errors import CatalogError, ConfigError
from sm_dist.vocab import Strategy, did_you_mean

if TYPE_CHECKING:
    from botocore.model import ServiceModel

    from sm_dist.catalog import Instance
    from sm_dist.catalog.hardware import Hardware

_log = logging.getLogger(__name__)

#: Hyperparameter names that look like credentials (they would be stored in the job description
#: and in /opt/ml/input/config/hyperparameters.json in clear text): `*_KEY`, and a name part
#: (split at _ - .) ending in "token" or containing "secret", "password", "passwd", "credential".
#: Matching parts, not substrings, lets `max_tokens` and `tokenizer` through.
SECRET_SUFFIX = re.compile(r"[_\-.]key$", re.IGNORECASE)
SECRET_PART = re.compile(r"(token$|secret|password|passwd|credential)", re.IGNORECASE)


def looks_secret(name: str) -> bool:
    """True for hyperparameter names like hf_token, wandb_api_key, db-password, client_secret."""
    return bool(SECRET_SUFFIX.search(name)) or any(SECRET_PART.search(part) for part in re.split(r"[_\-.]", name))
#: Script flags are built from the names: `--<name> <value>`.
HP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,255}")
#: API limits (botocore sagemaker model: HyperParameters ≤100 entries, values ≤2500 chars;
#: Environment ≤100 entries).
MAX_HYPERPARAMETERS = 100
MAX_HP_VALUE_CHARS = 2500
MAX_ENVIRONMENT = 100
#: Environment value length; Tags: count, key and value lengths (docs/PLATFORM.md §1.5). The
#: variable name pattern is LaunchConfig's.
MAX_ENV_VALUE_CHARS = 512
MAX_TAGS = 50
MAX_TAG_KEY_CHARS = 128
MAX_TAG_VALUE_CHARS = 256
#: Characters the API's tag pattern `[\p{L}\p{Z}\p{N}_.:/=+\-@]*` allows besides letters,
#: separators (spaces) and numbers.
TAG_PUNCTUATION = frozenset("_.:/=+-@")
#: The warning of a plan without a checkpoint URI (local mode replaces it: it syncs to its own endpoint).
NO_CHECKPOINT_URI = "no checkpoint_s3_uri: checkpoints stay on the instances and are lost when the job ends"
#: CreateTrainingJob's InputDataConfig takes at most 20 channels (botocore model; docs/PLATFORM.md §9);
#: sm_dist's code channel is one of them.
MAX_INPUT_CHANNELS = 20
#: Environment keys sm_dist sets itself.
RESERVED_ENV = re.compile(r"^(SM_DIST_.*|PYTHONPATH|TORCH_DISABLE_SHARE_RDZV_TCP_STORE)$")


@functools.lru_cache(maxsize=1)
def sagemaker_service_model() -> ServiceModel:
    """botocore's SageMaker API model (loading it takes ~0.5 s, so once per process).

    Read with botocore's data loader, not a Session: a session reads the AWS profile, and a plan
    must not need one (AWS_PROFILE naming a missing profile fails every session call).
    """
    from botocore.loaders import create_loader
    from botocore.model import ServiceModel

    return ServiceModel(create_loader().load_service_model("sagemaker", "service-2"), service_name="sagemaker")


def training_instance_types() -> tuple[str, ...]:
    """Instance types CreateTrainingJob accepts (botocore's TrainingInstanceType enum)."""
    from botocore.model import StringShape

    shape = sagemaker_service_model().shape_for("TrainingInstanceType")
    return tuple(shape.enum) if isinstance(shape, StringShape) else ()


def check_instance(instance_type: str, region: str) -> tuple[Hardware | None, Instance | None]:
    """The type's hardware and its catalog Instance (each None when the catalog has no facts or no row
    for it) — or a ConfigError. Looked up here once; the plan hands both on.

    Prices of regions the catalog lacks are taken from its own region (a warning says so).
    """
    offered = training_instance_types()
    if instance_type not in offered:
        raise CatalogError(
            "instance_type", instance_type, f"not a SageMaker training instance type{did_you_mean(instance_type, offered)}"
        )
    from sm_dist.catalog import CATALOG_REGION, get_instance, regions
    from sm_dist.catalog.hardware import hardware

    hw = hardware(instance_type)
    if hw is not None and hw.accelerator:
        raise ConfigError("instance_type", instance_type, f"{hw.accelerator} is not CUDA; the sm_dist runtime needs "
                          "NVIDIA GPUs or CPU")
    try:
        return hw, get_instance(instance_type, region if region in regions() else CATALOG_REGION)
    except CatalogError:
        return hw, None


def check_topology(strategy: Strategy, instance_count: int, nproc_per_node: int | None) -> list[str]:
    """dp is one process on one instance; hsdp on one instance is just fsdp."""
    if strategy is Strategy.DP and instance_count > 1:
        raise ConfigError("strategy", "dp", f"DataParallel runs on one instance (instance_count={instance_count}); use ddp")
    if strategy is Strategy.DP and nproc_per_node not in (None, 1):
        raise ConfigError("nproc_per_node", nproc_per_node, "dp is one process that drives every GPU; leave it unset")
    if strategy is Strategy.HSDP and instance_count == 1:
        return ["hsdp on one instance shards like fsdp (nothing to replicate across instances)"]
    return []


def check_checkpointing(spot: bool, mode: str, uri: str | None, *, instance_count: int = 1,
                        network_isolation: bool = False, vpc: bool = False,
                        own_script: bool = False) -> tuple[str, list[str]]:
    """The checkpoint mode the runtime will use ("auto" resolved) and warnings; or a ConfigError.

    "auto" is direct-to-S3 ("s3") when there is a URI, except where the container cannot be
    counted on to reach S3: with network isolation it has no network at all, and in a VPC only
    through an S3 endpoint or NAT. There SageMaker's own checkpoint sync ("sagemaker-sync")
    copies /opt/ml/checkpoints from outside the container (docs/PLATFORM.md §1.4, §1.7). So it
    does for the user's own script (`own_script`): it saves into /opt/ml/checkpoints itself, and
    only CheckpointConfig carries that folder to S3 and back.
    """
    if spot and (not uri or mode in ("off", "local")):
        raise ConfigError(
            "spot", True,
            "spot needs durable checkpoints: pass checkpoint_s3_uri='s3://bucket/prefix' "
            "(and a checkpoint_mode other than off/local)",
        )
    if mode in ("s3", "sagemaker-sync") and not uri:
        raise ConfigError("checkpoint_s3_uri", uri, f'checkpoint_mode "{mode}" needs an s3://bucket/prefix')
    if mode == "s3" and network_isolation:
        raise ConfigError("checkpoint_mode", mode, "with network_isolation=True the container cannot reach S3; use "
                          "checkpoint_mode='sagemaker-sync' (SageMaker copies /opt/ml/checkpoints to S3 from outside "
                          "the container) or 'auto'")
    if mode == "auto":
        mode = ("sagemaker-sync" if network_isolation or vpc or own_script else "s3") if uri else "local"
    if mode == "local" and instance_count > 1:
        raise ConfigError("checkpoint_mode", "local", f"on {instance_count} instances each host's shards stay on its own "
                          "disk and a restart cannot resume; pass checkpoint_s3_uri='s3://bucket/prefix' or "
                          "checkpoint_mode='off'")
    warnings = []
    if vpc and mode != "off":
        warnings.append(f"VPC job: {'SageMaker reaches' if network_isolation else 'the container and SageMaker reach'} "
                        "S3 (checkpoints, data, code) only through an S3 gateway endpoint or a NAT in these subnets")
    if not uri and mode != "off":
        warnings.append(NO_CHECKPOINT_URI)
    return mode, warnings


def isolation_environment(network_isolation: bool) -> dict[str, str]:
    """What the container is told of its network isolation (the platform tells it nothing): sm_dist's
    PID 1 then restores a restarted host's checkpoint folder from its peers, not from S3."""
    return {NETWORK_ISOLATION_ENV: "1"} if network_isolation else {}


def check_isolated_restarts(network_isolation: bool, instance_count: int, max_restarts: int, mode: str) -> list[str]:
    """What an in-job restart does under network isolation on several instances (docs/PLATFORM.md §1.7).

    The container has no S3 (nor credentials), so a restarted host cannot fetch from the checkpoint
    URI what the other hosts saved, as it does without isolation. Isolation does allow traffic
    between the job's instances: the restarted hosts get those files from each other's folders. A
    whole-job retry (RetryStrategy) is no substitute: SageMaker retries only on InternalServerError,
    never after a worker failed. Mode "local" here is a local plan's, which local mode syncs.
    """
    if not (network_isolation and instance_count > 1 and max_restarts and mode in ("sagemaker-sync", "local")):
        return []
    return [f"network isolation on {instance_count} instances: after an in-job restart (max_restarts "
            f"{max_restarts}) each host gets the checkpoint files it lacks from the other hosts over the cluster "
            "network, not from S3, which the container cannot reach"]


def check_hyperparameters(hps: Mapping[str, Any]) -> None:
    """Refuse secrets, bad flag names, values the API or a process argument cannot hold."""
    if len(hps) > MAX_HYPERPARAMETERS:
        raise ConfigError("hyperparameters", len(hps), f"SageMaker accepts at most {MAX_HYPERPARAMETERS}")
    for name, value in hps.items():
        if not HP_NAME.fullmatch(str(name)):
            raise ConfigError(f"hyperparameters.{name}", value, "names become --flags: letters, digits, _ . -")
        if looks_secret(str(name)):
            raise ConfigError(
                f"hyperparameters.{name}", "***",
                "looks like a secret; hyperparameters are stored in clear text in the job description. "
                "Read it from AWS Secrets Manager in the script, or pass a non-secret reference",
            )
        text = value if isinstance(value, str) else json.dumps(value)  # what HyperParameters will hold
        check_exec_text(f"hyperparameters.{name}", text)
        if len(text) > MAX_HP_VALUE_CHARS:
            raise ConfigError(f"hyperparameters.{name}", text[:40] + "…", f"longer than {MAX_HP_VALUE_CHARS} chars; put it in a file")


def check_texts(hps: Mapping[str, object], user_env: Mapping[str, str], reserved: int, args: Collection[str]) -> None:
    """The job's own texts, which need nothing (no AWS, no catalog): hyperparameters, environment (`reserved`:
    the variables sm_dist sets) and arguments; once per plan, before any lookup (the channel count is the
    LaunchConfig's own check)."""
    check_hyperparameters(hps)
    check_environment(user_env, reserved)
    for arg in args:
        check_exec_text("args", arg)


def check_exec_text(field: str, text: str) -> None:
    """What sm_dist's PID 1 passes to the script as an argument or a variable is handed to
    execve, which takes NUL-terminated strings: a NUL character cannot get through (docs/PLATFORM.md
    §9). Quotes and other shell characters can: no shell reads them."""
    if "\0" in text:
        raise ConfigError(field, text.replace("\0", "\\0")[:60], "contains a NUL character, which no process "
                          "argument or environment variable can hold; remove it")


def check_channel_count(channels: Collection[str]) -> None:
    """At most MAX_INPUT_CHANNELS - 1 data channels: the code channel is the API's 20th."""
    if len(channels) > MAX_INPUT_CHANNELS - 1:
        raise ConfigError("inputs", len(channels), f"{len(channels)} data channels; SageMaker takes {MAX_INPUT_CHANNELS} "
                          f"and sm_dist's code channel is one: pass at most {MAX_INPUT_CHANNELS - 1}, e.g. several "
                          "datasets under one S3 prefix as one channel")


def check_environment(user_env: Mapping[str, str], ours: int) -> None:
    """sm_dist's own variables are not the user's to set; values ≤512 chars; the API takes ≤100 in total."""
    for key, value in user_env.items():
        if RESERVED_ENV.match(key):
            raise ConfigError(f"environment.{key}", value, "set by sm_dist itself; remove it")
        if len(str(value)) > MAX_ENV_VALUE_CHARS:
            raise ConfigError(f"environment.{key}", str(value)[:40] + "…", f"longer than {MAX_ENV_VALUE_CHARS} chars "
                              "(SageMaker's limit); put it in a file in the source dir or in S3")
        check_exec_text(f"environment.{key}", str(value))
    if len(user_env) + ours > MAX_ENVIRONMENT:
        raise ConfigError("environment", len(user_env), f"at most {MAX_ENVIRONMENT - ours} variables (SageMaker's limit)")


def tag_text_ok(text: str) -> bool:
    """Whether `text` matches the API's tag pattern (letters, numbers, spaces and _ . : / = + - @)."""
    import unicodedata

    return all(c in TAG_PUNCTUATION or unicodedata.category(c)[0] in "LZN" for c in text)


def check_tags(user_tags: Mapping[str, str], ours: int) -> None:
    """The API's tag limits: ≤50 tags in all, key 1–128 chars, value ≤256, both of the tag pattern."""
    if len(user_tags) + ours > MAX_TAGS:
        raise ConfigError("tags", len(user_tags), f"at most {MAX_TAGS - ours} tags (SageMaker takes {MAX_TAGS}, "
                          f"sm_dist sets {ours})")
    for key, value in user_tags.items():
        if not key or len(key) > MAX_TAG_KEY_CHARS or not tag_text_ok(key):
            raise ConfigError("tags", key, f"a tag key is 1–{MAX_TAG_KEY_CHARS} letters, numbers, spaces or _ . : / = + - @")
        if len(value) > MAX_TAG_VALUE_CHARS or not tag_text_ok(value):
            raise ConfigError(f"tags.{key}", value, f"a tag value is ≤ {MAX_TAG_VALUE_CHARS} letters, numbers, spaces "
                              "or _ . : / = + - @")


__all__ = [
    "MAX_INPUT_CHANNELS", "check_instance", "check_topology", "check_checkpointing", "check_hyperparameters",
    "check_isolated_restarts", "isolation_environment", "check_environment", "check_channel_count", "check_exec_text", "check_texts", "check_tags", "tag_text_ok", "training_instance_types",
]
