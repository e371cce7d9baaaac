"""`sm-dist estimate-cost`: output, bad input (one line, exit 2), and a light import world."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sm_dist.cli import main
from sm_dist.errors import ConfigError
from sm_dist.estimator.cli import parse_counts, parse_number

HEAVY = ("torch", "boto3", "botocore", "sagemaker", "numpy")
LLAMA = ["estimate-cost", "--model", "llama2-7b", "--tokens", "2e12", "--instance-type", "ml.p4d.24xlarge",
         "--instance-type", "ml.p5.48xlarge", "--instance-type", "ml.g5.48xlarge"]


def test_table_has_rows_recommendation_and_assumptions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(LLAMA) == 0
    out = capsys.readouterr().out
    assert "<- recommended" in out and "Recommendation: " in out
    for assumption in ("MFU", "prices 2025-06", "start-up", "spot:"):
        assert assumption in out


def test_json_is_one_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*LLAMA, "--instance-count", "1-4", "--strategy", "fsdp", "--strategy", "ddp", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["rows"]) == 3 * 4 * 2
    assert data["recommendation"]["strategy"] == "fsdp"


def test_a_slurm_estimate_says_which_rates_priced_it(capsys: pytest.CaptureFixture[str]) -> None:
    """HyperPod's per-instance rates are not in the price table (docs/PLATFORM.md §12): the table and the JSON say
    that the dollars are SageMaker training's rates, a stand-in."""
    assert main([*LLAMA, "--slurm"]) == 0
    table = capsys.readouterr().out
    assert table.rstrip().splitlines()[-1].startswith("prices: SageMaker training's on-demand rates for the instance "
                                                      "type, a stand-in: HyperPod's per-instance rates are not")
    assert main([*LLAMA, "--slurm", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["price_basis"].startswith("SageMaker training's on-demand rates") and data["rows"]
    assert main([*LLAMA, "--json"]) == 0
    assert "price_basis" not in json.loads(capsys.readouterr().out)  # a SageMaker estimate's rates are its own


def test_hf_config_and_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                                  "vocab_size": 50257, "n_positions": 1024}))
    code = main(["estimate-cost", "--hf-config", str(config), "--samples", "1e6", "--epochs", "2",
                 "--instance-type", "ml.g5.xlarge", "--instance-count", "1", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["params"] == 124_439_808 and data["model"]["tokens"] == 2 * 10**6 * 1024


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--instance-type", "ml.p4.24xlarge"], "did you mean 'ml.p4d.24xlarge'"),
        (["--instance-count", "0"], "--instance-count"),
        (["--instance-count", "8-2"], "low-high"),
        (["--region", "eu-west-1"], "region='eu-west-1'"),
        (["--mfu", "-0.3"], "--mfu"),
        (["--precision", "fp17"], "precision"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(extra: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*LLAMA, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["estimate-cost", "--model", "llama2-7b"], "tokens"),
        (["estimate-cost", "--model", "lama2-7b", "--tokens", "1e9"], "did you mean 'llama2-7b'"),
        (["estimate-cost", "--params", "-5", "--tokens", "1e9"], "--params"),
        (["estimate-cost", "--hf-config", "{config}", "--tokens", "1e9"], "hf_config"),
    ],
)
def test_missing_or_wrong_model_input(argv: list[str], words: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{oops")
    assert main([a.replace("{config}", str(bad)) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err


def test_number_and_count_parsing() -> None:
    assert parse_number("--params", "7B") == 7_000_000_000
    assert parse_number("--tokens", "2e12") == 2 * 10**12
    assert parse_number("--mfu", "0.4", integer=False) == 0.4
    assert parse_counts(["1-3", "8,16"]) == [1, 2, 3, 8, 16]
    for bad in ("x", "0", "nan"):
        with pytest.raises(ConfigError):
            parse_number("--tokens", bad)


@pytest.mark.slow
def test_a_full_run_imports_nothing_heavy() -> None:
    code = (
        "import sys, sm_dist.cli\n"
        f"rc = sm_dist.cli.main({[*LLAMA, '--instance-type', 'all', '--json']!r})\n"
        "import json\n"
        "print(json.dumps([rc, sorted(sys.modules)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rc, modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc == 0
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY) == []
