"""The split-resume check's list of checkpoints written outside the synced folder, on two fake hosts."""

from __future__ import annotations

import tempfile
from pathlib import Path

from sm_dist.container import outside_files
from sm_dist.contract.container import OPT_ML_ENV


def _host(job: Path, name: str) -> dict[str, str]:
    """An emulated host as local mode lays it out: its /opt/ml and its own TMPDIR under the job's folder,
    a checkpoint in its checkpoint folder and one the script saved in its temporary folder."""
    root = job / name / "opt" / "ml"
    (root / "checkpoints" / "checkpoint-2").mkdir(parents=True)
    (root / "checkpoints" / "checkpoint-2" / "model.safetensors").write_bytes(b"w")
    tmp = job / name / "tmp"
    tmp.mkdir(parents=True)
    (tmp / "snapshot.pt").write_bytes(b"s" * 3)
    return {OPT_ML_ENV: str(root), "TMPDIR": str(tmp)}


def test_each_host_names_only_its_own_files_outside_its_checkpoint_folder(tmp_path: Path) -> None:
    job = tmp_path / "job"
    hosts = {name: _host(job, name) for name in ("algo-1", "algo-2")}
    for name, env in hosts.items():
        found = outside_files.find(0.0, Path("/opt/ml/checkpoints"), work_dir=job / name / "code", env=env)
        assert [f.path for f in found] == [str(job / name / "tmp" / "snapshot.pt")]
        assert [f.key() for f in found] == ["the temporary folder: snapshot.pt"]  # the hosts' lists compare equal


def test_the_checkpoint_folder_under_the_temporary_folder_is_never_outside(tmp_path: Path) -> None:
    """A temporary folder that holds the host's folders (the job's root under a shared /tmp): its
    checkpoint folder, by its container path or another path to the same folder, is skipped."""
    env = _host(tmp_path, "algo-1")
    env["TMPDIR"] = str(tmp_path)
    real = tmp_path / "algo-1" / "opt" / "ml" / "checkpoints"
    mounted = tmp_path.parent / f"{tmp_path.name}-mount"
    mounted.symlink_to(real, target_is_directory=True)  # a bind mount's stand-in: the same folder
    for synced in (Path("/opt/ml/checkpoints"), mounted, real):
        found = outside_files.find(0.0, synced, work_dir=tmp_path / "code", env=env)
        assert [f.rel for f in found] == ["algo-1/tmp/snapshot.pt"], synced
    mounted.unlink()


def test_a_local_host_without_a_temporary_folder_of_its_own_does_not_walk_the_shared_one() -> None:
    assert outside_files.host_temp_dir({OPT_ML_ENV: "/x/algo-1/opt/ml"}) is None
    assert outside_files.host_temp_dir({OPT_ML_ENV: "/x/algo-1/opt/ml", "TMPDIR": "/x/algo-1/tmp"}) == Path(
        "/x/algo-1/tmp")
    assert outside_files.host_temp_dir({}) == Path(tempfile.gettempdir())  # the cloud: the container's own /tmp


def test_files_older_than_the_start_are_left_out(tmp_path: Path) -> None:
    env = _host(tmp_path, "algo-1")
    future = (tmp_path / "algo-1" / "tmp" / "snapshot.pt").stat().st_mtime + 60
    assert outside_files.find(future, Path("/opt/ml/checkpoints"), work_dir=tmp_path / "code", env=env) == []
