"""`sm-dist fit` local-mode flags and the printed summary."""

from __future__ import annotations

import argparse

import pytest

from sm_dist.errors import ConfigError
from sm_dist.local.cli import add_local_flags, check_local_flags, run_options
from sm_dist.local.summary import render_summary


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--local", action="store_true")
    parser.add_argument("--json", action="store_true")
    add_local_flags(parser)
    return parser.parse_args(argv)


def test_flags_parse_and_need_local() -> None:
    args = _parse(["--local", "--chaos", "kill:5", "--chaos", "s3-faults", "--verify"])
    assert args.chaos == ["kill:5", "s3-faults"] and args.verify
    check_local_flags(args)
    with pytest.raises(ConfigError, match="--chaos"):
        check_local_flags(_parse(["--chaos", "kill:5"]))
    with pytest.raises(ConfigError, match="--local-checkpoints"):
        check_local_flags(_parse(["--local-checkpoints", "/tmp/x"]))


def test_flags_become_run_options(tmp_path) -> None:
    options = run_options(_parse(["--local", "--chaos", "kill:5", "--local-checkpoints", str(tmp_path),
                                  "--grace-seconds", "9"]))
    assert options == {"chaos": ("kill:5",), "verify": False, "root": None, "checkpoint_uri": str(tmp_path.resolve()),
                       "grace_seconds": 9.0}
    with pytest.raises(ConfigError, match="--grace-seconds"):
        check_local_flags(_parse(["--grace-seconds", "9"]))


def test_local_mode_does_not_call_back_into_the_facade() -> None:
    """The backends are peers: sm_dist.local never imports sm_dist.launch.api (nor launch.cli), at
    module level or inside a function."""
    import ast
    from pathlib import Path

    import sm_dist.local

    for path in Path(sm_dist.local.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            imported = names + ([f"{node.module}.{a.name}" for a in node.names]
                                if isinstance(node, ast.ImportFrom) else [])
            assert not any(n in ("sm_dist.launch.api", "sm_dist.launch.cli") for n in imported), path.name


def test_summary_text() -> None:
    summary = {
        "job_name": "j", "status": "Completed", "hosts": 2, "processes_per_host": 2, "wall_seconds": 30.0,
        "steps": 12, "chaos": ["kill:6"], "chaos_fired": ["kill:6"], "restarts": 1, "in_job_restarts": 1,
        "job_restarts": 0, "resumed_from": [4], "model_sha256": "ab" * 32, "verified": True,
        "checkpoint_uri": "s3://sm-dist-local/j/run/checkpoints", "failures": {}, "estimate_usd": None,
        "cost": {"local_usd": 0.0, "sagemaker_usd": 0.0235, "instance_count": 2, "instance_type": "ml.g5.xlarge",
                 "usd_per_hour": 1.408, "price_date": "2025-06"},
    }
    text = render_summary(summary)
    assert "resumed from    step 4" in text and "identical to the uninterrupted run" in text
    assert "$0.0235" in text and "2 × ml.g5.xlarge" in text
    failed = render_summary({**summary, "status": "Failed", "verified": None, "failures": {"algo-2": "x\nboom"},
                             "chaos": ["kill:6", "sigterm:99"]})
    assert "failure algo-2: boom" in failed and "use --verify" in failed and "never fired: sigterm:99" in failed
