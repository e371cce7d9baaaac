"""`attach(name)`: the handle of an existing job, whichever backend ran it — what every job command starts from.

`sm-dist status | logs | stop | cost | checkpoints | debug | stacks | release | tensorboard NAME` and
`sm_dist.attach(NAME)` ask each backend of `BACKENDS` in turn whether it knows a job (or a chained run) of that
name; the first that does returns its handle (`sm_dist.contract.job.JobHandle`). A backend that does not says
where it looked, and a name found nowhere is one line naming every place: "no job NAME here (...) or in REGION".

A backend joins with one entry: its name -> "module:function", imported only when asked (the import worlds hold:
this facade may import every backend, no backend another). The function takes (name, region) and returns the
handle, or the phrase saying where it looked ("in us-east-1"). Local mode is asked first and never needs a
region; the cloud is asked last: it alone needs AWS (and a region).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TypeAlias, cast

from sm_dist.contract.job import JobHandle
from sm_dist.errors import ConfigError

#: (name, region) -> the job's handle, or where the backend looked for it.
Finder: TypeAlias = Callable[[str, "str | None"], "JobHandle | str"]

#: Each backend's finder, in the order asked. The cloud's stays last.
BACKENDS: dict[str, str] = {
    "local": "sm_dist.local.kept_job:find",
    "slurm": "sm_dist.slurm.job:find",
    "cloud": "sm_dist.cloud.run:find",
}


def finder(target: str) -> Finder:
    """The function `module:function` names, its module imported now."""
    module, _, function = target.partition(":")
    return cast(Finder, getattr(importlib.import_module(module), function))


def attach(name: str, *, region: str | None = None) -> JobHandle:
    """The handle of the job (or chained run) `name`: a local job on this machine, else a SageMaker job in
    `region` (None: your AWS configuration's), else another backend's; a ConfigError naming where it looked."""
    looked = []
    for target in BACKENDS.values():
        found = finder(target)(name, region)
        if not isinstance(found, str):
            return found
        looked.append(found)
    raise ConfigError("job", name, f"no job of that name {' or '.join(looked)}: check the name"
                      + ("" if region else " (and --region)"))


__all__ = ["BACKENDS", "Finder", "attach", "finder"]
