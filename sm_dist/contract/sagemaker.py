"""SageMaker's rules that sm_dist's plan, its local mode and its container must all apply.

Names the API accepts and the platform's stop grace, written once (docs/PLATFORM.md §1.3, §1.5).
Standard library only.
"""

from __future__ import annotations

import re

from sm_dist.contract.container import CODE_CHANNEL
from sm_dist.errors import ConfigError

#: TrainingJobName: 1-63 letters, digits and hyphens, no leading, trailing or double hyphen (API
#: pattern `^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`).
JOB_NAME_RE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
#: A base job name leaves room for the timestamp sm_dist appends (`-YYYYmmdd-HHMMSS-mmm`, 23 chars).
BASE_JOB_NAME_RE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,39}")
#: Channel.ChannelName: `[A-Za-z0-9\.\-_]+`, at most 64 characters.
CHANNEL_NAME_RE = re.compile(r"[A-Za-z0-9.\-_]{1,64}")
#: What SageMaker does on StopTrainingJob, a spot interruption and MaxRuntime: SIGTERM, then SIGKILL
#: this many seconds later (docs/PLATFORM.md §1.3).
STOP_GRACE_SECONDS = 120


def check_job_name(value: str, field: str = "job_name") -> str:
    """`value` if the API accepts it as a TrainingJobName, else a ConfigError naming `field`."""
    if not JOB_NAME_RE.fullmatch(value):
        raise ConfigError(field, value, "use 1-63 letters, digits and hyphens (SageMaker's rule)")
    return value


def check_channel_name(name: str, field: str = "inputs") -> str:
    """`name` if the API accepts it as a data channel's name and it is not the code channel's."""
    if not CHANNEL_NAME_RE.fullmatch(name) or name == CODE_CHANNEL:
        raise ConfigError(field, name, f"channel names: 1-64 letters, digits . - _ ; '{CODE_CHANNEL}' is taken by "
                          "the code bundle")
    return name


def ssm_target(job_name: str, host: str = "algo-1") -> str:
    """The SSM target of one host of a job launched with RemoteDebugConfig (docs/PLATFORM.md §1.16)."""
    return f"sagemaker-training-job:{job_name}_{host}"


def ssm_command(job_name: str, host: str = "algo-1", region: str | None = None) -> list[str]:
    """`aws ssm start-session` into that host's training container, as AWS documents it."""
    return ["aws", "ssm", "start-session", "--target", ssm_target(job_name, host),
            *(["--region", region] if region else [])]


__all__ = ["BASE_JOB_NAME_RE", "CHANNEL_NAME_RE", "JOB_NAME_RE", "STOP_GRACE_SECONDS", "check_channel_name", "ssm_command", "ssm_target",
           "check_job_name"]
