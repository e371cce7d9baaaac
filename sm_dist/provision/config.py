"""The local file `sm-dist infra deploy` writes, so `fit` finds role and bucket without asking.

Location: `$SM_DIST_CONFIG_HOME/infra.json`, else `~/.config/sm_dist/infra.json`. It holds the
outputs of every stack deployed from this machine and which one was deployed last (the
default). Written only by deploy/delete, atomically; never at import time.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sm_dist.errors import ConfigError

FILE_NAME = "infra.json"
_VERSION = 1


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the infra config file lives for this environment (the file may not exist)."""
    env = os.environ if environ is None else environ
    home = env.get("SM_DIST_CONFIG_HOME")
    base = Path(home).expanduser() if home else Path(env.get("HOME") or Path.home()) / ".config" / "sm_dist"
    return base / FILE_NAME


def read(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The config file's content: {"default": name|None, "stacks": {name: {...}}}; empty if absent."""
    path = config_path(environ)
    if not path.is_file():
        return {"version": _VERSION, "default": None, "stacks": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), type(exc).__name__, "unreadable infra config; delete it and run `sm-dist infra deploy` again") from None
    if not isinstance(data, dict) or not isinstance(data.get("stacks"), dict):
        raise ConfigError(str(path), "no 'stacks' mapping", "not an sm_dist infra config; delete it and redeploy")
    data.setdefault("default", None)
    return data


def _write(data: dict[str, Any], environ: Mapping[str, str] | None) -> Path:
    path = config_path(environ)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".infra-", suffix=".json", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)
    return path


def record(stack_name: str, entry: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Path:
    """Store `entry` (outputs + region) for `stack_name` and make it the default; returns the path."""
    data = read(environ)
    data["version"] = _VERSION
    data["stacks"][stack_name] = dict(entry)
    data["default"] = stack_name
    return _write(data, environ)


def record_chain(region: str, stack_name: str, environ: Mapping[str, str] | None = None) -> Path:
    """Store `stack_name` as `region`'s chain stack (the default stays as it is); returns the path."""
    data = read(environ)
    data["version"] = _VERSION
    data.setdefault("chain_stacks", {})[region] = stack_name
    return _write(data, environ)


def forget(stack_name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Drop `stack_name` from the file (after its deletion); True if it was there."""
    data = read(environ)
    chains = data.get("chain_stacks") or {}
    if stack_name in chains.values():
        data["chain_stacks"] = {region: name for region, name in chains.items() if name != stack_name}
        _write(data, environ)
        return True
    if stack_name not in data["stacks"]:
        return False
    del data["stacks"][stack_name]
    if data.get("default") == stack_name:
        data["default"] = next(iter(sorted(data["stacks"])), None)
    _write(data, environ)
    return True
