"""The warm pool's persistent cache inside the job: caches pointed into it, the user's own left alone, and
requirements.txt installed on the next job from the wheels the first kept (pip run for real, no index)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from _wheels import make_wheel

from sm_dist.container import requirements, warm_cache
from sm_dist.contract.container import WARMPOOL_CACHE_ENV


def test_no_cache_folder_no_variables(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin"}
    assert warm_cache.apply(env, "job-1", "algo-1") == env
    # the variable alone is not enough: SageMaker mounts the folder when the job runs on a warm pool
    missing = {WARMPOOL_CACHE_ENV: str(tmp_path / "absent")}
    assert warm_cache.apply(missing, "job-1", "algo-1") == missing


def test_the_caches_go_into_it_unless_the_user_set_them(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = tmp_path / "warmpoolcache"
    cache.mkdir()
    env = {WARMPOOL_CACHE_ENV: str(cache), "HF_HOME": "/data/hf"}
    with caplog.at_level(logging.INFO, logger="sm_dist.pid1"):
        first = warm_cache.apply(env, "job-1", "algo-1")
    assert first["HF_HOME"] == "/data/hf"  # the user's (or the image's) own
    assert first["PIP_CACHE_DIR"] == str(cache / "pip")
    assert first["TORCHINDUCTOR_CACHE_DIR"] == str(cache / "torchinductor")
    assert first["TRITON_CACHE_DIR"] == str(cache / "triton")
    assert "empty: the first job on this warm pool" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sm_dist.pid1"):
        second = warm_cache.apply({WARMPOOL_CACHE_ENV: str(cache)}, "job-2", "algo-1")
    assert second["HF_HOME"] == str(cache / "huggingface")
    assert "warm, left by job job-1" in caplog.text
    assert (cache / "sm_dist" / "last_job").read_text() == "job-2\n"


def _pip_env(tmp_path: Path, cache: Path, target: Path, links: Path) -> dict[str, str]:
    # pip installs into a throwaway target; the only package source is `links` (no index, no network)
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PIP_TARGET": str(target), "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(links), WARMPOOL_CACHE_ENV: str(cache),
            "PIP_CACHE_DIR": str(cache / "pip")}


@pytest.mark.slow
def test_the_next_job_installs_requirements_from_the_kept_wheels(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    source = make_wheel(tmp_path / "build")
    code = tmp_path / "code"
    code.mkdir()
    (code / "requirements.txt").write_text("smdist_probe_pkg==1.0\n")
    cache = tmp_path / "warmpoolcache"
    cache.mkdir()
    with caplog.at_level(logging.INFO, logger="sm_dist.pid1"):
        requirements.install(code, _pip_env(tmp_path, cache, tmp_path / "site-1", source))
    house = requirements.wheelhouse(code, {WARMPOOL_CACHE_ENV: str(cache)})
    assert house is not None and (house / requirements.COMPLETE_FILE).is_file()
    assert [p.name for p in house.glob("*.whl")] == ["smdist_probe_pkg-1.0-py3-none-any.whl"]
    assert "kept 1 wheel(s)" in caplog.text
    # the next job: a new container (a new site), and the wheel's source gone (no network)
    shutil.rmtree(source)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sm_dist.pid1"):
        requirements.install(code, _pip_env(tmp_path, cache, tmp_path / "site-2", source))
    assert "from the warm-pool cache's wheels (no index)" in caplog.text
    assert (tmp_path / "site-2" / "smdist_probe_pkg" / "__init__.py").read_text() == "VALUE = 7\n"
    # another requirements.txt is another key: installed from the index as a first job would
    (code / "requirements.txt").write_text("smdist_probe_pkg>=1.0\n")
    assert requirements.wheelhouse(code, {WARMPOOL_CACHE_ENV: str(cache)}) != house


def test_a_requirement_not_installed_from_an_archive_keeps_nothing(tmp_path: Path) -> None:
    """A VCS checkout or a local folder cannot be installed again with --no-index: the next job uses the index."""
    report = tmp_path / "house.report.json"
    report.write_text(json.dumps({"install": [
        {"download_info": {"url": "https://files.example/a-1.0-py3-none-any.whl", "archive_info": {}}},
        {"download_info": {"url": "file:///src/mypkg", "dir_info": {"editable": True}}},
    ]}))
    assert not requirements.keep_wheels(tmp_path / "house", report, tmp_path, {})
    assert not (tmp_path / "house").exists() and not report.exists()
