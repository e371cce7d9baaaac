"""Data channels in the rehearsal: a script reading SM_CHANNEL_TRAIN runs unmodified on 3 emulated hosts,
the channel replicated or sharded as SageMaker delivers it (docs/PLATFORM.md §1.9)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
BYO = Path(__file__).with_name("byo")


def dataset(tmp_path: Path, files: int = 7) -> Path:
    folder = tmp_path / "data"
    (folder / "more").mkdir(parents=True)
    for i in range(files):
        (folder / ("more" if i % 2 else "") / f"part-{i:02d}.csv").write_text("".join(f"{i},{j}\n" for j in range(i + 1)))
    return folder


def fit(tmp_path: Path, *flags: str) -> tuple[int, dict, str]:
    """`sm-dist fit read_channel.py --local --json` on 3 hosts (a later --instance-count wins)."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    shutil.copy(BYO / "read_channel.py", src)
    argv = [sys.executable, "-m", "sm_dist.cli", "fit", "read_channel.py", "--source-dir", str(src), "--local",
            "--instance-count", "3", "--local-root", str(tmp_path / "root"), "--json", *flags]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, check=False)
    if out.returncode == 2 and not out.stdout:  # refused before the job: one line on stderr, no summary
        return out.returncode, {}, out.stderr
    try:
        return out.returncode, json.loads(out.stdout), out.stderr
    except ValueError:
        pytest.fail(f"no JSON summary (exit {out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")


def seen(tmp_path: Path) -> dict[str, dict]:
    hosts = tmp_path / "root" / "run" / "hosts"
    return {h.name: json.loads(next((h / "output" / "data").glob("seen-*.json")).read_text()) for h in hosts.iterdir()}


def keys(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_replicated_and_sharded_channels_reach_the_hosts_as_sagemaker_delivers_them(tmp_path: Path) -> None:
    """train: every host gets every file; shard: each host a disjoint share, together every file."""
    data = dataset(tmp_path)
    code, summary, err = fit(tmp_path, "--input", f"train={data}",
                             "--input", f"shard={data},distribution=ShardedByS3Key,mode=FastFile")
    assert code == 0 and summary["status"] == "Completed", err[-3000:]
    found = seen(tmp_path)
    for host, what in found.items():
        assert what["files"] == keys(data) and what["rows"] == 28, host
        assert what["channel"] == "/opt/ml/input/data/train" and what["channels"] == ["code", "shard", "train"]
    shares = {host: what["others"]["shard"] for host, what in found.items()}
    everything = [k for share in shares.values() for k in share]
    assert sorted(everything) == keys(data) and len(set(everything)) == len(everything)  # disjoint, complete
    assert shares["algo-1"] == keys(data)[0::3] and shares["algo-2"] == keys(data)[1::3]  # sorted keys, round robin
    config = json.loads((tmp_path / "root/run/hosts/algo-3/input/config/inputdataconfig.json").read_text())
    assert config["train"] == {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated",
                               "RecordWrapperType": "None"}
    assert (config["shard"]["TrainingInputMode"], config["shard"]["S3DistributionType"]) == ("FastFile",
                                                                                            "ShardedByS3Key")


def test_an_s3_channel_needs_a_stand_in_and_says_so_before_anything_runs(tmp_path: Path) -> None:
    code, _, err = fit(tmp_path, "--input", "train=s3://team-data/train")
    assert code == 2 and "inputs.train='s3://team-data/train': local mode reads no AWS account by itself" in err
    assert "--local-data NAME=DIR" in err and "Traceback" not in err and not (tmp_path / "root").exists()
    data = dataset(tmp_path, files=2)
    code, summary, err = fit(tmp_path, "--input", "train=s3://team-data/train", "--local-data", f"train={data}",
                             "--instance-count", "2")
    assert code == 0, err[-3000:]
    assert {found["rows"] for found in seen(tmp_path).values()} == {3}
