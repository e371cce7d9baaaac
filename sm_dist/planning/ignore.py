"""Which files of the user's source dir stay out of the code bundle.

Always left out: version control, virtual environments, caches, editor folders, checkpoints and
data files (by extension), and files above LARGE_FILE_BYTES (data belongs in S3, passed as an
input channel). On top of that, `.smdistignore` at the top of the source dir and the
`ignore_patterns=` argument, in .gitignore syntax (the `pathspec` library's gitwildmatch, as git
reads it): `#` comments, globs, `**`, anchoring `/`, folder-only trailing `/`, and `!` to bring
back what an earlier pattern (a default included) left out. Later patterns win; as in git, a
file inside a left-out folder cannot be brought back (the folder is not walked).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from sm_dist.errors import ConfigError

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

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
    # ...except the wheels vendored for requirements.txt (installed without an index: sm_dist.container.requirements)
    "!/wheels/*.whl",
)
#: A single file above this is left out with a warning: code is small; data goes through S3.
LARGE_FILE_BYTES = 10 * 2**20
#: More files than this means source_dir is not a project (a home folder, a dataset): refuse.
MAX_FILES = 5000


def default_lines() -> list[str]:
    """The defaults as .gitignore lines (folders with a trailing `/`)."""
    return [f"{name}/" for name in DEFAULT_DIRS] + list(DEFAULT_FILES)


def compile_rules(lines: Iterable[str], origin: str) -> GitIgnoreSpec:
    """A pathspec GitIgnoreSpec of `lines`; a line it cannot read is a ConfigError naming it."""
    import pathspec

    lines = list(lines)
    for number, line in enumerate(lines, 1):
        try:
            pathspec.GitIgnoreSpec.from_lines([line])
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{origin}:{number}", line, f"not a .gitignore pattern ({exc})") from None
    return pathspec.GitIgnoreSpec.from_lines(lines)


class IgnoreRules:
    """The defaults, then .smdistignore, then extra patterns (later ones win), for one source dir."""

    def __init__(self, source_dir: Path, extra: Iterable[str] = ()) -> None:
        lines = default_lines()
        ignore_file = source_dir / IGNORE_FILE
        if ignore_file.is_file():
            own = ignore_file.read_text(encoding="utf-8").splitlines()
            compile_rules(own, IGNORE_FILE)  # errors name the file and line
            lines += own
        extra = list(extra)
        compile_rules(extra, "ignore_patterns")
        self.spec = compile_rules(lines + extra, "ignore rules")

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """True when the file or folder at relative path `rel` stays out of the bundle."""
        return bool(self.spec.match_file(rel + "/" if is_dir else rel))


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
        try:
            children = sorted(folder.iterdir())
        except FileNotFoundError:  # removed while listed (a temp folder): nothing of it to upload
            continue
        except OSError as exc:
            warnings.append(f"{folder.relative_to(source_dir).as_posix()}/: left out of the bundle, cannot read it "
                            f"({exc.strerror or exc})")
            continue
        for child in children:
            rel = child.relative_to(source_dir).as_posix()
            if child.is_symlink() and child.is_dir():
                warnings.append(f"{rel}/: symlinked folder left out of the bundle")
            elif child.is_dir():
                if not rules.ignored(rel, True) and not is_virtualenv(child):
                    stack.append(child)
            elif child.is_file() and not rules.ignored(rel, False):
                try:
                    size = child.stat().st_size
                except FileNotFoundError:  # removed between the listing and now
                    continue
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


__all__ = ["IGNORE_FILE", "LARGE_FILE_BYTES", "IgnoreRules", "compile_rules", "default_lines", "is_virtualenv",
           "walk_source"]
