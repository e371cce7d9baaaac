"""Which files of the user's source dir stay out of the code bundle.

Always left out: version control, virtual environments, caches, editor folders, checkpoints and
data files (by extension), and files above LARGE_FILE_BYTES (data belongs in S3, passed as an
input channel). On top of that, `.smdistignore` at the top of the source dir and the
`ignore_patterns=` argument, in a small subset of .gitignore syntax: `#` comments, `*`/`?`/`[]`
globs, a pattern with a `/` is matched against the whole relative path (leading `/` anchors
it), one without against every path component, a trailing `/` matches folders only.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sm_dist.errors import ConfigError

IGNORE_FILE = ".smdistignore"
#: Folders never uploaded (matched by name anywhere in the tree).
DEFAULT_DIRS = (
    ".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", "node_modules", ".idea", ".vscode",
    "*.egg-info", ".eggs", "wandb", "mlruns", "lightning_logs", ".cache",
)
#: Files never uploaded: bytecode, OS litter, checkpoints and data formats.
DEFAULT_FILES = (
    "*.pyc", "*.pyo", ".DS_Store", "*.swp", "*.pt", "*.pth", "*.ckpt", "*.safetensors", "*.distcp",
    "*.bin", "*.npy", "*.npz", "*.parquet", "*.arrow", "*.tfrecord", "*.h5", "*.hdf5", "*.onnx",
    "*.tar", "*.tar.gz", "*.tgz", "*.zip", "*.whl",
)
#: A single file above this is left out with a warning: code is small; data goes through S3.
LARGE_FILE_BYTES = 10 * 2**20
#: More files than this means source_dir is not a project (a home folder, a dataset): refuse.
MAX_FILES = 5000


@dataclass(frozen=True)
class Rule:
    """One ignore pattern."""

    pattern: str
    anchored: bool  # matched against the whole relative path
    dir_only: bool

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        if self.anchored:
            return fnmatch.fnmatchcase(rel, self.pattern)
        # The walk prunes ignored folders, so the last component is the only one left to test.
        return fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], self.pattern)


def parse_rules(lines: Iterable[str], origin: str) -> list[Rule]:
    """Rules from .gitignore-style lines."""
    rules = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            raise ConfigError(f"{origin}:{number}", line, "negated patterns ('!') are not supported; list what to leave out")
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        rules.append(Rule(line.lstrip("/"), anchored, dir_only))
    return rules


class IgnoreRules:
    """The defaults plus .smdistignore plus extra patterns, for one source dir."""

    def __init__(self, source_dir: Path, extra: Iterable[str] = ()) -> None:
        self.rules = [Rule(p, False, True) for p in DEFAULT_DIRS] + [Rule(p, False, False) for p in DEFAULT_FILES]
        ignore_file = source_dir / IGNORE_FILE
        if ignore_file.is_file():
            self.rules += parse_rules(ignore_file.read_text(encoding="utf-8").splitlines(), IGNORE_FILE)
        self.rules += parse_rules(extra, "ignore_patterns")

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """True when the file or folder at relative path `rel` stays out of the bundle."""
        return any(rule.matches(rel, is_dir) for rule in self.rules)


def is_virtualenv(path: Path) -> bool:
    """A folder made by venv/virtualenv/conda, whatever its name."""
    return (path / "pyvenv.cfg").is_file() or (path / "conda-meta").is_dir()


def walk_source(source_dir: Path, rules: IgnoreRules) -> tuple[list[tuple[str, Path]], list[str]]:
    """(relative posix path, absolute path) of every file to upload, and warnings, sorted."""
    keep: list[tuple[str, Path]] = []
    warnings: list[str] = []
    stack = [source_dir]
    while stack:
        folder = stack.pop()
        for child in sorted(folder.iterdir()):
            rel = child.relative_to(source_dir).as_posix()
            if child.is_symlink() and child.is_dir():
                warnings.append(f"{rel}/: symlinked folder left out of the bundle")
            elif child.is_dir():
                if not rules.ignored(rel, True) and not is_virtualenv(child):
                    stack.append(child)
            elif child.is_file() and not rules.ignored(rel, False):
                size = child.stat().st_size
                if size > LARGE_FILE_BYTES:
                    warnings.append(
                        f"{rel}: {size / 2**20:.1f} MiB file left out of the bundle (limit "
                        f"{LARGE_FILE_BYTES // 2**20} MiB); put data in S3 and pass it with inputs="
                    )
                else:
                    keep.append((rel, child))
        if len(keep) > MAX_FILES:
            raise ConfigError("source_dir", str(source_dir), f"holds more than {MAX_FILES} files to upload; point it at "
                              f"the project folder or list what to leave out in {IGNORE_FILE}")
    return sorted(keep), warnings


__all__ = ["IGNORE_FILE", "IgnoreRules", "LARGE_FILE_BYTES", "parse_rules", "walk_source", "is_virtualenv"]
