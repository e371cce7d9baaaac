"""What the user asks for when launching: one frozen, validated value (`LaunchConfig`).

`sm_dist.plan(...)`, `sm_dist.fit(...)` and `sm-dist fit` all build a LaunchConfig first, so a
bad argument fails here — before anything is read from AWS, uploaded or created. The field checks
below each refuse in one line naming the field, the value and the fix, and may normalise a field they
accepted (a list to a tuple, a channel's source to a `Channel`); checks that need the catalog, the
estimator or the source dir live in `preflight`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, get_args

from sm_dist.contract.checkpoint import CheckpointMode, check_interval, check_keep, parse_mode
from sm_dist.contract.sagemaker import BASE_JOB_NAME_RE, check_job_name
from sm_dist.errors import ConfigError, check_int
from sm_dist.estimator.cli import parse_number
from sm_dist.jobspec import entry_is_function
from sm_dist.planning.channels import Channel, SourceKind, channels_from
from sm_dist.planning.mlflow_setting import MlflowTarget, parse_mlflow
from sm_dist.vocab import Precision, Strategy, parse_enum

#: The PyTorch training image used unless image_uri= is given: AWS's SageMaker PyTorch training
#: image for this torch version and region, from sm_dist's image table (sm_dist/catalog/images.json,
#: docs/PLATFORM.md §6); None = the table's default, the newest torch the runtime is tested on.
DEFAULT_TORCH_VERSION: str | None = None
#: None = the image's own python; a different one is refused (AWS builds one python per image).
DEFAULT_PY_VERSION: str | None = None
#: torchrun in-job restarts: docs/PLATFORM.md §2.3 saw c10d + TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
#: recover 14/14 times with one restart; 2 leaves room for a second failure.
DEFAULT_MAX_RESTARTS = 2
#: ModelTrainer's default volume (train/defaults.py DEFAULT_VOLUME_SIZE).
DEFAULT_VOLUME_GB = 30
#: output_compression's values: OutputDataConfig.CompressionType GZIP or NONE, or the plan's choice.
OutputCompression: TypeAlias = Literal["auto", "gzip", "none"]
OUTPUT_COMPRESSIONS: tuple[str, ...] = get_args(OutputCompression)
#: environment names and tag keys that LaunchConfig accepts.
_ENV_KEY_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_TAG_KEY_RE = re.compile(r"[\w\s.:/=+\-@]{1,128}")
#: ResourceConfig.KeepAlivePeriodInSeconds's range in the service model (docs/PLATFORM.md §1.13).
KEEP_ALIVE_MAX_S = 21_600
#: ResourceConfig.TrainingPlanArn as the service model writes it, with a plan name (docs/PLATFORM.md §1.10).
_TRAINING_PLAN_ARN_RE = re.compile(r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:[0-9]{12}:training-plan/[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}")


#: Settings written as counts people write them (7B, 2e12): read by the estimate-cost CLI's parser, so a
#: config file or `sm-dist fit` takes what `sm-dist estimate-cost` took.
COUNT_FIELDS = ("params", "tokens")


@dataclass(frozen=True, kw_only=True)
class LaunchConfig:
    """Everything `fit` needs; field names are the keyword arguments of `sm_dist.fit`."""

    entry: str
    """Script relative to source_dir ("train.py"), "pkg.module:function", or a bundled
    sm_dist entrypoint by file name ("cnn.py", "gpt.py", "resnet.py")."""
    instance_type: str
    """SageMaker training instance type, e.g. "ml.p4d.24xlarge"."""
    source_dir: str = "."
    """Folder uploaded as the job's code (minus ignored files)."""
    instance_count: int = 1
    """Instances of instance_type (ResourceConfig.InstanceCount); local mode emulates each as a host."""
    strategy: Strategy | Literal["auto"] = Strategy.DDP
    """dp, ddp, zero1, zero2, fsdp, hsdp, or "auto" (the estimator's cheapest that fits)."""
    precision: Precision = Precision.FP32
    """fp32, amp (autocast), mixed (bf16 working copy, fp32 master weights and Adam) or bf16: what the runtime
    trains in and the estimator counts (docs/ARCHITECTURE.md, memory accounting)."""
    params: float | None = None
    """Model size in parameters (for the memory check, "auto" and the estimate); a config file or a flag may
    write it as estimate-cost does: 7e9, 7B, 1.5T, 350M."""
    model: str | None = None
    """Or an estimator model preset ("llama-7b", "gpt2-xl", ...)."""
    hf_config: str | None = None
    """Or a Hugging Face config.json."""
    tokens: float | None = None
    """Training tokens: with the model size, gives the expected duration and cost (2e12, 2T, 300B in a file or
    a flag)."""
    seq_len: int | None = None
    """Sequence length for the memory estimate (default: the model's)."""
    micro_batch: int = 1
    """Sequences per GPU per step, for the memory estimate."""
    seed: int = 0
    """The runtime's seed for every rank's random number generators (initialisation, data order, dropout)."""
    nproc_per_node: int | None = None
    """Processes per instance; None = one per GPU."""
    max_restarts: int = DEFAULT_MAX_RESTARTS
    """torchrun restarts of all workers after a worker failure (resume from the checkpoint)."""
    hang_timeout_s: int | None = None
    """Seconds without progress (step lines, progress bars, the ranks' collectives) after which
    PID 1 dumps every rank's stack, names the rank that stopped and restarts the workers; a hang at
    the same place again fails the job. None: 10 x the observed step time, 300 s to 1800 s; 0: off."""
    checkpoint_s3_uri: str | None = None
    """s3://bucket/prefix for checkpoints; required with spot."""
    checkpoint_mode: CheckpointMode = CheckpointMode.AUTO
    """Where checkpoints go: auto (sagemaker-sync with a checkpoint URI, else s3 or local), local, s3,
    sagemaker-sync (a folder SageMaker syncs with checkpoint_s3_uri) or off."""
    checkpoint_interval_steps: int | None = None
    """Steps between checkpoints (None: the estimate's Young/Daly interval when it knows the step time, else
    the runtime's default)."""
    checkpoint_keep: int | None = None
    """Committed checkpoints kept, newest first (at least 2; None: 2)."""
    async_checkpoint: bool = False
    """Write checkpoints in the background while training goes on (torch.distributed.checkpoint's async save)."""
    spot: bool = False
    """Managed spot training (needs checkpoint_s3_uri)."""
    max_cost_usd: float | None = None
    """Budget: converted to MaxRuntime (and MaxWait for spot) from the hourly price."""
    max_runtime_s: int | None = None
    """StoppingCondition.MaxRuntimeInSeconds (None: from max_cost_usd, else the API's default of 1 day)."""
    max_wait_s: int | None = None
    """Spot only: capacity wait + run time; >= max runtime."""
    retry_attempts: int | None = None
    """RetryStrategy.MaximumRetryAttempts (SageMaker retries on InternalServerError only)."""
    chain: bool = False
    """A run of chained jobs `<job>-1`, `<job>-2`, ... sharing the checkpoint URI: a job that ends by
    MaxRuntime, MaxWait, a capacity error or an InternalServerError is followed by the next, which
    resumes from the newest committed checkpoint; max_cost_usd is the whole run's (docs/guides/chains.md)."""
    max_links: int | None = None
    """With chain: the most jobs that run (default 10; a job refused capacity does not count)."""
    on_demand_after: int | None = None
    """With chain and spot: after this many spot interruptions (or a MaxWait) the next jobs run on demand."""
    fallback_instance_types: tuple[str, ...] = ()
    """With chain: other instance types the run may use when instance_type has no capacity (at most 4,
    each checked for memory like instance_type): on demand, the job asks for them in order
    (ResourceConfig.InstancePreferences); on spot, the next job after a capacity error uses the next."""
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    """Reach the script as `--key value`; an empty value gives a bare `--key` (a store_true flag)."""
    args: tuple[str, ...] = ()
    """The script's own arguments, verbatim (`sm-dist fit train.py -- 3 1 --dummy`), before the
    hyperparameters' flags."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Environment variables of the script (and of PID 1) in every host."""
    inputs: Mapping[str, Channel] = field(default_factory=dict)
    """Data channels: name -> `Channel` (or its source: s3://bucket/prefix, a local folder uploaded for
    the job, fsx-lustre://..., efs://...), at /opt/ml/input/data/<name> in the container."""
    metrics: tuple[str, ...] = ("loss",)
    """Metric names scraped from the `[sm_dist] step=…` lines into CloudWatch."""
    role: str | None = None
    """Execution role ARN; else infra_stack's, else the SDK's resolution."""
    infra_stack: str | None = None
    """Name of a stack from `sm-dist infra deploy` ("" = the one recorded last)."""
    output_s3_uri: str | None = None
    """Where the code bundle and the job's output go; default from infra or the SDK bucket."""
    region: str | None = None
    """AWS region of the job (None: your AWS configuration's)."""
    image_uri: str | None = None
    """A training image of your own (None: AWS's PyTorch training image for torch_version in the region)."""
    torch_version: str | None = DEFAULT_TORCH_VERSION
    """Torch of the AWS training image ("2.13"); None: the newest the runtime is tested on."""
    py_version: str | None = DEFAULT_PY_VERSION
    """Python of that image ("py312"); None: the image's own."""
    job_name: str | None = None
    """TrainingJobName (None: base_job_name and the time, e.g. sm-dist-20261129-101500-123)."""
    base_job_name: str = "sm-dist"
    """The start of a generated job name (1-40 letters, digits and hyphens)."""
    volume_size_gb: int = DEFAULT_VOLUME_GB
    """ResourceConfig.VolumeSizeInGB: each instance's storage volume."""
    volume_kms_key: str | None = None
    """ResourceConfig.VolumeKmsKeyId: the KMS key that encrypts the instances' volumes."""
    output_kms_key: str | None = None
    """OutputDataConfig.KmsKeyId: the KMS key that encrypts the job's output in S3."""
    output_compression: OutputCompression = "auto"
    """OutputDataConfig.CompressionType: "gzip" (model.tar.gz), "none" (the model/ files as they are) or
    "auto": none when the estimate's weights reach 1 GiB (gzip saves little on them, and its time is
    billed), else gzip (docs/PLATFORM.md §1.1)."""
    subnets: tuple[str, ...] = ()
    """VpcConfig.Subnets: run the job in your VPC (with security_group_ids)."""
    security_group_ids: tuple[str, ...] = ()
    """VpcConfig.SecurityGroupIds (with subnets)."""
    network_isolation: bool = False
    """EnableNetworkIsolation: the containers reach no network (SageMaker still syncs checkpoints and output)."""
    training_plan_arn: str | None = None
    """A SageMaker training plan (reserved capacity) the job runs on: ResourceConfig.TrainingPlanArn;
    checked with DescribeTrainingPlan before upload, instead of the account's quota."""
    encrypt_inter_container_traffic: bool = False
    """EnableInterContainerTrafficEncryption: encrypt the traffic between the instances (it costs time)."""
    keep_alive_s: int | None = None
    """Keep the instances in a SageMaker warm pool this many seconds after the job ends (0 to 21600;
    ResourceConfig.KeepAlivePeriodInSeconds): a next job with the same role, instances, volume, VPC and
    encryption starts on them; the retained time is billed; not with spot (docs/guides/live.md)."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Tags of the training job, besides sm_dist's own (sm-dist:*)."""
    ignore_patterns: tuple[str, ...] = ()
    """Extra patterns (gitignore-style subset) left out of the bundle, besides .smdistignore."""
    tensorboard: bool = False
    """TensorBoardOutputConfig: the job's TensorBoard folder (SM_TENSORBOARD_DIR, TENSORBOARD_LOGGING_DIR; sm_dist's
    own metric lines are written there too) is synced to <output>/<job>/tensorboard while it runs
    (docs/guides/live.md)."""
    remote_debug: bool = False
    """RemoteDebugConfig.EnableRemoteDebug: SageMaker starts an SSM agent in each host's container, and
    `sm-dist debug JOB` opens a shell there (aws ssm start-session); not with network_isolation
    (docs/PLATFORM.md §1.16)."""
    infra_check: bool | None = None
    """InfraCheckConfig.EnableInfraCheck: SageMaker checks the instances' hardware and the cluster network
    before the script starts. None: on for 4 or more GPU instances of a family that offers it; its
    time is added to the estimate's start-up (docs/PLATFORM.md §1.16)."""
    mlflow: MlflowTarget | None = None
    """SageMaker managed MLflow: the tracking server's ARN, or {"arn":, "experiment":, "run":}
    (`MlflowSettings`); sets MlflowConfig and the script's MLFLOW_* variables, and the runtime logs its
    metric lines there (local mode: a file store under the run's folder; docs/guides/live.md)."""

    def __post_init__(self) -> None:
        check_text("entry", self.entry)
        check_text("instance_type", self.instance_type)
        if not Path(self.source_dir).is_dir():
            raise ConfigError("source_dir", self.source_dir, "expected an existing folder")
        if str(self.strategy).lower() != "auto":
            object.__setattr__(self, "strategy", parse_enum(Strategy, self.strategy, "strategy"))
        else:
            object.__setattr__(self, "strategy", "auto")
        object.__setattr__(self, "precision", parse_enum(Precision, self.precision, "precision"))
        for name in COUNT_FIELDS:  # text from a config file (YAML reads 2e12 as text) or a flag, read once
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, parse_number(name, getattr(self, name)))
        check_numbers(self)
        check_chain(self)
        check_s3(self)
        check_mappings(self)
        object.__setattr__(self, "checkpoint_mode", parse_mode(self.checkpoint_mode, "checkpoint_mode"))
        if sum(x is not None for x in (self.params, self.model, self.hf_config)) > 1:
            raise ConfigError("params", self.params, "give only one of params=, model=, hf_config=")
        if str(self.output_compression).lower() not in OUTPUT_COMPRESSIONS:
            raise ConfigError("output_compression", self.output_compression, "expected gzip, none or auto")
        object.__setattr__(self, "output_compression", str(self.output_compression).lower())
        object.__setattr__(self, "mlflow", parse_mlflow(self.mlflow))
        if self.job_name is not None:
            check_job_name(self.job_name)
        if not BASE_JOB_NAME_RE.fullmatch(self.base_job_name):
            raise ConfigError("base_job_name", self.base_job_name, "use 1-40 letters, digits and hyphens")
        for name in ("remote_debug", "infra_check", "tensorboard"):
            value = getattr(self, name)
            if not isinstance(value, bool) and not (name == "infra_check" and value is None):
                raise ConfigError(name, value, "expected True or False" + (" (or leave it unset)" if name == "infra_check" else ""))
        check_training_plan_arn(self.training_plan_arn)

    @property
    def entry_is_function(self) -> bool:
        """The entry is "pkg.module:function", not a script."""
        return entry_is_function(self.entry)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> LaunchConfig:
        """Build from a dict (a config file, CLI flags); unknown keys are rejected."""
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                from sm_dist.vocab import did_you_mean

                raise ConfigError(key, data[key], f"unknown setting{did_you_mean(key, sorted(known))}")
        return cls(**dict(data))


def check_text(name: str, value: object) -> None:
    """A non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(name, value, "expected a non-empty string")


def check_whole(name: str, value: object, low: int, high: int | None = None) -> None:
    """A whole number in low..high (no upper bound: high=None); a bool is refused."""
    check_int(name, value, low, f"expected a whole number {f'>= {low}' if high is None else f'in {low}..{high}'}", maximum=high)


def check_training_plan_arn(value: object) -> None:
    """ResourceConfig.TrainingPlanArn: the service model's pattern, with a plan name."""
    if value is not None and not _TRAINING_PLAN_ARN_RE.fullmatch(str(value)):
        raise ConfigError("training_plan_arn", value, "expected the plan's ARN, "
                          "arn:aws:sagemaker:<region>:<account>:training-plan/<name> (aws sagemaker list-training-plans)")


def check_numbers(config: LaunchConfig) -> None:
    """The whole numbers and amounts: counts, seeds, limits, checkpoint period and keep."""
    check_whole("instance_count", config.instance_count, 1)
    check_whole("seed", config.seed, 0)
    check_whole("max_restarts", config.max_restarts, 0)
    if config.hang_timeout_s is not None:
        check_whole("hang_timeout_s", config.hang_timeout_s, 0)
    check_whole("volume_size_gb", config.volume_size_gb, 1)
    check_whole("micro_batch", config.micro_batch, 1)
    if config.seq_len is not None:
        check_whole("seq_len", config.seq_len, 1)
    if config.tokens is not None and not (isinstance(config.tokens, (int, float)) and config.tokens > 0):
        raise ConfigError("tokens", config.tokens, "expected a positive number of training tokens, e.g. 2e12")
    check_keep(config.checkpoint_keep, "checkpoint_keep")  # the contract's rule, as in the spec and runtime
    check_interval(config.checkpoint_interval_steps, "checkpoint_interval_steps")
    for name in ("nproc_per_node", "max_runtime_s", "max_wait_s"):
        if getattr(config, name) is not None:
            check_whole(name, getattr(config, name), 1)
    if config.keep_alive_s is not None:
        check_whole("keep_alive_s", config.keep_alive_s, 0, KEEP_ALIVE_MAX_S)
    if config.retry_attempts is not None:
        check_whole("retry_attempts", config.retry_attempts, 1, 30)
    if config.max_cost_usd is not None and not (isinstance(config.max_cost_usd, (int, float)) and config.max_cost_usd > 0):
        raise ConfigError("max_cost_usd", config.max_cost_usd, "expected a positive number of dollars")
    if config.params is not None and not (isinstance(config.params, (int, float)) and config.params > 0):
        raise ConfigError("params", config.params, "expected a positive parameter count, e.g. 7e9")


def check_chain(config: LaunchConfig) -> None:
    """The settings of a chain of jobs (chain=True): links, on-demand switch, fallback types."""
    for name in ("max_links", "on_demand_after"):
        value = getattr(config, name)
        if value is not None:
            check_whole(name, value, 1, 99 if name == "max_links" else None)
            if not config.chain:
                raise ConfigError(name, value, "applies to a chain of jobs: add chain=True (--chain)")
    if config.on_demand_after is not None and not config.spot:
        raise ConfigError("on_demand_after", config.on_demand_after, "counts spot interruptions: add spot=True (--spot)")
    _check_fallbacks(config)
    if config.chain and str(config.checkpoint_mode).lower() == CheckpointMode.OFF:
        raise ConfigError("checkpoint_mode", "off", "each job of a chain resumes from the checkpoints: "
                          "use another mode")


def _check_fallbacks(config: LaunchConfig) -> None:
    kinds: Any = config.fallback_instance_types  # what the caller gave: a list, a tuple, or a wrong type
    if isinstance(kinds, str) or not all(isinstance(k, str) and k.strip() for k in kinds):
        raise ConfigError("fallback_instance_types", kinds, "expected a list of instance types, e.g. "
                          "['ml.p4de.24xlarge'] (--fallback-instance-type, repeatable)")
    object.__setattr__(config, "fallback_instance_types", kinds := tuple(kinds))
    if kinds and not config.chain:
        raise ConfigError("fallback_instance_types", list(kinds), "applies to a chain of jobs: add chain=True "
                          "(--chain)")
    if len(kinds) > 4 or len(set(kinds)) != len(kinds) or config.instance_type in kinds:
        raise ConfigError("fallback_instance_types", list(kinds), "give at most 4 types, each once, other than "
                          "instance_type (InstancePreferences holds 5 in all)")


def check_s3(config: LaunchConfig) -> None:
    """The S3 URIs, and the data channels (a file system needs the job's VPC)."""
    for name in ("checkpoint_s3_uri", "output_s3_uri"):
        value = getattr(config, name)
        if value is not None and not re.fullmatch(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?", str(value)):
            raise ConfigError(name, value, "expected s3://bucket/prefix")
    object.__setattr__(config, "inputs", MappingProxyType(channels_from(config.inputs)))
    for name, channel in config.inputs.items():
        if channel.kind in (SourceKind.FSX_LUSTRE, SourceKind.EFS) and not config.subnets:
            raise ConfigError(f"inputs.{name}", channel.source, "a file system is reached through the job's VPC: "
                              "pass subnets= and security_group_ids= (--subnet, --security-group-id)")


def check_mappings(config: LaunchConfig) -> None:
    """environment and tags (keys and values), the lists of strings, the VPC pair."""
    for key, value in config.environment.items():
        if not _ENV_KEY_RE.fullmatch(str(key)) or not isinstance(value, str):
            raise ConfigError(f"environment.{key}", value, "names: letters, digits, _; values: strings")
    for key, value in config.tags.items():
        if not _TAG_KEY_RE.fullmatch(str(key)) or not isinstance(value, str):
            raise ConfigError(f"tags.{key}", value, "tag keys ≤128 chars, values strings")
    for name in ("metrics", "subnets", "security_group_ids", "ignore_patterns", "args"):
        value = getattr(config, name)
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise ConfigError(name, value, "expected a list of strings")
        object.__setattr__(config, name, tuple(value))
    if bool(config.subnets) != bool(config.security_group_ids):
        raise ConfigError("subnets", config.subnets, "a VPC needs both subnets and security_group_ids")


def field_docs() -> dict[str, str]:
    """Each LaunchConfig field's docstring, whitespace folded: `sm-dist fit --help` and the CLI reference page
    show them, so a setting is documented once, here (read from this file's source: no import-time cost)."""
    import ast

    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == LaunchConfig.__name__).body
    docs = {}
    for node, after in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML (.yaml/.yml) or TOML (.toml) file of `fit` settings into a dict."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("config", str(path), f"cannot read it ({exc.strerror})") from None
    if path.suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise ConfigError("config", str(path), "TOML needs Python 3.11+; use a .yaml file") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("config", str(path), f"not valid TOML ({exc})") from None
    elif path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError("config", str(path), f"not valid YAML ({exc})") from None
    else:
        raise ConfigError("config", str(path), "use a .yaml, .yml or .toml file")
    if not isinstance(data, dict):
        raise ConfigError("config", str(path), "expected a mapping of setting -> value at the top level")
    for key in ("source_dir", "hf_config"):  # relative paths are relative to the file, not the shell
        if isinstance(data.get(key), str) and not Path(data[key]).is_absolute():
            data[key] = str(path.parent / data[key])
    return data


__all__ = ["LaunchConfig", "field_docs", "load_config_file", "DEFAULT_TORCH_VERSION", "DEFAULT_PY_VERSION"]
