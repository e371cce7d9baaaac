"""The code channel: what goes in, what stays out, and that the manifest is the truth."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sm_dist.errors import ConfigError, LaunchError
from sm_dist.jobspec import JOB_SPEC_FILENAME, JobSpec
from sm_dist.planning.bundle import IGNORE_FILE, IgnoreRules, collect_bundle, resolve_entry, write_bundle

SPEC = JobSpec(entry="train.py").to_json()


def test_user_files_in_junk_out(source_dir: Path) -> None:
    bundle = collect_bundle(source_dir, SPEC)
    user = {f.path for f in bundle.files if f.origin == "user"}
    assert user == {"train.py", "pkg/__init__.py", "pkg/mod.py", "configs/base.yaml", ".smdistignore"}
    assert any("big.csv" in w and "inputs=" in w for w in bundle.warnings)


def test_package_entrypoints_and_spec_are_bundled(source_dir: Path) -> None:
    paths = {f.path for f in collect_bundle(source_dir, SPEC).files}
    assert {"sm_dist/container/pid1.py", "sm_dist/jobspec.py", JOB_SPEC_FILENAME} <= paths
    assert "sm_dist/_entrypoints/cnn.py" in paths
    assert not any("__pycache__" in p or p.endswith(".pyc") or "_infra" in p for p in paths)


def test_extra_patterns_and_anchoring(source_dir: Path) -> None:
    bundle = collect_bundle(source_dir, SPEC, ignore_patterns=("/configs/*.yaml", "mod.py"))
    user = {f.path for f in bundle.files if f.origin == "user"}
    assert "configs/base.yaml" not in user and "pkg/mod.py" not in user and "train.py" in user


def test_negation_brings_back_what_an_earlier_pattern_left_out(tmp_path: Path) -> None:
    (tmp_path / "weights").mkdir()
    for name in ("train.py", "notes.txt", "keep.txt", "weights/init.pt", "weights/other.pt"):
        (tmp_path / name).write_text("x")
    (tmp_path / IGNORE_FILE).write_text("*.txt\n!keep.txt\n!weights/init.pt\n")
    user = {f.path for f in collect_bundle(tmp_path, SPEC).files if f.origin == "user"}
    # keep.txt back from the user's own rule, weights/init.pt back from a default (*.pt)
    assert user == {"train.py", "keep.txt", "weights/init.pt", IGNORE_FILE}


def test_double_star_matches_any_depth(tmp_path: Path) -> None:
    rules = IgnoreRules(tmp_path, ["data/**/raw/", "**/scratch.py", "logs/**"])
    assert rules.ignored("data/raw", True) and rules.ignored("data/a/b/raw", True)
    assert not rules.ignored("data/a/raw", False)  # trailing /: folders only
    assert rules.ignored("scratch.py", False) and rules.ignored("pkg/deep/scratch.py", False)
    assert rules.ignored("logs/a/b.txt", False) and not rules.ignored("pkg/logs.py", False)


def test_later_patterns_win_and_bad_lines_are_named(tmp_path: Path) -> None:
    assert not IgnoreRules(tmp_path, ["!*.npy"]).ignored("small.npy", False)  # a default turned off
    assert IgnoreRules(tmp_path, ["!*.npy", "*.npy"]).ignored("small.npy", False)
    (tmp_path / IGNORE_FILE).write_text("# fine\n!\n")
    with pytest.raises(ConfigError, match=r"\.smdistignore:2='!': not a \.gitignore pattern"):
        IgnoreRules(tmp_path)


def test_user_sm_dist_folder_is_shadowed(source_dir: Path) -> None:
    (source_dir / "sm_dist").mkdir()
    (source_dir / "sm_dist" / "evil.py").write_text("x")
    bundle = collect_bundle(source_dir, SPEC)
    assert "sm_dist/evil.py" not in {f.path for f in bundle.files}
    assert any("sm_dist/evil.py" in w for w in bundle.warnings)


def test_written_bundle_matches_manifest(source_dir: Path, tmp_path: Path) -> None:
    bundle = collect_bundle(source_dir, SPEC)
    dest = write_bundle(bundle, tmp_path / "out")
    for item in bundle.files:
        data = (dest / item.path).read_bytes()
        assert len(data) == item.size and hashlib.sha256(data).hexdigest() == item.sha256
    assert JobSpec.from_json((dest / JOB_SPEC_FILENAME).read_text()).entry == "train.py"
    with pytest.raises(ConfigError):
        write_bundle(bundle, dest)  # not empty


def test_file_changed_after_plan_is_refused(source_dir: Path, tmp_path: Path) -> None:
    bundle = collect_bundle(source_dir, SPEC)
    (source_dir / "train.py").write_text("print('changed')\n")
    with pytest.raises(LaunchError, match="changed after the plan"):
        write_bundle(bundle, tmp_path / "out")


def test_entry_resolution(source_dir: Path) -> None:
    assert resolve_entry("train.py", source_dir, False) == "train.py"
    assert resolve_entry("cnn.py", source_dir, False) == "sm_dist/_entrypoints/cnn.py"
    assert resolve_entry("pkg.mod:main", source_dir, True) == "pkg.mod:main"
    with pytest.raises(ConfigError, match="cnn.py"):
        resolve_entry("trian.py", source_dir, False)
    with pytest.raises(ConfigError):
        resolve_entry("../x.py", source_dir, False)
    # a full path: the same file when it is in source_dir; "no such file" when it is nowhere; else where to put it
    assert resolve_entry(str(source_dir / "train.py"), source_dir, False) == "train.py"
    with pytest.raises(ConfigError, match="no such file"):
        resolve_entry(str(source_dir / "trian.py"), source_dir, False)
    outside = source_dir.parent / "elsewhere.py"
    outside.write_text("print(1)\n")
    with pytest.raises(ConfigError, match="not inside source_dir"):
        resolve_entry(str(outside), source_dir, False)


def test_a_folder_that_is_not_a_project_is_refused(tmp_path: Path, monkeypatch) -> None:
    from sm_dist.planning import bundle as bundle_module

    monkeypatch.setattr(bundle_module, "MAX_FILES", 3)
    for i in range(5):
        (tmp_path / f"f{i}.py").write_text("")
    with pytest.raises(ConfigError, match="more than 3 files"):
        collect_bundle(tmp_path, SPEC)


def test_files_that_vanish_or_cannot_be_read_while_listed_are_left_out(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A source folder such as /tmp changes while it is listed: a file removed between the listing and its hash is
    not code (left out quietly); an unreadable folder is named in a warning, never an internal error."""
    from sm_dist.planning import bundle as bundle_module

    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "gone.tmp").write_text("x")
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "x.py").write_text("")
    real_file, real_iterdir = bundle_module._file, Path.iterdir

    def vanishing(rel: str, path: Path, origin: str) -> object:
        if rel == "gone.tmp":
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_file(rel, path, origin)

    def iterdir(self: Path) -> object:
        if self.name == "private":
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(bundle_module, "_file", vanishing)
    monkeypatch.setattr(Path, "iterdir", iterdir)
    bundle = collect_bundle(tmp_path, "{}")
    users = [f.path for f in bundle.files if f.origin == "user"]
    assert users == ["train.py"]
    assert bundle.warnings == ("private/: left out of the bundle, cannot read it (Permission denied)",)
