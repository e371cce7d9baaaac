"""Entrypoint flags: SageMaker's `--key value` style, null/true/false values, unknown flags."""

from __future__ import annotations

import argparse

import pytest

from sm_dist.errors import ConfigError
from sm_dist.runtime.entry import build_parser
from sm_dist.runtime.train_args import (
    normalize_argv,
    parse_flags,
    parse_hyperparameters,
)


def _parser() -> argparse.ArgumentParser:
    return build_parser("t", lambda g: g.add_argument("--dataset-size", type=int, default=10), batch_size=4, lr=0.1)


def test_defaults_leave_run_settings_to_the_job_spec() -> None:
    args = parse_flags(_parser(), [])
    assert (args.strategy, args.precision, args.seed) == (None, None, None)
    assert (args.batch_size, args.lr, args.epochs, args.steps, args.clip) == (4, 0.1, 1, None, 1.0)
    assert (args.checkpoint_dir, args.checkpoint_interval_steps, args.keep, args.async_checkpoint) == (None, None, None, None)


def test_sagemaker_style_underscores_json_values() -> None:
    # What SageMaker's torchrun driver passes for {"batch_size": 8, "async_checkpoint": True, "clip": None, ...}
    argv = ["--batch_size", "8", "--async_checkpoint", "true", "--clip", "null", "--dataset_size=20",
            "--strategy", "fsdp", "--checkpoint_interval_steps", "5"]
    args = parse_flags(_parser(), argv)
    assert (args.batch_size, args.async_checkpoint, args.clip, args.dataset_size) == (8, True, None, 20)
    assert (args.strategy, args.checkpoint_interval_steps) == ("fsdp", 5)


def test_bare_async_checkpoint_flag_means_true() -> None:
    assert parse_flags(_parser(), ["--async-checkpoint"]).async_checkpoint is True
    assert parse_flags(_parser(), ["--async-checkpoint", "false"]).async_checkpoint is False


def test_legacy_local_rank_is_dropped() -> None:
    assert normalize_argv(["--local-rank", "1", "--steps", "3", "--local_rank=0"]) == ["--steps", "3"]


def test_unknown_flag_is_a_config_error_with_suggestion() -> None:
    with pytest.raises(ConfigError) as err:
        parse_flags(_parser(), ["--batch-sise", "3"])
    assert err.value.field == "argument" and "--batch-size" in str(err.value)


def test_no_abbreviations() -> None:
    # `--batch 3` must not silently become --batch-size: hyperparameters are full names.
    with pytest.raises(ConfigError):
        parse_flags(_parser(), ["--batch", "3"])


def test_checkpoint_dir_and_uri_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        parse_flags(_parser(), ["--checkpoint-dir", "/tmp/a", "--checkpoint-uri", "s3://b/p"])


def test_hyperparameters_decoded_like_sm_hps() -> None:
    argv = ["--lr", "0.01", "--layers", "[1, 2]", "--name", "it", "--flag", "--with-dash=true", "--neg", "-3"]
    assert parse_hyperparameters(argv) == {
        "lr": 0.01, "layers": [1, 2], "name": "it", "flag": True, "with_dash": True, "neg": -3,
    }


def test_hyperparameters_reject_positional_values() -> None:
    with pytest.raises(ConfigError):
        parse_hyperparameters(["stray"])
