"""Parsing --chaos values, and the one grammar they share with the checkpointer's SM_DIST_FAULT hook."""

from __future__ import annotations

from pathlib import Path

import pytest

from sm_dist.contract.faults import DEFAULT_S3_FAULT_SECONDS, Fault, hook_env_value, hook_faults
from sm_dist.errors import ConfigError
from sm_dist.local.chaos import parse_faults


def test_parse_all_kinds() -> None:
    faults = parse_faults(["kill:5", "sigterm:7", "crash-in-save:4", "s3-faults", "s3-faults:2.5"])
    assert faults == (
        Fault("kill", step=5), Fault("sigterm", step=7), Fault("crash-in-save", step=4),
        Fault("s3-faults", seconds=DEFAULT_S3_FAULT_SECONDS), Fault("s3-faults", seconds=2.5),
    )
    assert str(faults[2]) == "crash-in-save:4"


def test_timed_faults() -> None:
    kill, spot = parse_faults(["kill:20s", "SIGTERM:1.5s"])
    assert kill == Fault("kill", at_seconds=20.0) and kill.timed and str(kill) == "kill:20s"
    assert spot == Fault("sigterm", at_seconds=1.5) and str(spot) == "sigterm:1.5s"
    assert not parse_faults(["kill:20"])[0].timed


@pytest.mark.parametrize("bad", ["kil:5", "kill", "kill:0", "kill:x", "sigterm:-1", "s3-faults:0", "",
                                 "kill:0s", "kill:1.2.3s", "kill:s", "crash-in-save:3s", "s3-faults:2s"])
def test_bad_specs_name_the_fix(bad: str) -> None:
    with pytest.raises(ConfigError, match="chaos"):
        parse_faults([bad])


def test_duplicates_rejected() -> None:
    with pytest.raises(ConfigError, match="once"):
        parse_faults(["kill:3", "kill:3"])


def test_a_chaos_crash_reaches_the_hook_as_given() -> None:
    faults = parse_faults(["kill:3", "crash-in-save:4"])
    value = hook_env_value(faults)
    assert value == "crash-in-save:4" and hook_env_value(parse_faults(["kill:3"])) is None
    assert hook_faults({"SM_DIST_FAULT": value}) == {"crash-in-save": 4}
    assert hook_faults({"SM_DIST_FAULT": "crash-in-save:4,crash-in-commit:6"}) == {"crash-in-save": 4,
                                                                                  "crash-in-commit": 6}


@pytest.mark.parametrize("bad", ["kill:3", "crash-in-save", "crash-in-save:2s", "crash-everywhere:1"])
def test_the_hook_takes_only_its_kinds_at_a_step(bad: str) -> None:
    with pytest.raises(ConfigError, match="SM_DIST_FAULT"):
        hook_faults({"SM_DIST_FAULT": bad})


@pytest.mark.parametrize(("flags", "spec"), [
    ({}, "capacity:2"), ({"chain": True}, "max-wait:1"),
])
def test_chaos_a_job_cannot_rehearse_is_refused_before_the_plan_is_built(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: dict[str, bool], spec: str) -> None:
    """Building a plan takes seconds (the image, the bundle); these refusals need none of it."""
    import sm_dist
    from sm_dist.launch import api

    def no_plan(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the plan was built before the refusal")

    monkeypatch.setattr(api, "make_plan", no_plan)
    (tmp_path / "train.py").write_text("print('hi')\n")
    with pytest.raises(ConfigError, match=f"chaos={spec!r}: rehearses"):
        sm_dist.fit("train.py", source_dir=str(tmp_path), local=True, instance_type="ml.g5.xlarge", **flags,
                    local_options={"chaos": [spec]})
