"""A shell in an emulated host, as the job sees it: `python3 -m sm_dist.container.shell [-- COMMAND]` (stdlib).

`sm-dist debug JOB --host algo-2` in local mode runs this in the host's view: inside a private mount
namespace with the host's folder at /opt/ml (`sm_dist.local.mountns`), or with `SM_DIST_OPT_ML` naming
that folder where the machine allows no namespace. It adds the variables a script on that host gets
(`SM_CURRENT_HOST`, `SM_HOSTS`, `SM_CHANNEL_*`, ...: `script_env.script_environment`, from the host's
/opt/ml/input/config; on a warm pool, SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY), puts the code channel on
PYTHONPATH, changes to the code folder, and runs COMMAND with `bash -c`, or an interactive bash without one (`--norc`: the prompt names the host). In the cloud the SSM session is the shell.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from sm_dist.container.pid1_env import count_gpus
from sm_dist.container.script_env import Host, cpu_count, script_environment
from sm_dist.contract.container import (
    CODE_DIR,
    RESOURCE_CONFIG,
    WARMPOOL_CACHE_DIR,
    WARMPOOL_CACHE_ENV,
    host_order,
    opt_ml_root,
    remap,
)


def host_environment(root: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` with the SageMaker variables of the host whose /opt/ml is `root`, and the code on PYTHONPATH."""
    resource = json.loads((root / "input" / "config" / RESOURCE_CONFIG).read_text(encoding="utf-8"))
    host = Host(hosts=host_order(resource["hosts"]), current_host=str(resource["current_host"]),
                instance_type=resource.get("current_instance_type"), interface=resource.get("network_interface_name"),
                num_gpus=count_gpus(), num_cpus=cpu_count())
    code = remap(CODE_DIR, str(root))
    out = {**env, **script_environment(root, env, host)}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (code, env.get("PYTHONPATH", "")) if p)
    out["PS1"] = f"({host.current_host}) \\w\\$ "
    cache = remap(WARMPOOL_CACHE_DIR, str(root))
    if Path(cache).is_dir():  # on a warm pool the platform names its cache (docs/PLATFORM.md §1.13.1)
        out[WARMPOOL_CACHE_ENV] = cache
    return out


def main(argv: list[str]) -> int:
    root = Path(opt_ml_root(os.environ))
    try:
        env = host_environment(root, dict(os.environ))
    except (OSError, ValueError, KeyError) as exc:
        print(f"[sm_dist debug] no host at {root}: {exc}", file=sys.stderr)
        return 2
    code = Path(remap(CODE_DIR, str(root)))
    os.chdir(code if code.is_dir() else root)
    shell = shutil.which("bash") or "/bin/sh"
    command = argv[1:] if argv[:1] == ["--"] else argv
    args = [shell, "-c", " ".join(command)] if command else [shell, "--norc", "-i"]
    os.execve(shell, args, env)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
