"""Every strategy trains for real on CPU (gloo, 2 and 4 processes) and matches one process.

Each rank takes its slice of the same global batch; the mean of the ranks' losses and the final
full weights must equal a single-process run on the whole batch. One spawn runs many
(strategy, precision) cases in sequence to keep process start-ups few.
"""

from __future__ import annotations

import pytest
import torch
from rt_spawn import free_port, run_ranks
from rt_workers import reference

from sm_dist.errors import ConfigError

STRATEGIES = ["ddp", "zero1", "zero2", "fsdp", "hsdp"]
HALF = [("mixed", s) for s in STRATEGIES] + [("amp", "ddp"), ("amp", "fsdp"), ("bf16", "ddp"), ("bf16", "zero1"),
                                             ("bf16", "fsdp")]
STEPS = 3


@pytest.fixture(scope="module")
def two_ranks() -> dict:
    """2 ranks: every strategy in fp32 and the half-precision modes."""
    runs = [[s, "fp32"] for s in STRATEGIES] + [[s, p] for p, s in HALF]
    results = run_ranks(2, "rt_workers:train", {"runs": runs, "steps": STEPS}, free_port())
    return {"ranks": results, "reference": reference(STEPS)}


def _close(got: list[float], want: list[float], rel: float) -> bool:
    return all(abs(g - w) <= rel * abs(w) for g, w in zip(got, want, strict=True))


def _weights_close(got: dict, want: dict, atol: float) -> bool:
    return all(torch.allclose(torch.tensor(got[k]), torch.tensor(v), atol=atol) for k, v in want.items())


@pytest.mark.slow
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_fp32_matches_single_process(two_ranks: dict, strategy: str) -> None:
    ref = two_ranks["reference"]
    for rank_result in two_ranks["ranks"]:
        got = rank_result[f"{strategy}/fp32"]
        assert _close(got["losses"], ref["losses"], 1e-5), (got["losses"], ref["losses"])
        assert _weights_close(got["weights"], ref["weights"], 1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "zero1"])
@pytest.mark.parametrize("precision", ["fp32", "mixed", "bf16"])
def test_replicas_hold_identical_weights(two_ranks: dict, strategy: str, precision: str) -> None:
    digests = {r[f"{strategy}/{precision}"]["local_digest"] for r in two_ranks["ranks"]}
    assert len(digests) == 1


@pytest.mark.slow
def test_sharded_strategies_hold_different_shards(two_ranks: dict) -> None:
    for strategy in ("zero2", "fsdp", "hsdp"):
        digests = {r[f"{strategy}/fp32"]["local_digest"] for r in two_ranks["ranks"]}
        assert len(digests) == 2, strategy


@pytest.mark.slow
@pytest.mark.parametrize("precision, strategy", HALF)
def test_half_precision_modes_track_fp32(two_ranks: dict, precision: str, strategy: str) -> None:
    ref = two_ranks["reference"]
    got = two_ranks["ranks"][0][f"{strategy}/{precision}"]
    assert _close(got["losses"], ref["losses"], 2e-2), (got["losses"], ref["losses"])
    assert got["losses"] != two_ranks["ranks"][0][f"{strategy}/fp32"]["losses"]  # really ran in half precision
    assert _weights_close(got["weights"], ref["weights"], 3e-2)


@pytest.mark.slow
def test_four_ranks_on_two_nodes() -> None:
    """4 processes as 2 nodes x 2: hsdp shards within a node and replicates across; clipped SGD."""
    runs = [[s, "fp32"] for s in STRATEGIES]
    results = run_ranks(4, "rt_workers:train", {"runs": runs, "steps": STEPS, "clip": 0.05, "optimizer": "sgd"},
                        free_port(), nodes=2)
    ref = reference(STEPS, clip=0.05, optimizer="sgd")
    for strategy in STRATEGIES:
        for rank_result in results:
            got = rank_result[f"{strategy}/fp32"]
            assert _close(got["losses"], ref["losses"], 1e-5), (strategy, got["losses"], ref["losses"])
            assert _weights_close(got["weights"], ref["weights"], 1e-5), strategy
    hsdp = [r["hsdp/fp32"]["local_digest"] for r in results]
    assert hsdp[0] == hsdp[2] and hsdp[1] == hsdp[3] and hsdp[0] != hsdp[1]  # replicated across nodes


@pytest.mark.slow
def test_accumulation_with_no_sync_and_clipping_under_sharding() -> None:
    """2 micro-batches per step with no_sync, clip to a small norm, SGD (clipping changes its step)."""
    clip = 0.05
    ref = reference(STEPS, clip=clip, optimizer="sgd")
    assert not _close(ref["losses"], reference(STEPS, optimizer="sgd")["losses"], 1e-3)  # clipping bites
    runs = [[s, "fp32"] for s in STRATEGIES]
    results = run_ranks(2, "rt_workers:train", {"runs": runs, "steps": STEPS, "accum": 2, "clip": clip,
                                                "optimizer": "sgd"}, free_port())
    for strategy in STRATEGIES:
        got = results[0][f"{strategy}/fp32"]
        assert _close(got["losses"], ref["losses"], 1e-5), (strategy, got["losses"], ref["losses"])
        assert _weights_close(got["weights"], ref["weights"], 1e-5), strategy
    # inside no_sync, DDP's gradients are still this rank's own (not yet averaged)
    assert results[0]["ddp/fp32"]["unsynced_grad_digest"] != results[1]["ddp/fp32"]["unsynced_grad_digest"]


@pytest.mark.slow
def test_dp_in_one_process() -> None:
    results = run_ranks(1, "rt_workers:train", {"runs": [["dp", "fp32"], ["dp", "mixed"]], "steps": STEPS},
                        free_port())
    ref = reference(STEPS)
    assert _close(results[0]["dp/fp32"]["losses"], ref["losses"], 1e-5)
    assert _close(results[0]["dp/mixed"]["losses"], ref["losses"], 2e-2)


def test_dp_refused_with_several_processes() -> None:
    from sm_dist import runtime

    environ = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    with pytest.raises(ConfigError, match="use ddp"):
        runtime.init(strategy="dp", environ=environ)


def test_unknown_strategy_suggests_a_name() -> None:
    from sm_dist.runtime.strategies import get_strategy

    with pytest.raises(ConfigError, match="did you mean 'fsdp'"):
        get_strategy("fsdb")
