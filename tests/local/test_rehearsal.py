"""The rehearsal is the job: a script sees in local mode what it sees in the cloud container.

`dump_env.py` (tests/local/byo) writes every variable it sees. Run on 10 emulated hosts — past
algo-9, where sorting host names as text and as numbers part — each host must see the names
ModelTrainer's own container sets (SageMaker SDK v3's environment.py, the reference), SageMaker's
host order, and `SM_CURRENT_HOST_RANK == GROUP_RANK`: the host rank SageMaker gives a script is the
node rank torch gives it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _modeltrainer import ONLY_MODELTRAINER, ONLY_SM_DIST, modeltrainer_env

import sm_dist
from sm_dist.local import mountns
from sm_dist.local.job import LocalJob
from sm_dist.local.options import LocalOptions

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
BYO = Path(__file__).with_name("byo")
TORCHRUN_NAMES = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}


def dump_envs(tmp_path: Path, hosts: int, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalJob, dict[str, dict[str, str]]]:
    """Run dump_env.py on `hosts` emulated hosts; (the job, host -> what its worker saw)."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(BYO / "dump_env.py", src)
    monkeypatch.chdir(tmp_path)  # a relative --local-root, as a user types it
    job = sm_dist.fit("dump_env.py", source_dir=str(src), local=True, instance_count=hosts, nproc_per_node=1,
                      hyperparameters={"model-name": "tiny", "epochs": 2},
                      local_options=LocalOptions(root="root", echo=False))
    assert job.status().status == "Completed", job.summary()
    seen = {}
    for folder in sorted((tmp_path / "root" / "run" / "hosts").iterdir()):
        [dump] = (folder / "output" / "data").glob("env-*.json")
        seen[folder.name] = json.loads(dump.read_text())
    assert len(seen) == hosts
    return job, seen


def reference_names(job: LocalJob, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> set[str]:
    """The SM_* names ModelTrainer's container would export for algo-1's files of this very job."""
    names = set(modeltrainer_env(job.root / "hosts" / "algo-1", tmp_path / "sm_training.env", monkeypatch))
    return names - ONLY_MODELTRAINER | ONLY_SM_DIST


def check_ranks(seen: dict[str, dict[str, str]]) -> None:
    order = sorted(seen)  # SageMaker's order: as text, algo-1, algo-10, algo-2, ...
    for host, env in seen.items():
        assert env["SM_CURRENT_HOST"] == host
        assert json.loads(env["SM_HOSTS"]) == order
        assert env["SM_CURRENT_HOST_RANK"] == env["GROUP_RANK"] == env["RANK"] == str(order.index(host)), host
    assert seen["algo-1"]["RANK"] == "0"


def test_ten_hosts_see_sagemakers_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if mountns.unshare_prefix() is None:
        pytest.skip("this machine allows no private mount namespace (`unshare --mount`): see the test below")
    job, seen = dump_envs(tmp_path, 10, monkeypatch)
    check_ranks(seen)
    expected = reference_names(job, monkeypatch, tmp_path)
    for host, env in seen.items():
        assert {k for k in env if k.startswith("SM_") and not k.startswith("SM_DIST_")} == expected, host
        assert TORCHRUN_NAMES <= set(env)
        # as in the cloud: /opt/ml paths, the first host by name, the platform's job name
        assert (env["SM_MODEL_DIR"], env["SM_CHANNEL_CODE"]) == ("/opt/ml/model", "/opt/ml/input/data/code")
        assert env["SM_MASTER_ADDR"] == env["MASTER_ADDR"] == "algo-1"
        assert env["TRAINING_JOB_NAME"] == job.name and json.loads(env["SM_HPS"]) == {"model-name": "tiny", "epochs": 2}
        assert json.loads(env["SM_TRAINING_ENV"])["job_name"] == job.name


def test_without_private_mounts_the_ranks_still_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the OS refuses `unshare`, hosts are loopback addresses and paths are remapped; the order
    holds (ten hosts: algo-10 sorts before algo-2)."""
    monkeypatch.setattr(mountns, "unshare_prefix", lambda: None)
    job, seen = dump_envs(tmp_path, 10, monkeypatch)
    check_ranks(seen)
    assert seen["algo-3"]["SM_MODEL_DIR"] == str(job.root / "hosts" / "algo-3" / "model")
    assert any("no host a private /opt/ml" in w for w in job.summary().warnings)
