"""The code channel of a job: the user's source, sm_dist itself, its entrypoints, the job spec.

Layout (what the container sees under /opt/ml/input/data/code, on PYTHONPATH):

    <user's source dir, minus ignored files>
    sm_dist/                 the installed sm_dist package (no pip install in the job, so it
    sm_dist/_entrypoints/    works in a network-isolated VPC), with the bundled entrypoints
    sm_dist_job.json         the JobSpec

What of the source dir stays out (`IgnoreRules`, `walk_source`): version control, virtual
environments, caches, editor folders, checkpoints and data files (by extension), and files above
LARGE_FILE_BYTES (data belongs in S3, passed as an input channel). On top of that, `.smdistignore`
at the top of the source dir and the `ignore_patterns=` argument, in .gitignore syntax (the
`pathspec` library's gitwildmatch, as git reads it): `#` comments, globs, `**`, anchoring `/`,
folder-only trailing `/`, and `!` to bring back what an earlier pattern (a default included) left
out. Later patterns win; as in git, a file inside a left-out folder cannot be brought back (the
folder is not walked).

`collect_bundle` lists the files with their sizes and sha256 (the manifest in the plan) and
reads nothing from AWS; `write_bundle` copies them to a local folder (local mode); the upload
in `submit` sends the same bytes, after checking each still has the planned sha256.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sm_dist._resources import package_dir, resource_dir
from sm_dist.contract.container import REQUIREMENTS_FILE, WHEELS_DIR
from sm_dist.errors import ConfigError, LaunchError
from sm_dist.jobspec import JOB_SPEC_FILENAME

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

_log = logging.getLogger(__name__)

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


#: Above this total the plan warns: every host downloads the bundle at start.
WARN_BUNDLE_BYTES = 50 * 2**20
#: Where the entrypoints live inside the bundled package (same place as in the wheel).
ENTRYPOINTS_IN_BUNDLE = "sm_dist/_entrypoints"
#: Parts of the installed package the job never needs.
_PACKAGE_SKIP = ("__pycache__", "_infra")


@dataclass(frozen=True)
class BundleFile:
    """One file of the code channel."""

    path: str
    """Relative posix path inside the bundle."""
    size: int
    sha256: str
    origin: str
    """"user", "sm_dist", "entrypoint" or "jobspec"."""
    source: str | None
    """Absolute local path (None for generated content)."""


@dataclass(frozen=True)
class Bundle:
    """The manifest of the code channel, plus the generated job spec text."""

    files: tuple[BundleFile, ...]
    job_spec_json: str
    warnings: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def requirements(self) -> BundleFile | None:
        """The source dir's requirements.txt, pip-installed at job start (sm_dist.container.requirements)."""
        return next((f for f in self.files if f.path == REQUIREMENTS_FILE and f.origin == "user"), None)

    @property
    def wheels(self) -> int:
        """Wheels vendored in the source dir's wheels/ (installed from there, without an index)."""
        return sum(1 for f in self.files
                   if f.origin == "user" and f.path.startswith(WHEELS_DIR + "/") and f.path.endswith(".whl"))

    def manifest(self) -> list[dict[str, Any]]:
        """JSON-able list of {path, size, sha256, origin}."""
        return [{"path": f.path, "size": f.size, "sha256": f.sha256, "origin": f.origin} for f in self.files]

    def payloads(self) -> Iterator[tuple[BundleFile, bytes]]:
        """Each file's bytes, checked against the planned sha256 (a file changed since → error)."""
        for item in self.files:
            data = self.job_spec_json.encode() if item.source is None else Path(item.source).read_bytes()
            if hashlib.sha256(data).hexdigest() != item.sha256:
                raise LaunchError(f"{item.source} changed after the plan was made; plan again")
            yield item, data


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _file(rel: str, path: Path, origin: str) -> BundleFile:
    return BundleFile(rel, path.stat().st_size, _sha256(path), origin, str(path))


def checkout_warning(source_dir: str, bundle: Bundle) -> list[str]:
    """A line when source_dir is left at "." in a git checkout: the job would get the whole repository (docs,
    tests, the site, ...), a newcomer's first run without --source-dir. None for a folder named on purpose."""
    root = Path(source_dir)
    if source_dir != "." or not (root / ".git").exists():
        return []
    user = [f for f in bundle.files if f.origin == "user"]
    tops = sorted({f.path.split("/", 1)[0] for f in user if "/" in f.path})
    shown = ", ".join(tops[:6]) + (", ..." if len(tops) > 6 else "")
    return [f"source_dir='.' (the default) bundles this whole git checkout: {len(user)} files, "
            f"{sum(f.size for f in user) / 2**20:.1f} MiB" + (f" ({shown})" if tops else "") + "; give --source-dir "
            "the script's folder, or leave the rest out with .smdistignore"]


def builtin_entrypoints() -> list[str]:
    """File names of sm_dist's bundled entrypoints (cnn.py, gpt.py, ...)."""
    folder = resource_dir("entrypoints")
    return sorted(p.name for p in folder.glob("*.py")) if folder.is_dir() else []


def _inside(path: Path, source_dir: Path) -> Path:
    """An absolute script path as a path in source_dir: "no such file" when it is not there, and a
    refusal when it is outside source_dir (the job gets source_dir, nothing else)."""
    if not path.is_file():
        raise ConfigError("entry", str(path), "no such file")
    try:
        return path.resolve().relative_to(source_dir.resolve())
    except ValueError:
        raise ConfigError("entry", str(path), f"not inside source_dir {str(source_dir)!r}, the only folder the "
                          "job gets: move it there, or give --source-dir its folder") from None


def resolve_entry(entry: str, source_dir: Path, is_function: bool) -> str:
    """The entry as the job spec holds it: relative to the bundle root."""
    if is_function:
        return entry
    rel = Path(entry)
    if rel.is_absolute():
        rel = _inside(rel, source_dir)
    if ".." in rel.parts:
        raise ConfigError("entry", entry, "give the script relative to source_dir, without '..'")
    if (source_dir / rel).is_file():
        return rel.as_posix()
    if rel.name == entry and entry in builtin_entrypoints():
        return f"{ENTRYPOINTS_IN_BUNDLE}/{entry}"
    raise ConfigError(
        "entry", entry,
        f"no such file in source_dir {str(source_dir)!r}; bundled entrypoints: {', '.join(builtin_entrypoints()) or 'none'}"
        ', or use "pkg.module:function"',
    )


def _package_files() -> list[BundleFile]:
    root = package_dir()
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and not set(rel.parts) & set(_PACKAGE_SKIP) and path.suffix not in (".pyc", ".pyo"):
            files.append(_file(f"sm_dist/{rel.as_posix()}", path, "sm_dist"))
    entry_dir = resource_dir("entrypoints")
    if entry_dir.is_dir() and entry_dir != root / "_entrypoints":  # source checkout / editable install
        for path in sorted(entry_dir.glob("*.py")):
            files.append(_file(f"{ENTRYPOINTS_IN_BUNDLE}/{path.name}", path, "entrypoint"))
    return files


def collect_bundle(source_dir: str | Path, job_spec_json: str, ignore_patterns: tuple[str, ...] = ()) -> Bundle:
    """List the code channel's files. Reads local files only."""
    source = Path(source_dir).resolve()
    user, warnings = walk_source(source, IgnoreRules(source, ignore_patterns))
    files: list[BundleFile] = []
    for rel, path in user:
        if rel.split("/")[0] in ("sm_dist", JOB_SPEC_FILENAME):
            warnings.append(f"{rel}: left out, the bundled sm_dist package and job spec take its place")
            continue
        try:
            files.append(_file(rel, path, "user"))
        except FileNotFoundError:  # removed since it was listed (a temp file): not part of the code
            continue
        except OSError as exc:
            warnings.append(f"{rel}: left out of the bundle, cannot read it ({exc.strerror or exc})")
    files += _package_files()
    spec_bytes = job_spec_json.encode()
    files.append(BundleFile(JOB_SPEC_FILENAME, len(spec_bytes), hashlib.sha256(spec_bytes).hexdigest(), "jobspec", None))
    bundle = Bundle(tuple(files), job_spec_json, tuple(warnings))
    if bundle.total_bytes > WARN_BUNDLE_BYTES:
        warnings.append(
            f"code bundle is {bundle.total_bytes / 2**20:.0f} MiB (> {WARN_BUNDLE_BYTES // 2**20} MiB); "
            f"every host downloads it at start — list large files in .smdistignore"
        )
        bundle = Bundle(bundle.files, job_spec_json, tuple(warnings))
    return bundle


def write_bundle(bundle: Bundle, dest_dir: str | Path) -> Path:
    """Copy the bundle into `dest_dir` (created; must be empty). No upload."""
    dest = Path(dest_dir)
    if dest.exists() and any(dest.iterdir()):
        raise ConfigError("dest_dir", str(dest), "expected a new or empty folder")
    for item, data in bundle.payloads():
        target = dest / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    _log.debug("wrote %d files (%d bytes) to %s", len(bundle.files), bundle.total_bytes, dest)
    return dest


__all__ = ["IGNORE_FILE", "LARGE_FILE_BYTES", "Bundle", "BundleFile", "IgnoreRules", "builtin_entrypoints", "checkout_warning",
           "collect_bundle", "compile_rules", "default_lines", "is_virtualenv", "resolve_entry", "walk_source", "write_bundle"]
