"""A warm relaunch rehearsed: two local `fit` calls with keep_alive_s, the second on the first's pool.

The script stands in for a start-up that fetches something into HF_HOME (a hub download): the first job
writes it, the second, on the kept pool, finds it there; each host's PID 1 says warm or cold, and the
summary says which pool the job started on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sm_dist
from sm_dist.local.options import LocalOptions

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

SCRIPT = '''
import json, os, pathlib
hf = pathlib.Path(os.environ["HF_HOME"])
weights = hf / "hub" / "tiny-model.bin"
found = weights.read_text() if weights.exists() else None
if found is None:
    weights.parent.mkdir(parents=True, exist_ok=True)
    weights.write_text(os.environ["TRAINING_JOB_NAME"])
names = ("HF_HOME", "PIP_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
         "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY")
seen = {"found": found, **{n: os.environ.get(n) for n in names}}
out = pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"]) / "cache.json"
out.write_text(json.dumps(seen))
'''


def test_the_second_fit_starts_on_the_first_ones_kept_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)

    def fit(root: str) -> sm_dist.LocalJob:
        job = sm_dist.fit("probe.py", source_dir=str(src), local=True, instance_count=1, nproc_per_node=1,
                          keep_alive_s=600, local_options=LocalOptions(root=root, echo=False))
        assert job.status().status == "Completed", job.summary()
        return job

    first, second = fit("run-1"), fit("run-2")
    seen = [json.loads((job.model_dir().parent / "output" / "data" / "cache.json").read_text())
            for job in (first, second)]
    assert seen[0]["found"] is None and seen[1]["found"] == first.name  # the second found what the first left
    assert seen[1]["HF_HOME"] == "/opt/ml/sagemaker/warmpoolcache/huggingface" or \
        seen[1]["HF_HOME"].endswith("/run-2/run/hosts/algo-1/sagemaker/warmpoolcache/huggingface")
    assert seen[1]["TORCHINDUCTOR_CACHE_DIR"].endswith("warmpoolcache/torchinductor")
    assert str(first.summary()).count("warm pool       cold: no pool kept; this job's hosts are kept 600 s") == 1
    assert "warm pool       warm: on the hosts job " + first.name in str(second.summary())
    assert f"warm, left by job {first.name}" in "\n".join(second.logs())
    # the pool is kept again for the next job, under the second job's name
    assert [p.name for p in (tmp_path / "warm-pools").iterdir()] == [second.name]
