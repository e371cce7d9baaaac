"""`sm-dist measure-memory --activations`: saved-tensor bytes per layer of the user's model next to the estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sm_dist import cli


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert cli.main(["measure-memory", *argv, "--activations", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_users_model_measured_per_layer_next_to_the_estimate(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    report = _run(capsys, "--model", "act_models:qwen2", "--precision", "mixed")
    assert "Decoder.config" in report["shape_source"]
    assert len(report["per_layer"]) == 2 and report["micro_batch"] == 2 and report["seq_len"] == 64
    for measured in report["per_layer"]:
        assert abs(report["estimated_per_layer"] / measured - 1) <= 0.15
    assert abs(report["ratio"] - 1) <= 0.15
    assert "MQA" in report["assumptions"] and "bf16 residual" in report["assumptions"]


@pytest.mark.slow
def test_table_and_full_checkpointing_of_a_model_without_config(capsys: pytest.CaptureFixture[str]) -> None:
    """The runtime's GPT has no Hugging Face config: its shape is read from the module."""
    argv = ["measure-memory", "--model", "sm_dist.tools.measure:tiny_gpt", "--activations", "--precision", "amp",
            "--activation-checkpointing", "full"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "shape read from the module" in out and "full recompute" in out
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert len(rows) == 4  # tiny_gpt's four blocks
    for _, measured, estimated, _ in rows:
        assert float(measured) == pytest.approx(float(estimated), rel=0.15)


@pytest.mark.parametrize("argv, words", [
    (["--activation-checkpointing", "some"], "activation_checkpointing='some'"),
    (["--precision", "fp8"], "precision"),
    (["--layers", "0"], "layers=0"),
])
def test_bad_arguments_give_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    assert cli.main(["measure-memory", "--model", "gpt2", "--activations", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
