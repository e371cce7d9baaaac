"""`sm-dist measure-memory`: real gloo processes, measured bytes next to the estimator's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sm_dist import cli

TINY_GPT = "sm_dist.tools.measure:tiny_gpt"  # ~12.8M parameters


def _measure(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert cli.main(["measure-memory", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _assert_agrees(report: dict, tolerance: float = 0.05) -> None:
    for name, row in report["strategies"].items():
        for kind, diff in row["relative_difference"].items():
            assert abs(diff) <= tolerance, (name, kind, row["measured_bytes"], row["estimated_bytes"])


@pytest.mark.slow
def test_estimator_agrees_at_world_size_2(capsys: pytest.CaptureFixture[str]) -> None:
    report = _measure(capsys, "--model", TINY_GPT, "--world-size", "2", "--strategy", "ddp,zero1,zero2,fsdp", "--steps", "1")
    assert report["param_count"] >= 10_000_000
    _assert_agrees(report)
    rows = report["strategies"]
    ddp, zero1, fsdp = rows["ddp"]["measured_bytes"], rows["zero1"]["measured_bytes"], rows["fsdp"]["measured_bytes"]
    assert ddp["params"] == 4 * report["param_count"]  # fp32, one full replica
    assert ddp["optimizer"] == pytest.approx(8 * report["param_count"], rel=1e-3)  # AdamW m and v
    assert zero1["optimizer"] == pytest.approx(ddp["optimizer"] / 2, rel=0.05)
    assert fsdp["params"] == pytest.approx(ddp["params"] / 2, rel=1e-3)
    assert all(len(row["per_rank"]) == 2 for row in rows.values())


@pytest.mark.slow
def test_estimator_agrees_at_world_size_4_in_mixed_precision(capsys: pytest.CaptureFixture[str]) -> None:
    report = _measure(capsys, "--model", TINY_GPT, "--world-size", "4", "--strategy", "zero1,fsdp",
                      "--precision", "mixed", "--steps", "1")
    _assert_agrees(report)
    zero1 = report["strategies"]["zero1"]["measured_bytes"]
    assert zero1["params"] == 2 * report["param_count"]  # bf16 working copy
    assert zero1["optimizer"] == pytest.approx(12 * report["param_count"] / 4, rel=0.05)  # fp32 master+m+v / N


@pytest.mark.slow
def test_module_function_without_input_uses_synthetic_gradients(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    report = _measure(capsys, "--model", "rt_workers:plain_mlp", "--world-size", "2", "--strategy", "ddp")
    params = 64 * 256 + 256 + 256 * 64 + 64
    row = report["strategies"]["ddp"]
    assert report["param_count"] == params
    assert row["measured_bytes"]["grads"] == 4 * params


@pytest.mark.slow
def test_zero1_estimate_accounts_for_one_dominant_tensor(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """ZeroRedundancyOptimizer hands out whole tensors: the rank owning the embedding holds its states."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    report = _measure(capsys, "--model", "rt_workers:embedding_heavy", "--world-size", "2", "--strategy", "zero1",
                      "--steps", "1")
    _assert_agrees(report)
    row = report["strategies"]["zero1"]
    assert row["measured_bytes"]["optimizer"] >= 8 * 50_000 * 256  # far above 8 * params / 2
    assert row["measured_bytes"]["optimizer"] > 0.9 * 8 * report["param_count"]


@pytest.mark.parametrize("argv, words", [
    (["--model", "gpt3"], "did you mean 'gpt2'"),
    (["--model", "no_such_module:f"], "importable module:function"),
    (["--model", TINY_GPT, "--strategy", "fsdb"], "did you mean 'fsdp'"),
    (["--model", TINY_GPT, "--world-size", "3", "--nodes", "2"], "nodes=2"),
    (["--model", TINY_GPT, "--strategy", "dp"], "world-size 1"),
])
def test_bad_arguments_fail_fast_with_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    assert cli.main(["measure-memory", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_repeated_strategy_flags_accumulate_like_estimate_cost() -> None:
    """`--strategy a --strategy b,c` measures a, b and c (it used to keep only the last flag)."""
    import argparse

    from sm_dist.tools import measure_cli
    from sm_dist.vocab import Strategy

    parser = argparse.ArgumentParser()
    measure_cli.register("measure-memory", parser)
    args = parser.parse_args(["--model", TINY_GPT, "--strategy", "ddp", "--strategy", "zero1,fsdp", "--strategy", "ddp"])
    strategies, _ = measure_cli._check(args)
    assert strategies == [Strategy.DDP, Strategy.ZERO1, Strategy.FSDP]
    default, _ = measure_cli._check(parser.parse_args(["--model", TINY_GPT]))
    assert [s.value for s in default] == measure_cli.DEFAULT_STRATEGIES.split(",")
