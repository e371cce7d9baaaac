"""The job spec: the launch configuration that travels inside the code bundle.

The plan puts it in the code bundle (`sm_dist.planning.bundle`) as `sm_dist_job.json`, at the root
of the code channel (local mode writes its copy, `sm_dist.local.from_plan`); inside the
job PID 1 exports `SM_DIST_JOB_SPEC=<path>`, and `runtime.init()` and the checkpointer
read it for their defaults (explicit arguments win). Strategy, precision, checkpoint mode and
seed therefore never have to be squeezed into hyperparameters.

Its `checkpoint` block is the one checkpoint record, `sm_dist.contract.checkpoint.CheckpointSettings`,
built from the LaunchConfig in one place (`sm_dist.planning.code_plan`) and taken as it is by the
checkpointer; an entrypoint's flags replace its fields (`sm_dist.runtime.train_args`). One documented
rename: the checkpoint period is `checkpoint_interval_steps` on LaunchConfig (and `sm-dist fit
--checkpoint-interval-steps`), `interval_steps` inside the record (`Checkpointer(interval_steps=)`),
and `--checkpoint-interval-steps` again on the entrypoints (`--save-every` is refused, naming it).

Standard library only: PID 1 (PID 1 in the container), the runtime and the launch side
all read this one definition.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from sm_dist.contract.checkpoint import CheckpointSettings
from sm_dist.errors import ConfigError, check_int
from sm_dist.vocab import Precision, Strategy, parse_enum

#: Name of the job spec file at the root of the code bundle.
JOB_SPEC_FILENAME = "sm_dist_job.json"
#: Environment variable PID 1 sets to the absolute path of the job spec file.
JOB_SPEC_ENV = "SM_DIST_JOB_SPEC"
#: Environment variable PID 1 sets to a file path. When the run stops on SIGTERM and the
#: runtime has committed its last checkpoint, rank 0 writes that file (content: the step number);
#: PID 1 then exits with EXIT_INTERRUPTED instead of a failure code. A marker file is
#: needed because torchrun turns any worker exit into its own exit code 1.
INTERRUPT_MARKER_ENV = "SM_DIST_INTERRUPT_MARKER"
#: Exit code of PID 1 (and of a worker) when the run stopped on SIGTERM/SIGINT after
#: committing a checkpoint: resumable, not a failure. 128 + SIGTERM(15), the shell convention
#: for "terminated by SIGTERM"; a process *killed* by the signal reports -15 to Popen instead.
EXIT_INTERRUPTED = 143


def entry_is_function(entry: str) -> bool:
    """True for a "pkg.module:function" entry, False for a script path like "train.py"."""
    if ":" not in entry or "/" in entry or "\\" in entry or entry.endswith(".py"):
        return False
    module, _, func = entry.partition(":")
    return all(part.isidentifier() for part in module.split(".")) and func.isidentifier()


def _check_positive(name: str, value: object, allow_none: bool = False, minimum: int = 1) -> None:
    check_int(name, value, minimum, optional=allow_none)


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """The launch configuration of one training job, as read by PID 1 and the runtime (the hosts and
    their instance type come from SageMaker's resourceconfig.json, not from here)."""

    entry: str
    """Script path relative to the code dir ("train.py") or "pkg.module:function"."""
    strategy: Strategy = Strategy.DDP
    """Concrete strategy ("auto" is resolved before the spec is written)."""
    precision: Precision = Precision.FP32
    """Numeric precision."""
    seed: int = 0
    """Seed for model init and data order."""
    nproc_per_node: int | None = None
    """Worker processes per instance; None = one per GPU, or 1 on CPU."""
    max_restarts: int = 0
    """torchrun in-job restarts of all workers after a worker failure."""
    hang_timeout_s: int | None = None
    """Seconds without progress after which PID 1 dumps every rank's stack and restarts the
    workers (sm_dist.container.hang_watch); None: from the observed step time; 0: off."""
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings)
    """Checkpoint settings: the contract's record, as the runtime's Checkpointer takes it; its uri, when
    given, is S3."""
    job_name: str | None = None
    """SageMaker training job name (None in a plain torchrun run)."""
    hyperparameters: dict[str, str] = field(default_factory=dict)
    """User hyperparameters (strings); also passed to the script as `--key value` (an empty value:
    a bare `--key`, for store_true flags)."""
    args: tuple[str, ...] = ()
    """The script's own arguments, verbatim, before the hyperparameters' flags."""

    def __post_init__(self) -> None:
        if not isinstance(self.entry, str) or not self.entry.strip():
            raise ConfigError("entry", self.entry, 'expected "train.py" or "pkg.module:function"')
        object.__setattr__(self, "strategy", parse_enum(Strategy, self.strategy, "strategy"))
        object.__setattr__(self, "precision", parse_enum(Precision, self.precision, "precision"))
        _check_positive("seed", self.seed, minimum=0)
        _check_positive("nproc_per_node", self.nproc_per_node, allow_none=True)
        _check_positive("max_restarts", self.max_restarts, minimum=0)
        _check_positive("hang_timeout_s", self.hang_timeout_s, allow_none=True, minimum=0)
        if isinstance(self.checkpoint, Mapping):
            object.__setattr__(self, "checkpoint", _from_mapping(CheckpointSettings, self.checkpoint, "checkpoint"))
        if not isinstance(self.checkpoint, CheckpointSettings):
            raise ConfigError("checkpoint", self.checkpoint, "expected a CheckpointSettings or a mapping")
        if self.checkpoint.uri is not None and not self.checkpoint.uri.startswith("s3://"):
            raise ConfigError("checkpoint.uri", self.checkpoint.uri, "expected s3://bucket/prefix")
        if not isinstance(self.hyperparameters, Mapping):
            raise ConfigError("hyperparameters", self.hyperparameters, "expected a mapping of name -> value")
        object.__setattr__(self, "hyperparameters", {str(k): _hp_text(k, v) for k, v in self.hyperparameters.items()})
        if isinstance(self.args, str) or not all(isinstance(a, str) for a in self.args):
            raise ConfigError("args", self.args, 'expected a list of strings, e.g. ["3", "1", "--dummy"]')
        object.__setattr__(self, "args", tuple(self.args))

    def script_args(self) -> list[str]:
        """What the script gets after its path: the verbatim args, then `--key value` per
        hyperparameter (a bare `--key` for an empty value: store_true flags)."""
        out = list(self.args)
        for key, value in self.hyperparameters.items():
            out += [f"--{key}", value] if value != "" else [f"--{key}"]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (enums as their string values)."""
        data = asdict(self)
        data["strategy"] = self.strategy.value
        data["precision"] = self.precision.value
        return data

    def to_json(self) -> str:
        """The file content of sm_dist_job.json."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobSpec:
        """Build from a mapping; unknown keys are rejected."""
        return _from_mapping(cls, data, "job spec")

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        """Parse the content of sm_dist_job.json."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError("job spec", text[:80], f"not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError("job spec", data, "expected a JSON object")
        return cls.from_dict(data)

    def write(self, folder: str | os.PathLike[str]) -> Path:
        """Write sm_dist_job.json into `folder`; returns its path."""
        path = Path(folder) / JOB_SPEC_FILENAME
        path.write_text(self.to_json(), encoding="utf-8")
        return path


def _hp_text(name: object, value: object) -> str:
    """Hyperparameter values travel as strings (as in SageMaker's hyperparameters.json)."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float, list, dict)):
        return json.dumps(value)
    raise ConfigError(f"hyperparameters.{name}", value, "expected a string, number, bool, list or dict")


def _from_mapping(cls: type, data: Mapping[str, Any], what: str) -> Any:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(what, unknown[0], f"unknown key; expected some of {', '.join(sorted(known))}")
    return cls(**dict(data))


#: The job specs this process has read, by (path, mtime, size): init(), the checkpointer and the
#: entrypoint glue each ask for it, and the file is read and checked once (again only if rewritten).
_READ: dict[tuple[str, int, int], JobSpec] = {}


def load_job_spec(environ: Mapping[str, str] | None = None) -> JobSpec | None:
    """The job spec named by $SM_DIST_JOB_SPEC, or None when not running under sm_dist's PID 1;
    read once per process."""
    env = os.environ if environ is None else environ
    path = env.get(JOB_SPEC_ENV)
    if not path:
        return None
    try:
        stat = Path(path).stat()
        key = (path, stat.st_mtime_ns, stat.st_size)
        if key not in _READ:
            _READ[key] = JobSpec.from_json(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(JOB_SPEC_ENV, path, f"cannot read the job spec ({exc.strerror})") from None
    return _READ[key]


__all__ = [
    "EXIT_INTERRUPTED",
    "INTERRUPT_MARKER_ENV",
    "JOB_SPEC_ENV",
    "JOB_SPEC_FILENAME",
    "JobSpec",
    "entry_is_function",
    "load_job_spec",
]
