"""Local mode's warm pool: kept between two jobs whose requests match as SageMaker matches them, taken
over warm, refused with the field that differs, ended past its keep-alive; each host's cache linked at
/opt/ml/sagemaker/warmpoolcache and named by SageMaker's variable; `sm-dist local clean` removes pools."""

from __future__ import annotations

import copy
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sm_dist.errors import ConfigError
from sm_dist.local import clean, warm_pool
from sm_dist.local.config import LocalJobConfig
from sm_dist.local.hostenv import host_environment
from sm_dist.local.job import LocalJob
from sm_dist.local.layout import create_host_root
from sm_dist.local.progress import Progress
from sm_dist.local.run_records import RunRecord
from sm_dist.local.runner import Outcome

REQUEST: dict[str, Any] = {
    "RoleArn": "arn:aws:iam::111122223333:role/sm",
    "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30,
                       "KeepAlivePeriodInSeconds": 600},
}


def _request(**resource: object) -> dict[str, Any]:
    out = copy.deepcopy(REQUEST)
    out["ResourceConfig"].update(resource)
    return out


def test_a_kept_pool_is_taken_over_by_the_next_matching_job(tmp_path: Path) -> None:
    pools = tmp_path / "warm-pools"
    first = warm_pool.take(pools, REQUEST, "job-1", now=1000.0)
    assert first.folder == pools / "job-1" and first.line == "cold: no pool kept; this job's hosts are kept 600 s for the next"
    (first.folder / "algo-1").mkdir()
    (first.folder / "algo-1" / "marker").write_text("left by job-1")
    warm_pool.release(first, REQUEST, "job-1", now=1010.0)
    assert [p.job for p in warm_pool.pools(pools)] == ["job-1"]
    # the next job (its keep-alive may differ: SageMaker does not match on it)
    second = warm_pool.take(pools, _request(KeepAlivePeriodInSeconds=60), "job-2", now=1100.0)
    assert second.folder == pools / "job-2" and (second.folder / "algo-1" / "marker").read_text() == "left by job-1"
    assert second.line is not None and second.line.startswith("warm: on the hosts job job-1 kept (idle 90 s of its 600 s")
    assert warm_pool.pools(pools) == []  # in use: no other job can take it


def test_a_pool_that_does_not_match_is_left_and_the_first_field_that_differs_named(tmp_path: Path) -> None:
    pools = tmp_path / "warm-pools"
    warm_pool.release(warm_pool.take(pools, REQUEST, "job-1", now=0.0), REQUEST, "job-1", now=0.0)
    other = warm_pool.take(pools, _request(InstanceCount=3), "job-2", now=10.0)
    assert other.folder == pools / "job-2"
    assert other.line == ("cold: the pool of job job-1 not reused: instance_count 3 here, 2 in the pool; this job's "
                          "hosts are kept 600 s for the next")
    # a job that keeps no pool and finds none that matches runs without one, and says why
    plain = _request(KeepAlivePeriodInSeconds=None, InstanceType="ml.g5.2xlarge")
    none = warm_pool.take(pools, plain, "job-3", now=10.0)
    assert none.folder is None and none.line is not None and "instance_type ml.g5.2xlarge here, ml.g5.xlarge in the pool" in none.line
    assert warm_pool.take(tmp_path / "none-kept", plain, "job-4").line is None  # nothing to say


def test_a_pool_past_its_keep_alive_is_ended_and_a_job_without_one_ends_the_pool_it_took(tmp_path: Path) -> None:
    pools = tmp_path / "warm-pools"
    warm_pool.release(warm_pool.take(pools, REQUEST, "job-1", now=0.0), REQUEST, "job-1", now=0.0)
    late = warm_pool.take(pools, REQUEST, "job-2", now=601.0)
    assert not (pools / "job-1").exists() and late.line is not None and late.line.startswith("cold: no pool kept")
    warm_pool.release(late, REQUEST, "job-2", now=601.0)
    plain = _request(KeepAlivePeriodInSeconds=None)
    taken = warm_pool.take(pools, plain, "job-3", now=700.0)
    assert taken.line is not None and taken.line.startswith("warm: on the hosts job job-2 kept")
    warm_pool.release(taken, plain, "job-3")
    assert list(pools.iterdir()) == []


def test_each_host_sees_its_cache_at_the_platforms_path(fake_config: LocalJobConfig, tmp_path: Path) -> None:
    config = replace(fake_config, warm_pool=tmp_path / "warm-pools" / "job-1")
    layout = create_host_root(config, "algo-2", tmp_path / "h2", None)
    cache = layout.root / "sagemaker" / "warmpoolcache"
    assert cache.is_symlink() and cache.resolve() == (tmp_path / "warm-pools" / "job-1" / "algo-2").resolve()
    ports = {"SM_DIST_RDZV_PORT": 1, "SM_DIST_MASTER_PORT": 2}
    env = host_environment(config, layout, ports, private=True, base={})
    assert env["SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"] == "/opt/ml/sagemaker/warmpoolcache"
    env = host_environment(config, layout, ports, private=False, base={})
    assert env["SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"] == str(cache)
    assert "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY" not in host_environment(fake_config, layout, ports,
                                                                                private=True, base={})
    # this process's cache variables (a shell's HF_HOME; TORCHINDUCTOR_CACHE_DIR, which torch puts in os.environ
    # once it compiled) are not the container's: on a pool PID 1 points them into it, unless environment= sets them
    mine = {"HF_HOME": "/home/me/.cache/hf", "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor_me", "PATH": "/bin"}
    env = host_environment(config, layout, ports, private=True, base=mine)
    assert "HF_HOME" not in env and "TORCHINDUCTOR_CACHE_DIR" not in env and env["PATH"] == "/bin"
    pinned = replace(config, environment={**config.environment, "HF_HOME": "/data/hf"})
    assert host_environment(pinned, layout, ports, private=True, base=mine)["HF_HOME"] == "/data/hf"
    assert host_environment(fake_config, layout, ports, private=True, base=mine)["HF_HOME"] == "/home/me/.cache/hf"
    # the next attempt remakes the host's folder; the cache is kept
    (cache / "kept").write_text("x")
    create_host_root(config, "algo-2", tmp_path / "h2", None)
    assert (cache / "kept").read_text() == "x"


def test_clean_removes_pools_as_runs_but_not_one_a_running_job_took(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "sm-dist-local"
    pools = base / "warm-pools"
    kept = warm_pool.take(pools, REQUEST, "job-1")
    warm_pool.release(kept, REQUEST, "job-1")
    running = warm_pool.take(pools, _request(InstanceCount=1), "job-2")
    (base / "job-2" / "run").mkdir(parents=True)
    old = 1_000_000.0  # both unchanged for days
    for path in (pools / "job-1", pools / "job-1" / "pool.json", pools / "job-2", base / "job-2", base / "job-2" / "run"):
        os.utime(path, (old, old))
    monkeypatch.chdir(base / "job-2" / "run")  # job-2 runs: its host works in its folder
    removed, in_use = clean.clean(base, 7 * 86400)
    assert [r.path for r in removed] == [pools / "job-1"] and not (pools / "job-1").exists()
    assert {r.path for r in in_use} == {base / "job-2", pools / "job-2"} and running.folder is not None
    assert sorted(pools.iterdir()) == [pools / "job-2"]


def test_release_ends_a_local_jobs_pool_once(fake_config: LocalJobConfig, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`sm-dist release JOB` (what the plan's warm pool line says to run) on a local job: its kept hosts go;
    again, or on a job that ran on no pool, one line saying why."""
    from sm_dist import cli

    pools = tmp_path / "warm-pools"
    start = warm_pool.take(pools, REQUEST, "job-1")
    assert start.folder is not None
    create_host_root(replace(fake_config, warm_pool=start.folder), "algo-1", tmp_path / "job-1" / "run" / "hosts" / "algo-1",
                     None)
    warm_pool.release(start, REQUEST, "job-1")
    assert cli.main(["release", str(tmp_path / "job-1")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"released the warm pool of job-1 (local: its hosts' caches, {pools / 'job-1'}, removed")
    assert not (pools / "job-1").exists()
    assert cli.main(["release", str(tmp_path / "job-1")]) == 2
    assert capsys.readouterr().err.startswith("sm-dist release: error: job='")
    create_host_root(fake_config, "algo-1", tmp_path / "job-2" / "run" / "hosts" / "algo-1", None)
    assert cli.main(["release", str(tmp_path / "job-2")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "nothing to release: it ran on no warm pool (launched without keep_alive_s" in err[0]
    # in Python, the local handle as the cloud one: job.release()
    again = warm_pool.take(pools, REQUEST, "job-3")
    assert again.folder is not None
    run = tmp_path / "job-3" / "run"
    create_host_root(replace(fake_config, warm_pool=again.folder), "algo-1", run / "hosts" / "algo-1", None)
    warm_pool.release(again, REQUEST, "job-3", now=time.time() - 5)
    job = LocalJob(config=replace(fake_config, job_name="job-3"), run=RunRecord(Outcome(), Progress(), 0, [], run))
    assert job.release() == 5 and not again.folder.exists()
    with pytest.raises(ConfigError, match="^job='job-3': nothing to release: its hosts are kept no longer"):
        job.release()
