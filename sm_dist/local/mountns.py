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

The same namespace gives the host SageMaker's names: with ``--hosts FILE`` the file is bound over
/etc/hosts, so `algo-1` ... `algo-N` resolve (each to a loopback address of its own) and
PID 1 runs exactly as in the cloud, rendezvous on algo-1 included.

Run as ``python -m sm_dist.local.mountns ROOT [--hosts FILE] -- ARGV...`` inside the namespace (the
agent wraps the command with `unshare`): it mounts, then execs ARGV (same pid: signals still reach it).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
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


#: The file the resolver reads host names from (glibc's "files" source).
ETC_HOSTS = "/etc/hosts"


def setup(root: Path, opt_ml: str = OPT_ML, hosts_file: Path | None = None) -> None:
    """Inside a private mount namespace: make `opt_ml` show `root` (and /etc/hosts show `hosts_file`)."""
    target = Path(opt_ml)
    if not target.is_dir():
        _mount_point_in_tmpfs(target)
    _bind(str(root), str(target))
    if hosts_file is not None:
        _bind(str(hosts_file), ETC_HOSTS)


def host_address(index: int) -> str:
    """The loopback address of the `index`-th host (0-based) in a job's hosts file: 127.100.x.y."""
    return f"127.100.{index // 250}.{index % 250 + 1}"


def hosts_file_text(hosts: Sequence[str], machine: str) -> str:
    """This machine's /etc/hosts (`machine`, so its own name still resolves) plus one line per emulated host."""
    lines = [machine.rstrip("\n"), "# sm_dist local mode: the job's hosts, as SageMaker names them"]
    lines += [f"{host_address(i)}\t{host}" for i, host in enumerate(hosts)]
    return "\n".join(lines) + "\n"


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


def command(root: Path, argv: Sequence[str], hosts_file: Path | None = None) -> list[str] | None:
    """`argv` wrapped to run with `root` at /opt/ml (and `hosts_file` as /etc/hosts), or None where
    this machine does not allow it."""
    prefix = unshare_prefix()
    if prefix is None:
        return None
    hosts = ["--hosts", str(hosts_file)] if hosts_file is not None else []
    return [*prefix, sys.executable, "-m", "sm_dist.local.mountns", str(root), *hosts, "--", *argv]


def unshare_prefix() -> tuple[str, ...] | None:
    """`unshare --mount ...` when a probe run can show a folder at /opt/ml; else None (cached)."""
    with _PROBE_LOCK:  # one probe, also when `probe_early`'s thread is running it
        return _probe()


def probe_early() -> None:
    """Run the probe (a process) in a thread now, so that it is done by the time the hosts start."""
    threading.Thread(target=lambda: unshare_prefix(), name="sm_dist-unshare-probe", daemon=True).start()


_PROBE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[str, ...] | None:
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


#: How this helper's own lines start (local mode's summary finds them when a host fails before its command).
HELPER_PREFIX = "[sm_dist local]"
#: Exit codes of this helper (before the command runs): the mounts failed; the command is not there.
EXIT_MOUNT_FAILED = 70
EXIT_NO_COMMAND = 127


def main(argv: list[str]) -> None:
    hosts_file = None
    if len(argv) >= 3 and argv[1] == "--hosts":
        hosts_file, argv = Path(argv[2]), [argv[0], *argv[3:]]
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m sm_dist.local.mountns ROOT [--hosts FILE] -- ARGV...", file=sys.stderr)
        raise SystemExit(2)
    try:
        setup(Path(argv[0]), hosts_file=hosts_file)
    except OSError as exc:
        print(f"{HELPER_PREFIX} cannot show {argv[0]} at {OPT_ML}: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_MOUNT_FAILED) from None
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        print(f"{HELPER_PREFIX} cannot start {argv[2]!r}: {exc.strerror}", file=sys.stderr)
        raise SystemExit(EXIT_NO_COMMAND) from None


if __name__ == "__main__":
    main(sys.argv[1:])
