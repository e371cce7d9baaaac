"""LaunchConfig refuses bad input with field, value and fix; config files reject unknown keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from sm_dist.errors import ConfigError
from sm_dist.planning.config import LaunchConfig, load_config_file
from sm_dist.vocab import Strategy


def make(source_dir: Path, **kw):
    return LaunchConfig(entry="train.py", instance_type="ml.g5.xlarge", source_dir=str(source_dir), **kw)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"strategy": "fsdb"}, "strategy"),
        ({"instance_count": 0}, "instance_count"),
        ({"checkpoint_s3_uri": "/tmp/ck"}, "checkpoint_s3_uri"),
        ({"params": 7e9, "model": "llama2-7b"}, "params"),
        ({"max_cost_usd": -5}, "max_cost_usd"),
        ({"retry_attempts": 31}, "retry_attempts"),
        ({"inputs": {"code": "s3://b/x"}}, "inputs"),
        ({"inputs": {"train": "/local/data"}}, "inputs.train"),
        ({"subnets": ["subnet-1"]}, "subnets"),
        ({"checkpoint_keep": 1}, "checkpoint_keep"),
        ({"checkpoint_mode": "cloud"}, "checkpoint_mode"),
        ({"job_name": "bad_name"}, "job_name"),
    ],
)
def test_bad_values(source_dir: Path, kw, field) -> None:
    with pytest.raises(ConfigError) as err:
        make(source_dir, **kw)
    assert err.value.field == field and err.value.fix


def test_auto_and_enums(source_dir: Path) -> None:
    assert make(source_dir, strategy="AUTO").strategy == "auto"
    assert make(source_dir, strategy="fsdp").strategy is Strategy.FSDP
    assert make(source_dir, subnets=["s"], security_group_ids=["g"]).subnets == ("s",)


def test_unknown_key_suggests(source_dir: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'instance_count'"):
        LaunchConfig.from_mapping({"entry": "t.py", "instance_type": "ml.g5.xlarge", "instance_cont": 2})


def test_missing_source_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="source_dir"):
        make(tmp_path / "nope")


def test_yaml_and_toml_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("entry: train.py\ninstance_count: 2\nhyperparameters:\n  lr: 0.1\n")
    (tmp_path / "a.toml").write_text('entry = "train.py"\ninstance_count = 2\n[hyperparameters]\nlr = 0.1\n')
    assert load_config_file(tmp_path / "a.yaml") == load_config_file(tmp_path / "a.toml")
    (tmp_path / "a.json").write_text("{}")
    with pytest.raises(ConfigError, match=".yaml"):
        load_config_file(tmp_path / "a.json")
    (tmp_path / "b.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config_file(tmp_path / "b.yaml")


def test_paths_in_a_config_file_are_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "job.yaml").write_text("source_dir: .\nhf_config: cfg/config.json\n")
    data = load_config_file(tmp_path / "proj" / "job.yaml")
    assert Path(data["source_dir"]) == tmp_path / "proj" and data["hf_config"] == str(tmp_path / "proj" / "cfg/config.json")


def test_counts_are_read_as_estimate_cost_reads_them(tmp_path: Path) -> None:
    """`params: 7B` and `tokens: 2e12` in a file (YAML reads 2e12 as text) or `--params 7B` as a flag: what
    `sm-dist estimate-cost` took, `fit` takes (both were refused, the second naming 2e12 as its example)."""
    (tmp_path / "train.py").write_text("")
    (tmp_path / "job.yaml").write_text("entry: train.py\ninstance_type: ml.g5.xlarge\nparams: 7B\ntokens: 2e12\n")
    data = load_config_file(tmp_path / "job.yaml")
    assert data["tokens"] == "2e12"  # the YAML 1.1 reading this guards against
    config = LaunchConfig.from_mapping(data)
    assert (config.params, config.tokens) == (7e9, 2e12)
    from sm_dist.cli import build_parser

    args = build_parser("fit").parse_args(["train.py", "--params", "1.5T", "--tokens", "300B"])
    assert make(tmp_path, params=args.params, tokens=args.tokens).params == 1.5e12
    with pytest.raises(ConfigError, match=r"^params='7Q': expected a positive number like 7e9 or 7B"):
        make(tmp_path, params="7Q")
