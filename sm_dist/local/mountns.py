"""Each emulated host sees its own folder at /opt/ml, as a SageMaker container does.

A script written for SageMaker hard-codes `/opt/ml/checkpoints` and `/opt/ml/model`
(`TrainingArguments(output_dir="/opt/ml/checkpoints")`). On this machine that path is shared
by every emulated host and is not the host's synced folder. Where the OS allows it, each host's
first process runs in a private mount namespace (`unshare --mount`, util-linux) in which the
host's root is bind-mounted at /opt/ml; everything the host starts inherits that view, and
the machine's own /opt/ml is never touched.

When /opt/ml does not exist here, a mount point cannot be made without creating it on the
machine, so inside the namespace /opt becomes a tmpfs with every original entry of /opt
bind-mounted back and an empty `ml` added. Without /opt, or where `unshare` is refused (no
root and no user namespaces), local mode falls back to `$SM_DIST_OPT_ML` and the `SM_*`
directory variables alone and says so.

Run as ``python -m sm_dist.local.mountns ROOT -- ARGV...`` inside the namespace (the agent
wraps the command with `unshare`): it mounts, then execs ARGV (same pid: signals still reach it).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sm_dist.contract.container import OPT_ML

_MS_BIND = 4096
_MS_REC = 16384
_MNT_DETACH = 2


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount(source: str, target: str, fstype: str | None, flags: int) -> None:
    libc = _libc()
    if libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _bind(source: str, target: str) -> None:
    _mount(source, target, None, _MS_BIND | _MS_REC)


def setup(root: Path, opt_ml: str = OPT_ML) -> None:
    """Inside a private mount namespace: make `opt_ml` show `root`."""
    target = Path(opt_ml)
    if not target.is_dir():
        _mount_point_in_tmpfs(target)
    _bind(str(root), str(target))


def _mount_point_in_tmpfs(target: Path) -> None:
    """Create `target` (/opt/ml) by covering its parent with a tmpfs that carries the parent's entries."""
    parent = target.parent
    if not parent.is_dir():
        raise OSError(f"{parent} does not exist: no mount point for {target} without creating it on this machine")
    saved = tempfile.mkdtemp(prefix="sm-dist-mountns-")
    _bind(str(parent), saved)
    _mount("tmpfs", str(parent), "tmpfs", 0)
    for entry in sorted(os.listdir(saved)):
        src, dst = os.path.join(saved, entry), parent / entry
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
            continue
        if os.path.isdir(src):
            dst.mkdir()
        else:
            dst.touch()
        _bind(src, str(dst))
    target.mkdir()
    _libc().umount2(saved.encode(), _MNT_DETACH)  # the entries stay bound; the empty folder goes
    os.rmdir(saved)


def command(root: Path, argv: Sequence[str]) -> list[str] | None:
    """`argv` wrapped to run with `root` at /opt/ml, or None where this machine does not allow it."""
    prefix = unshare_prefix()
    if prefix is None:
        return None
    return [*prefix, sys.executable, "-m", "sm_dist.local.mountns", str(root), "--", *argv]


@functools.lru_cache(maxsize=1)
def unshare_prefix() -> tuple[str, ...] | None:
    """`unshare --mount ...` when a probe run can show a folder at /opt/ml; else None (cached)."""
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        return None
    prefix: tuple[str, ...] = (exe, "--mount", "--propagation", "private")
    if os.geteuid() != 0:
        prefix += ("--map-root-user",)
    with tempfile.TemporaryDirectory(prefix="sm-dist-mountns-probe-") as probe:
        (Path(probe) / "probe").write_text("ok")
        check = [*prefix, sys.executable, "-m", "sm_dist.local.mountns", probe, "--",
                 sys.executable, "-c", f"import sys; sys.exit(open('{OPT_ML}/probe').read() != 'ok')"]
        try:
            ok = subprocess.run(check, capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
    return prefix if ok else None


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m sm_dist.local.mountns ROOT -- ARGV...", file=sys.stderr)
        raise SystemExit(2)
    try:
        setup(Path(argv[0]))
    except OSError as exc:
        print(f"[sm_dist local] cannot show {argv[0]} at {OPT_ML}: {exc}", file=sys.stderr)
        raise SystemExit(70) from None
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        print(f"[sm_dist local] cannot start {argv[2]!r}: {exc.strerror}", file=sys.stderr)
        raise SystemExit(127) from None


if __name__ == "__main__":
    main(sys.argv[1:])
