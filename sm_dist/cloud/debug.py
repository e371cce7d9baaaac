"""`sm-dist debug JOB [--host algo-N] [--run]` and `sm-dist stacks JOB` for a cloud job: the SSM route.

A job launched with remote_debug (RemoteDebugConfig.EnableRemoteDebug, read back from DescribeTrainingJob)
runs an SSM agent in every host's container; `aws ssm start-session --target
sagemaker-training-job:<job>_algo-<n>` opens a shell there once its SecondaryStatus is Training
(docs/PLATFORM.md §1.16). Nothing else reaches a running job's processes from outside: without remote
debug the stacks are only those the hang watch prints to the job's log on a hang.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from typing import Any

from sm_dist.contract.container import CODE_DIR
from sm_dist.contract.job import TERMINAL
from sm_dist.contract.sagemaker import ssm_command
from sm_dist.errors import ConfigError

#: What the shell in the container runs to dump its ranks' stacks, also into the host's log stream.
STACKS_IN_CONTAINER = f"PYTHONPATH={CODE_DIR} python3 -m sm_dist.container.stacks_now --log"


def debug_target(desc: Any, host: str) -> list[str]:
    """The SSM command into `host` of the described job; a ConfigError when remote debug is off or no such host."""
    name = desc["TrainingJobName"]
    if not (desc.get("RemoteDebugConfig") or {}).get("EnableRemoteDebug"):
        raise ConfigError("job", name, "was launched without remote_debug: relaunch with remote_debug=True "
                          "(--remote-debug), or while it is Downloading/Training: aws sagemaker update-training-job "
                          f"--training-job-name {name} --remote-debug-config EnableRemoteDebug=true")
    count = int((desc.get("ResourceConfig") or {}).get("InstanceCount") or 1)
    if host not in {f"algo-{i}" for i in range(1, count + 1)}:
        raise ConfigError("--host", host, f"the job has hosts algo-1 ... algo-{count}")
    region = str(desc.get("TrainingJobArn", "::::")).split(":")[3] or None
    return ssm_command(name, host, region)


def _state(desc: Any) -> str | None:
    """Why a session cannot open now (a line), or None when the job is training."""
    status, secondary = desc.get("TrainingJobStatus"), desc.get("SecondaryStatus")
    if status == "InProgress" and secondary == "Training":
        return None
    return f"the job is {status}/{secondary}: a session opens while it is InProgress/Training"


def debug(desc: Any, host: str, run: bool) -> int:
    """Print the SSM command (and the caller's needs); with `run`, start it."""
    argv = debug_target(desc, host)
    note = _state(desc)
    print(shlex.join(argv))
    if not run:
        print("needs: the AWS CLI with the Session Manager plugin, and ssm:StartSession on "
              "sagemaker-training-job:* for you" + (f"; {note}" if note else ""))
        return 0
    if note:
        raise ConfigError("job", desc["TrainingJobName"], note)
    if shutil.which("aws") is None:
        raise ConfigError("--run", True, "needs the AWS CLI (aws) and its Session Manager plugin on PATH")
    return subprocess.call(argv)


def stacks(desc: Any) -> int:
    """How to get the ranks' stacks of a running cloud job: the SSM route when remote debug is on."""
    name = desc["TrainingJobName"]
    if desc.get("TrainingJobStatus") in TERMINAL:
        raise ConfigError("job", name, f"is {desc['TrainingJobStatus']}: its ranks' stacks went with its processes; "
                          f"a hang's stacks are in its log (sm-dist logs {name})")
    if not (desc.get("RemoteDebugConfig") or {}).get("EnableRemoteDebug"):
        raise ConfigError("job", name, "runs without remote_debug, and nothing else reaches its processes: on a hang "
                          f"the hang watch prints every rank's stack to its log (sm-dist logs {name}); relaunch with "
                          "--remote-debug to dump them on request")
    count = int((desc.get("ResourceConfig") or {}).get("InstanceCount") or 1)
    print(f"in each host's shell (algo-1 ... algo-{count}), run: {STACKS_IN_CONTAINER}")
    print("  (it prints the stacks and writes them to that host's log stream too: sm-dist logs " + name + ")")
    for index in range(1, count + 1):
        print(shlex.join(debug_target(desc, f"algo-{index}")))
    return 0


__all__ = ["STACKS_IN_CONTAINER", "debug", "debug_target", "stacks"]
