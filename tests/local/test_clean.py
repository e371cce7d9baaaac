"""`sm-dist local clean`: old local runs go, runs in use and recent ones stay (sm_dist.local.clean)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from sm_dist import cli
from sm_dist.errors import ConfigError
from sm_dist.local import clean

DAY = 86400.0


def _run(base: Path, name: str, age_s: float) -> Path:
    """A run folder whose every entry last changed `age_s` ago."""
    folder = base / name / "run" / "logs"
    folder.mkdir(parents=True)
    (folder / "algo-1.log").write_text("step 1\n")
    when = time.time() - age_s
    for path in [*sorted((base / name).rglob("*"), reverse=True), base / name]:
        os.utime(path, (when, when))
    return base / name


def test_ages() -> None:
    assert [clean.parse_age(t) for t in ("7d", "12h", "30m", "90s", "2w", "1.5d")] == [
        7 * DAY, 12 * 3600, 1800, 90, 14 * DAY, 1.5 * DAY]
    with pytest.raises(ConfigError, match="7d, 12h"):
        clean.parse_age("7 days")


def test_old_runs_go_and_runs_in_use_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "sm-dist-local"
    old, recent, busy = _run(base, "old", 10 * DAY), _run(base, "recent", DAY), _run(base, "busy", 10 * DAY)
    monkeypatch.chdir(busy / "run")  # a process works in it: a host of a run that is still going
    removed, in_use = clean.clean(base, 7 * DAY, dry_run=True)
    assert [r.path for r in removed] == [old] and [r.path for r in in_use] == [busy] and old.exists()
    removed, in_use = clean.clean(base, 7 * DAY)
    assert not old.exists() and recent.exists() and busy.exists()
    fresh = _run(base, "fresh", 10)  # changed seconds ago: it may be running
    removed, in_use = clean.clean(base, 0)
    assert recent in [r.path for r in removed] and fresh in [r.path for r in in_use] and fresh.exists()


def test_the_command_says_what_it_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "runs"
    _run(base, "a", 8 * DAY)
    _run(base, "b", DAY)
    assert cli.main(["local", "clean", "--root", str(base), "--older-than", "7d"]) == 0
    assert capsys.readouterr().out.startswith(f"removed 1 local run(s) older than 7d from {base} (")
    assert [p.name for p in base.iterdir()] == ["b"]


def test_a_summary_says_so_when_old_runs_pile_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = clean.default_base()
    for index in range(clean.PILE_UP_RUNS - 1):
        _run(base, f"job-{index}", 8 * DAY if index < 5 else 0)
    assert clean.pile_up(base / "job-0" / "run") == []
    _run(base, "job-last", 0)
    assert clean.pile_up(base / "job-last" / "run") == [
        f"{clean.PILE_UP_RUNS} local runs are kept under {base} (5 older than 7 days): "
        "`sm-dist local clean --older-than 7d` removes the old ones"]
    assert clean.pile_up(tmp_path / "elsewhere" / "run") == []  # a root of the user's own: not ours to count


def test_the_hint_names_an_age_that_removes_runs_when_none_is_a_week_old(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """20 runs of the last two days: "--older-than 7d" would remove nothing, so the hint names an age that does, and
    the clean it names removes that many."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = clean.default_base()
    for index in range(clean.PILE_UP_RUNS):
        _run(base, f"job-{index}", (2 * DAY if index < 12 else 3 * 3600) + 600)
    line, = clean.pile_up(base / "job-0" / "run")
    assert line == (f"{clean.PILE_UP_RUNS} local runs are kept under {base}, none older than 7 days: `sm-dist local "
                    "clean --older-than 2d` removes the 12 older than 2d")
    removed, _ = clean.clean(base, clean.parse_age("2d"), dry_run=True)
    assert len(removed) == 12


def test_a_finished_run_is_not_in_use_however_recent(tmp_path: Path) -> None:
    """The run's own word (its RUN_FILE) decides: finished a second ago, or its process gone, it goes;
    running in a live process, it stays; a folder without one goes by its age as before."""
    base = tmp_path / "sm-dist-local"
    finished, crashed, running, unknown = (_run(base, name, 10) for name in ("finished", "crashed", "running", "unknown"))
    clean.mark_running(finished, True)
    clean.mark_running(finished, False)
    (crashed / clean.RUN_FILE).write_text("999999999")  # no such process
    clean.mark_running(running, True)  # this process
    removed, in_use = clean.clean(base, 0)
    assert sorted(r.path.name for r in removed) == ["crashed", "finished"], removed
    assert sorted(r.path.name for r in in_use) == ["running", "unknown"]
