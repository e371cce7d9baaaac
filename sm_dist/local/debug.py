"""`sm-dist debug JOB --host algo-N` and `sm-dist stacks JOB` for a local job (a run on this machine).

A local job is named as local mode prints it: its job name (its folder `<temp dir>/sm-dist-local/<job>`,
`clean.default_base`) or the path of its run folder (`--local-root`). Its hosts' /opt/ml folders are
`<run>/hosts/algo-N` (a chain's: those of its newest link), kept after the run; their temporary folders,
`<run>/tmp/algo-N`, which hold PID 1's rank records, exist while the job runs.

`shell` opens the host's view: `python -m sm_dist.container.shell` in a private mount namespace with the
host's folder at /opt/ml (`mountns`), or with `SM_DIST_OPT_ML` where the machine allows none; it works on a
running job and on a kept folder. `stacks` runs `python -m sm_dist.container.stacks_now` over the hosts'
temporary folders: the ranks of a running job dump their stacks (SIGUSR1, faulthandler).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sm_dist.contract.container import OPT_ML_ENV
from sm_dist.errors import ConfigError
from sm_dist.local import mountns
from sm_dist.local.clean import default_base


def find_run(job: str) -> Path | None:
    """The run folder of local job `job` (a name or a folder), or None when there is none on this machine."""
    for base in (Path(job), default_base() / job):
        run = run_in(base)
        if run is not None:
            return run
    return None


def run_in(base: Path) -> Path | None:
    """The run folder with the hosts in a local job's folder `base` (a chain's: its newest link's), or None."""
    for run in (base / "run", base):
        if (run / "hosts").is_dir():
            return run
        links = sorted(run.glob("link-*"), key=lambda p: int(p.name.split("-")[1]) if p.name[5:].isdigit() else 0)
        if links and (links[-1] / "hosts").is_dir():
            return links[-1]
    return None


def hosts(run: Path) -> list[str]:
    """The run's hosts, algo-1 first."""
    names = [p.name for p in (run / "hosts").iterdir() if p.is_dir()]
    return sorted(names, key=lambda n: int(n.rsplit("-", 1)[1]) if n.rsplit("-", 1)[-1].isdigit() else 0)


def _host_root(run: Path, host: str) -> Path:
    known = hosts(run)
    if host not in known:
        raise ConfigError("--host", host, f"the local job has hosts {', '.join(known)}")
    return (run / "hosts" / host).resolve()


def shell_argv(run: Path, host: str, command: str | None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a shell in `host`'s view (`command`: run that instead)."""
    root = _host_root(run, host)
    argv = [sys.executable, "-m", "sm_dist.container.shell", *(["--", command] if command else [])]
    env = {k: v for k, v in os.environ.items() if k != OPT_ML_ENV}
    wrapped = mountns.command(root, argv)
    if wrapped is None:  # no namespace here: the host's folder stands in for /opt/ml, as in the run
        env[OPT_ML_ENV] = str(root)
        return argv, env
    return wrapped, env


def shell(run: Path, host: str, command: str | None) -> int:
    """Run the shell (or `command`) in `host`'s view; its exit code."""
    argv, env = shell_argv(run, host, command)
    if command is None:
        print(f"[sm_dist] a shell in {host} of {run.parent.name if run.name == 'run' else run}: /opt/ml is its folder "
              f"{_host_root(run, host)}; exit to leave", file=sys.stderr)
    return subprocess.call(argv, env=env)


def stacks(run: Path) -> int:
    """Print every running rank's stack, per host; 1 when the job is not running."""
    tmp = run / "tmp"
    named = [f"{h}={tmp / h}" for h in hosts(run) if (tmp / h).is_dir()]
    if not named:
        raise ConfigError("job", str(run), "is not running (its ranks' stacks went with them; a hang's stacks are in "
                          "its logs)")
    return subprocess.call([sys.executable, "-m", "sm_dist.container.stacks_now", *named])


__all__ = ["find_run", "hosts", "run_in", "shell", "shell_argv", "stacks"]
