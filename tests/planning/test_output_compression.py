"""OutputDataConfig.CompressionType: a large model's weights are uploaded as they are, not gzipped in the
billed Uploading phase (docs/PLATFORM.md §1.1); output_compression= / --output-compression choose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _project import ROLE_ARN

import sm_dist
from sm_dist import cli
from sm_dist.errors import ConfigError
from sm_dist.planning.request import UNCOMPRESSED_FROM_BYTES, compression_type

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CLOUD = dict(instance_type="ml.p4d.24xlarge", instance_count=2, role=ROLE_ARN, region="us-east-1",
             output_s3_uri="s3://team-bucket/out", max_runtime_s=3600)


def _compression(source_dir: Path, **settings: object) -> str:
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), **{**CLOUD, "strategy": "fsdp", **settings})
    assert plan.request["OutputDataConfig"]["CompressionType"] in ("GZIP", "NONE")  # botocore's OutputCompressionType
    return str(plan.request["OutputDataConfig"]["CompressionType"])


def test_a_7b_models_weights_are_uploaded_uncompressed_and_a_small_ones_gzipped(source_dir: Path) -> None:
    assert _compression(source_dir, params=7e9) == "NONE"  # 28 GB of fp32 weights
    assert _compression(source_dir, params=1e8) == "GZIP"  # 0.4 GB
    assert _compression(source_dir, strategy="ddp") == "GZIP"  # size unknown: the platform's default
    assert _compression(source_dir, params=7e9, output_compression="gzip") == "GZIP"  # asked for
    assert _compression(source_dir, strategy="ddp", output_compression="NONE") == "NONE"
    plan = sm_dist.plan("train.py", source_dir=str(source_dir), params=7e9, strategy="fsdp", **CLOUD)
    assert "(model/ uploaded as it is, uncompressed)" in str(plan)


def test_auto_turns_uncompressed_at_one_gib_of_weights() -> None:
    fp32_gib = UNCOMPRESSED_FROM_BYTES // 4
    assert compression_type("auto", fp32_gib, "fp32") == "NONE"
    assert compression_type("auto", fp32_gib - 1, "fp32") == "GZIP"
    assert compression_type("auto", fp32_gib, "bf16") == "GZIP"  # half the bytes
    assert compression_type("auto", None, "fp32") == "GZIP"


def test_a_bad_value_is_one_line_naming_the_field(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match="output_compression='zip': expected gzip, none or auto"):
        sm_dist.plan("train.py", source_dir=str(source_dir), output_compression="zip", **CLOUD)


def test_the_cli_flag(source_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fit", "train.py", "--source-dir", str(source_dir), "--instance-type", CLOUD["instance_type"],
            "--role", ROLE_ARN, "--region", "us-east-1", "--output-s3-uri", "s3://team-bucket/out",
            "--max-runtime-s", "3600", "--output-compression", "none", "--dry-run", "--json"]
    assert cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["request"]["OutputDataConfig"]["CompressionType"] == "NONE"
