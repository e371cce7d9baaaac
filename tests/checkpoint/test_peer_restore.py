"""A restarted host's checkpoint folder under network isolation: made whole from the other hosts'
folders over the cluster network, never S3 (sm_dist.runtime.restore.peer_restore, docs/PLATFORM.md §1.7).

The decision (`answer`, `decide`) is a pure function of the hosts' listings; the restore itself runs
here as two hosts in threads against a real c10d TCPStore and real HTTP between their folders."""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from sm_dist.container import pid1_env, worker
from sm_dist.contract.container import NETWORK_ISOLATION_ENV
from sm_dist.runtime.restore import folder_restore as fr
from sm_dist.runtime.restore import peer_restore as pr
from sm_dist.runtime.restore.peer_restore import COPY, RESTORED, WRITTEN, Held

ORDER = ["algo-1", "algo-2"]
MANIFEST = "step-000000008/manifest.json"
SHARD = "step-000000008/model/__0_0.distcp"


def w(size: int, t: float) -> Held:
    return Held(size, t, WRITTEN)


def test_a_host_gets_what_rank_0_saved_on_another_host() -> None:
    """sm_dist's step folders are restored too (no S3 for the checkpointer either); a step folder whose
    manifest no host has (a save cut short) stays where it is."""
    shares = {"algo-1": {MANIFEST: w(10, 100), SHARD: w(64, 99), "snapshot.pt": w(7, 101),
                         "step-000000012/model/__0_0.distcp": w(64, 120)},
              "algo-2": {}}
    got = pr.decide("algo-2", shares, ORDER)
    assert sorted(got.fetch) == ["snapshot.pt", MANIFEST, SHARD]
    assert {host for host, _ in got.fetch.values()} == {"algo-1"} and got.delete == got.conflicts == []
    assert pr.decide("algo-1", shares, ORDER).fetch == {}  # the writer has it all


def test_what_a_writer_deleted_goes_from_the_others_and_their_own_files_stay() -> None:
    """Retention on algo-1 deleted step 8: algo-2's copies go (SageMaker mirrors the delete to S3), its
    own shard of that step stays (nobody fetches it: no manifest), a file it wrote itself stays."""
    shares = {"algo-1": {"step-000000012/manifest.json": w(10, 130)},
              "algo-2": {MANIFEST: Held(10, 100, COPY), SHARD: Held(64, 99, COPY),
                         "step-000000008/model/__1_0.distcp": w(64, 99), "notes.pt": w(3, 50)}}
    got = pr.decide("algo-2", shares, ORDER)
    assert got.delete == [MANIFEST, SHARD]
    assert list(got.fetch) == ["step-000000012/manifest.json"]
    assert "notes.pt" in pr.answer(shares, ORDER)  # and algo-1 fetches algo-2's own file
    assert list(pr.decide("algo-1", shares, ORDER).fetch) == ["notes.pt"]


def test_files_restored_at_job_start_stay_while_every_host_has_them() -> None:
    """SageMaker copied the same URI into every host: nothing to fetch. A host that lacks one deleted
    it (its script's retention), and the delete reached S3: the others delete theirs."""
    both = {"old/model.pt": Held(9, 10, RESTORED), "older/model.pt": Held(9, 5, RESTORED)}
    shares = {"algo-1": dict(both), "algo-2": {"old/model.pt": Held(9, 12, RESTORED)}}
    assert pr.decide("algo-2", shares, ORDER).fetch == {}
    assert pr.decide("algo-1", shares, ORDER).delete == ["older/model.pt"]
    assert pr.decide("algo-2", shares, ORDER).delete == []


def test_two_writers_of_one_name_the_newest_wins_on_every_host() -> None:
    """Hugging Face's save_on_each_node=True: S3 keeps the last upload; here the newest copy, the same
    answer on every host (it depends on the listings and the host order only)."""
    shares = {"algo-1": {"checkpoint-8/trainer_state.json": w(40, 200)},
              "algo-2": {"checkpoint-8/trainer_state.json": w(41, 210)}}
    assert pr.answer(shares, ORDER) == pr.answer(dict(reversed(list(shares.items()))), ORDER)
    older = pr.decide("algo-1", shares, ORDER)
    assert list(older.fetch) == older.conflicts == ["checkpoint-8/trainer_state.json"]
    assert pr.decide("algo-2", shares, ORDER).fetch == {}
    same = {h: {"a.json": w(40, 200 + i)} for i, h in enumerate(ORDER)}  # one second apart, one size: the same
    assert pr.decide("algo-1", same, ORDER).fetch == {}


def write(path: Path, data: bytes, when: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if when is not None:
        os.utime(path, (when, when))


def _restore_both(tmp_path: Path, round_key: str, endpoint: str) -> list[int]:
    codes: list[int] = []
    threads = [threading.Thread(target=lambda h=h: codes.append(fr.run_peers(
        tmp_path / h / "ckpt", endpoint, ORDER, round_key, h, "127.0.0.1", tmp_path / h / "state")))
        for h in ORDER]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def test_two_hosts_restore_each_other_over_http(tmp_path: Path) -> None:
    """What algo-1 saved reaches algo-2 with its bytes and time; a restored file both hold stays put;
    in a later round, what algo-1's retention deleted goes from algo-2 as well."""
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=30), wait_for_workers=False)
    endpoint = f"127.0.0.1:{store.port}"
    start = time.time() - 60
    for host in ORDER:
        write(tmp_path / host / "state" / "started", repr(start).encode())
        write(tmp_path / host / "ckpt" / "from-job-start.pt", b"restored", when=start - 100)
    one = tmp_path / "algo-1" / "ckpt"
    write(one / MANIFEST, b'{"step": 8}')
    write(one / SHARD, os.urandom(3 << 20))  # several chunks
    write(one / "step-000000008" / "model" / "a b%.pt.sagemaker-uploaded", b"")  # SageMaker's marker: not served
    assert _restore_both(tmp_path, "run-1", endpoint) == [0, 0]
    two = tmp_path / "algo-2" / "ckpt"
    for rel in (MANIFEST, SHARD):
        assert (two / rel).read_bytes() == (one / rel).read_bytes()
        assert abs((two / rel).stat().st_mtime - (one / rel).stat().st_mtime) < 1e-3
    assert sorted(p.name for p in two.rglob("*")) == sorted(p.name for p in one.rglob("*")
                                                            if not p.name.endswith(".sagemaker-uploaded"))
    assert set(pr.read_copies(tmp_path / "algo-2" / "state")) == {MANIFEST, SHARD}
    # algo-1 saved step 12 and its retention deleted step 8; workers restart again
    write(one / "step-000000012" / "manifest.json", b'{"step": 12}')
    (one / MANIFEST).unlink()
    (one / SHARD).unlink()
    assert _restore_both(tmp_path, "run-2", endpoint) == [0, 0]
    assert not (two / MANIFEST).exists() and not (two / SHARD).exists()
    assert (two / "step-000000012" / "manifest.json").read_bytes() == b'{"step": 12}'
    assert (two / "from-job-start.pt").read_bytes() == b"restored"
    assert not [p for p in two.rglob("*") if ".sm-dist-restore" in p.name]  # no half-written file left


def test_a_peer_that_does_not_answer_fails_the_restore_with_one_line(tmp_path: Path) -> None:
    share = pr.Share("127.0.0.1:9", "token", {"snapshot.pt": w(3, 1)})  # the discard port: nobody serves
    with pytest.raises(pr.PeerRestoreFailed, match=r"^cannot fetch snapshot.pt from 127.0.0.1:9: "):
        pr.fetch(share, "snapshot.pt", share.files["snapshot.pt"], tmp_path / "snapshot.pt")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("isolated", [False, True], ids=["open", "isolated"])
def test_the_worker_asks_for_the_peer_restore_under_isolation(tmp_path: Path, isolated: bool) -> None:
    """A function entry restores too under isolation: sm_dist's checkpointer cannot reach S3 either."""
    from sm_dist.jobspec import JobSpec

    config = tmp_path / "input" / "config"
    write(config / "checkpointconfig.json", b'{"LocalPath": "/opt/ml/checkpoints", "S3Uri": "s3://b/ckpt"}')
    env = {"SM_DIST_OPT_ML": str(tmp_path), worker.STATE_ENV: str(tmp_path / "state"), "SM_CURRENT_HOST": "algo-2",
           worker.HOST_ADDR_ENV: "algo-2", **({NETWORK_ISOLATION_ENV: "1"} if isolated else {})}
    command = worker.restore_command(env)
    assert command is not None and ("--peers" in command) is isolated
    if isolated:
        assert command[command.index("--address") + 1] == "algo-2"
        assert command[command.index("--state") + 1] == str(tmp_path / "state")
    spec = JobSpec.from_dict({"entry": "pkg.train:main", "strategy": "ddp", "precision": "fp32",
                              "checkpoint": {"mode": "sagemaker-sync", "uri": "s3://b/ckpt"}})
    assert pid1_env.restores_folder(spec, isolated) is isolated


def test_the_isolated_checkpointer_never_asks_s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking S3 would fail (no credentials; in the cloud after the metadata service's timeouts) and
    stop retention: the upload markers say what SageMaker uploaded."""
    import torch
    from torch import nn

    from sm_dist.contract.checkpoint import step_dirname
    from sm_dist.runtime.checkpoint import Checkpointer, SageMakerSyncStorage
    from sm_dist.runtime.checkpoint.retention import apply_retention

    monkeypatch.setenv(NETWORK_ISOLATION_ENV, "1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")  # were S3 asked, it would fail
    root = tmp_path / "checkpoints"
    storage = SageMakerSyncStorage(root, s3_uri="s3://team-bucket/ckpt")
    model = nn.Linear(4, 2)
    with Checkpointer(storage=storage, keep=None) as ckpt:
        for step in (1, 2, 3):
            ckpt.save(step, model=model, optimizer=torch.optim.SGD(model.parameters()))
    assert not storage.is_durable(3)
    for path in list((root / step_dirname(3)).rglob("*")):
        if path.is_file():
            path.with_name(path.name + ".sagemaker-uploaded").touch()
    assert storage.is_durable(3) and apply_retention(storage, 2, newest=3) == [1]
