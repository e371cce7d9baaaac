"""`sm-dist fit` local-mode flags and the printed summary."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest

from sm_dist.errors import ConfigError
from sm_dist.local.cli import add_local_flags, check_local_flags, run_options
from sm_dist.local.cost import LocalCost
from sm_dist.local.options import LocalOptions
from sm_dist.local.summary import LocalSummary, StepsWentBack


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
    assert options == LocalOptions(chaos=("kill:5",), checkpoint_uri=str(tmp_path.resolve()), grace_seconds=9.0,
                                   view=True)
    assert run_options(_parse(["--local", "--logs"])).view is False
    with pytest.raises(ConfigError, match="--grace-seconds"):
        check_local_flags(_parse(["--grace-seconds", "9"]))


def _cost(sagemaker_usd: float | None, instance_type: str = "ml.g5.xlarge") -> LocalCost:
    return LocalCost(local_usd=0.0, instance_type=instance_type, instance_count=2, billable_seconds=60.0,
                     usd_per_hour=1.408 if sagemaker_usd else None, sagemaker_usd=sagemaker_usd,
                     price_date="2025-06" if sagemaker_usd else None, price_source=None)


def test_summary_text() -> None:
    summary = LocalSummary(
        job_name="j", status="Completed", hosts=2, processes_per_host=2, wall_seconds=30.0, steps=12,
        chaos=("kill:6",), chaos_fired=("kill:6",), restarts=1, in_job_restarts=1, job_restarts=0, resumed_from=(4,),
        model_sha256="ab" * 32, verified=True, verify_result="identical",
        verify_detail="model sha256 abab… in both runs", checkpoint_uri="s3://sm-dist-local/j/run/checkpoints",
        cost=_cost(0.0235),
    )
    text = str(summary)
    assert "resumed from    step 4" in text and "identical to the uninterrupted run" in text
    assert "$0.0235" in text and "2 × ml.g5.xlarge" in text
    failed = str(replace(summary, status="Failed", verified=None, verify_result=None,
                         failures={"algo-2": "boom\nlogs: x"}, chaos=("kill:6", "sigterm:99")))
    assert "failure algo-2: boom" in failed and "use --verify" in failed and "NEVER FIRED: sigterm:99" in failed
    data = summary.to_dict()
    assert data["chaos"] == ["kill:6"] and data["cost"]["sagemaker_usd"] == 0.0235 and data["chaos_missed"] == []
    assert json.loads(json.dumps(data)) == data


def test_summary_says_unknown_and_cannot_compare() -> None:
    """A script that prints no sm_dist line: unknown steps and hash, no invented figure; steps that
    went back show as such; the worker's own error and the logs folder on failure; warnings last."""
    summary = LocalSummary(
        job_name="j", status="Failed", hosts=2, processes_per_host=1, wall_seconds=9.0, steps=None,
        chaos=("kill:3s",), chaos_fired=("kill:3s",), restarts=1, in_job_restarts=1, job_restarts=0,
        verify_result="cannot compare", verify_detail="no weight file",
        failures={"algo-1": "torchrun exited with code 1\ntraceback : To enable traceback see: x"},
        error="ValueError: boom at step 3  (algo-2, rank 1)", logs="/r/run/logs",
        warnings=("never saw a process group on rank 0 on algo-1",), cost=_cost(None, "ml.x"),
    )
    text = str(summary)
    assert "steps           unknown" in text and "model sha256    unknown" in text
    assert 'steps           unknown (no step lines in the logs: print "[sm_dist] step=N" on rank 0, or draw a tqdm bar)' in text
    assert "resumed from    unknown" in text and "verified        cannot compare (no weight file)" in text
    assert "error           ValueError: boom at step 3  (algo-2, rank 1)" in text and "To enable" not in text
    assert "logs            /r/run/logs" in text and text.splitlines()[-1].startswith("  WARNING")
    back = str(replace(summary, steps=7, steps_went_back=(StepsWentBack("algo-1", 7, 5),)))
    assert "resumed from    steps went back on algo-1: 7 → 5" in back


def test_the_error_first_with_the_users_file_and_line_then_each_hosts_own_outcome() -> None:
    """What a user reads first after a script's exception: the error, where in their code, host and
    rank and why it was not restarted; then one line per host, its own; the same in the JSON."""
    detail = {"type": "ValueError", "message": "shape mismatch in batch 3 on rank 1", "file": "raises.py", "line": 22,
              "function": "check_batch", "code": 'raise ValueError(f"shape mismatch in batch {step} on rank {rank}")',
              "host": "algo-3", "rank": 2, "text": "ValueError: shape mismatch in batch 3 on rank 1",
              "not_restarted": "not restarted: a restart cannot fix it"}
    summary = LocalSummary(
        job_name="j", status="Failed", hosts=3, processes_per_host=1, wall_seconds=12.0, cost=_cost(0.01),
        error="ValueError: shape mismatch in batch 3 on rank 1  at raises.py:22 in check_batch  (algo-3, rank 2)",
        error_detail=detail, logs="/r/run/logs", exit_codes={"algo-1": 143, "algo-2": 143, "algo-3": 1},
        host_outcomes={"algo-1": "stopped after algo-3 failed", "algo-2": "stopped after algo-3 failed",
                       "algo-3": "exit 1: ValueError: shape mismatch in batch 3 on rank 1  at raises.py:22 in "
                                 "check_batch  (rank 2)"},
    )
    lines = str(summary).splitlines()
    assert lines[1:7] == [
        "  error           ValueError: shape mismatch in batch 3 on rank 1",
        '                  at raises.py:22 in check_batch: raise ValueError(f"shape mismatch in batch {step} on rank {rank}")',
        "                  on algo-3, rank 2; not restarted: a restart cannot fix it",
        "  hosts           algo-1 stopped after algo-3 failed",
        "                  algo-2 stopped after algo-3 failed",
        "                  algo-3 exit 1: ValueError: shape mismatch in batch 3 on rank 1  at raises.py:22 in check_batch  (rank 2)",
    ]
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["error_detail"] == detail and data["exit_codes"]["algo-3"] == 1
    assert data["host_outcomes"]["algo-1"] == "stopped after algo-3 failed"
    assert "raises.py:22" in summary._repr_html_()  # the notebook shows the same lines


def test_a_difference_says_whether_the_resume_or_the_script_is_to_blame() -> None:
    """Two uninterrupted runs that differ: the script is not reproducible (no resume can match it);
    two that agree while the fault run differs: the resume."""
    from sm_dist.local.verify import DIFFERS, IDENTICAL, NOT_REPRODUCIBLE, RESUME, Verification, explain

    found = Verification(result=DIFFERS, detail="model sha256 aaa… vs bbb…")
    no_fault = explain(found, fired=False, again=None)
    assert no_fault.cause == NOT_REPRODUCIBLE and "both runs were uninterrupted" in (no_fault.cause_detail or "")
    script = explain(found, fired=True, again=Verification(result=DIFFERS, detail="model sha256 bbb… vs ccc…"))
    assert script.cause == NOT_REPRODUCIBLE and "bbb… vs ccc…" in (script.cause_detail or "")
    resume = explain(found, fired=True, again=Verification(result=IDENTICAL, detail="same"))
    assert resume.cause == RESUME
    assert explain(found, fired=True, again=None).cause is None  # not asked: not guessed
    summary = LocalSummary(job_name="j", status="Completed", hosts=2, processes_per_host=1, wall_seconds=9.0,
                           cost=_cost(None), verified=False, verify_result=DIFFERS, verify_detail=found.detail,
                           verify_cause=script.cause, verify_cause_detail=script.cause_detail)
    assert "NO — the script is not reproducible: two uninterrupted runs differ too" in str(summary)
    assert "torch.manual_seed" in str(summary)
    blamed = replace(summary, verify_cause=resume.cause, verify_cause_detail=resume.cause_detail)
    assert "NO — the resume changed the result (model sha256 aaa… vs bbb…); a second uninterrupted run matched" \
        in str(blamed)
