"""`sm-dist local clean [--older-than 7d] [--root DIR] [--dry-run]`: remove the folders of finished local runs.

Every local run keeps its folder (logs, checkpoints, the hosts' /opt/ml) under the local root,
`<temp dir>/sm-dist-local/<job>` unless `--local-root` says otherwise, so that a failure can be read
and a checkpoint resumed from afterwards; nothing else is left on the machine (the hosts' own temporary
folders, torchrun's included, go with each attempt). After a day of rehearsals the root holds hundreds
of runs: this removes those older than the age given (by their newest change), never one in use (a
process works in it, or it changed in the last `IN_USE_S`). A finished run's summary says when old
runs pile up (`pile_up`). A run says itself whether it is running: `RUN_FILE` in its folder holds the
pid of the process running it, then `FINISHED` once it ended (`sm_dist.local.api.run`); a finished run is
never in use for its age alone, a run whose process is gone neither. The warm pools kept between runs (`sm_dist.local.warm_pool`, in `warm-pools/`)
count as runs: one a job has taken over is in use while its run is.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sm_dist.errors import ConfigError
from sm_dist.local.warm_pool import POOL_FILE, POOLS_FOLDER

#: A run folder without RUN_FILE that changed this recently may be running (a host's log gets a line
#: per step or so).
IN_USE_S = 300.0
#: In a run's folder: the pid of the process running it, then FINISHED.
RUN_FILE = ".sm-dist-run"
FINISHED = "finished"
#: From this many runs under the root, a finished run's summary says how to clean up.
PILE_UP_RUNS = 20
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def default_base() -> Path:
    """Where local runs go without --local-root (`sm_dist.local.api.run`)."""
    return Path(tempfile.gettempdir()) / "sm-dist-local"


def parse_age(text: str) -> float:
    """"7d", "12h", "30m", "90s", "2w" -> seconds."""
    match = _AGE.match(text)
    if not match:
        raise ConfigError("--older-than", text, "use a number and a unit: 7d, 12h, 30m, 90s or 2w")
    return float(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True)
class RunFolder:
    """One local run's folder: its newest change, its size, whether it is in use."""

    path: Path
    changed: float
    size: int
    in_use: bool


def _walk(path: Path) -> tuple[float, int]:
    newest, size = path.stat().st_mtime, 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(top, name))
            except OSError:
                continue
            newest, size = max(newest, st.st_mtime), size + st.st_size
    return newest, size


def _worked_in() -> set[Path]:
    """The working directories of this machine's processes (those this user may read)."""
    found: set[Path] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if name.isdigit():
            try:
                found.add(Path(os.readlink(f"/proc/{name}/cwd")))
            except OSError:
                continue
    return found


def mark_running(folder: Path, running: bool) -> None:
    """Write RUN_FILE: this process runs the run in `folder` (`running`), or the run ended."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / RUN_FILE).write_text(str(os.getpid()) if running else FINISHED, encoding="utf-8")
    except OSError:  # a folder this cannot write: clean then goes by the folder's age
        pass


def _running(path: Path, changed: float, now: float) -> bool:
    """Whether the run in `path` may still be running: its RUN_FILE's process lives; without one, a recent change."""
    try:
        said = (path / RUN_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return now - changed < IN_USE_S
    if not said.isdigit():
        return False  # FINISHED
    try:
        os.kill(int(said), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _folders(base: Path) -> list[Path]:
    """The run folders under `base`, then the warm pools (`POOLS_FOLDER`'s folders)."""
    found = sorted(p for p in base.iterdir() if p.is_dir() and p.name != POOLS_FOLDER) if base.is_dir() else []
    pools = base / POOLS_FOLDER
    return found + (sorted(p for p in pools.iterdir() if p.is_dir()) if pools.is_dir() else [])


def runs(base: Path, now: float | None = None) -> list[RunFolder]:
    """The run folders and warm pools under `base`, oldest first."""
    now = time.time() if now is None else now
    cwds = _worked_in()
    out: dict[Path, RunFolder] = {}
    for path in _folders(base):
        changed, size = _walk(path)
        busy = _running(path, changed, now) or any(c == path or path in c.parents for c in cwds)
        if path.parent.name == POOLS_FOLDER and not (path / POOL_FILE).is_file():  # taken over by its run
            run = out.get(base / path.name)
            busy = busy or (run is not None and run.in_use)
        out[path] = RunFolder(path, changed, size, busy)
    return sorted(out.values(), key=lambda r: r.changed)


def clean(base: Path, older_than_s: float = 0.0, dry_run: bool = False,
          now: float | None = None) -> tuple[list[RunFolder], list[RunFolder]]:
    """Remove (unless `dry_run`) the runs under `base` unchanged for `older_than_s`; (removed, in use)."""
    now = time.time() if now is None else now
    found = runs(base, now)
    old = [r for r in found if now - r.changed >= older_than_s]
    removed = [r for r in old if not r.in_use]
    if not dry_run:
        for run in removed:
            shutil.rmtree(run.path, ignore_errors=True)
    return removed, [r for r in old if r.in_use]


def pile_up(run_root: Path, older_than_s: float = 7 * 86400) -> list[str]:
    """A line for the summary when the default root holds PILE_UP_RUNS runs or more (only the folder
    itself is read: no walk through hundreds of runs)."""
    base = default_base()
    if base not in run_root.parents or not base.is_dir():
        return []
    folders = [p for p in base.iterdir() if p.is_dir() and p.name != POOLS_FOLDER]
    if len(folders) < PILE_UP_RUNS:
        return []
    now = time.time()
    ages = sorted((now - p.stat().st_mtime for p in folders), reverse=True)
    old = sum(1 for age in ages if age >= older_than_s)
    if old:
        return [f"{len(folders)} local runs are kept under {base} ({old} older than 7 days): "
                "`sm-dist local clean --older-than 7d` removes the old ones"]
    # none that old: name an age that removes the older half (by their folder's date; a run in use stays)
    text = _age_text(ages[len(ages) // 2])
    older = sum(1 for age in ages if age >= parse_age(text))
    return [f"{len(folders)} local runs are kept under {base}, none older than 7 days: `sm-dist local clean "
            f"--older-than {text}` removes the {older} older than {text}"]


def _age_text(seconds: float) -> str:
    """The largest whole number of days, hours or minutes within `seconds` ("2d", "5h", "1m")."""
    for unit in ("d", "h", "m"):
        if seconds >= _UNITS[unit]:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{max(int(seconds), 1)}s"


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def run_clean(args: argparse.Namespace) -> int:
    base = Path(args.root) if args.root else default_base()
    age = parse_age(args.older_than) if args.older_than else 0.0
    removed, busy = clean(base, age, args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    since = f" older than {args.older_than}" if args.older_than else ""
    print(f"{verb} {len(removed)} local run(s){since} from {base} ({_size(sum(r.size for r in removed))})"
          + (f"; kept {len(busy)} in use: {', '.join(r.path.relative_to(base).as_posix() for r in busy)}" if busy else ""))
    return 0


def register(command: str, parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    sub = subs.add_parser("clean", help="remove the folders of finished local runs")
    sub.add_argument("--older-than", metavar="AGE", help="only runs unchanged for AGE (7d, 12h, 30m); default: all")
    sub.add_argument("--root", help=f"the local root (default: {default_base()})")
    sub.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    sub.set_defaults(_run=run_clean)


__all__ = ["FINISHED", "RUN_FILE", "RunFolder", "clean", "mark_running", "default_base", "parse_age", "pile_up", "register", "runs"]
