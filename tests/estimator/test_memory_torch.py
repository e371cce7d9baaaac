"""The estimator's persistent bytes against what torch's FSDP2 and ZeroRedundancyOptimizer
really hold: 2 gloo ranks on CPU under torchrun (real processes)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sm_dist.estimator.memory import memory_breakdown

pytest.importorskip("torch")
WORKER = Path(__file__).with_name("fsdp_memory_worker.py")


def _measure(port: int) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(port), str(WORKER)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.slow
def test_estimator_bytes_match_what_torch_holds(port_factory: Callable[[], int]) -> None:
    measured = _measure(port_factory())
    world = measured["world"]
    by_cfg = {}
    for got in measured["results"]:
        by_cfg[(got["strategy"], got["precision"])] = got
        want = memory_breakdown(got["psi"], got["strategy"], got["precision"], world, world)
        for field in ("params", "grads", "optimizer"):
            assert got[field] == pytest.approx(getattr(want, field), rel=0.05), (got, field)
    # zero2 (reshard_after_forward=False) holds the whole model's bf16 working params from forward
    # to backward: the transient the estimator counts under "other"
    zero2, fsdp = by_cfg[("zero2", "mixed")], by_cfg[("fsdp", "mixed")]
    want = memory_breakdown(zero2["psi"], "zero2", "mixed", world, world)
    assert zero2["between_fwd_bwd"] == dict(want.other_parts)["unsharded_params_fwd_to_bwd"]
    assert fsdp["between_fwd_bwd"] == fsdp["params"]  # resharded after forward: only the fp32 shards
