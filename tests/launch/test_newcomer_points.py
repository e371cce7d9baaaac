"""What a new user met on a fresh clone (issue 37, item 6), each fixed where it starts: every `sm-dist fit` option says
what it does (from the setting's own docstring, which the CLI reference page shows too); a plan made without tokens=
names no dollars and says whose precision its memory check is; a missing script is refused before any AWS lookup;
--infra-stack with --local and a checkout bundled whole are said, not silent. (The clean-up hint is
tests/local/test_clean.py's; the site's offline search tests/docs/test_offline_search.py's.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import sm_dist
from sm_dist.cli import build_parser
from sm_dist.errors import ConfigError
from sm_dist.planning.config import LaunchConfig, field_docs


def test_every_fit_option_has_help_text_and_every_setting_a_docstring() -> None:
    options = [action for action in build_parser("fit")._actions if action.option_strings]
    assert len(options) > 70 and [a.option_strings[-1] for a in options if not a.help] == []  # 38 of 76 had none
    assert set(field_docs()) == {f.name for f in dataclasses.fields(LaunchConfig)}
    seed = next(a for a in options if "--seed" in a.option_strings)
    assert seed.help is not None and seed.help.startswith(field_docs()["seed"]) and seed.help.endswith("(default: 0)")


def test_a_plan_without_tokens_names_no_dollars_and_whose_precision_it_checked(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    plan = sm_dist.plan("train.py", source_dir=str(tmp_path), local=True, instance_type="ml.p4d.24xlarge",
                        instance_count=2, params=7e9, strategy="auto", spot=True,
                        checkpoint_s3_uri="s3://bkt/ckpt")
    line = next(text for text in str(plan).splitlines() if text.startswith("strategy"))
    assert "$" not in line and " h)" not in line, line  # was "($3 spot for 0.1 h)": one token's price
    assert "without tokens= no run is priced" in line
    assert "precision fp32 (the memory check's too; sm-dist estimate-cost assumes mixed unless --precision fp32)" in line
    mixed = sm_dist.plan("train.py", source_dir=str(tmp_path), local=True, instance_type="ml.p4d.24xlarge",
                         instance_count=2, params=7e9, strategy="auto", precision="mixed")
    assert ", precision mixed, " in str(mixed)  # what estimate-cost assumes: nothing to add


class _NoAws:
    """A boto3 session that fails the test the moment anything asks it for a region, a client or a role."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"an AWS lookup ({name}) before the script was checked")


def test_a_missing_script_is_refused_before_any_aws_lookup(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^entry='trian.py': no such file in source_dir"):
        sm_dist.plan("trian.py", source_dir=str(tmp_path), instance_type="ml.g5.xlarge",
                     session=_NoAws())  # type: ignore[arg-type]


def test_infra_stack_with_local_is_said_not_ignored(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    plan = sm_dist.plan("train.py", source_dir=str(tmp_path), local=True, infra_stack="sm-dist")
    assert [w for w in plan.warnings if w.startswith("infra_stack='sm-dist' is not read by a local run")]
    assert not [w for w in sm_dist.plan("train.py", source_dir=str(tmp_path), local=True).warnings
                if "infra_stack" in w]


def test_a_checkout_bundled_whole_by_the_default_source_dir_is_said(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text("print('hi')\n")
    for folder in ("docs", "tests"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "page.md").write_text("x" * 1000)
    monkeypatch.chdir(tmp_path)
    warned = [w for w in sm_dist.plan("train.py", local=True).warnings if w.startswith("source_dir='.' (the default)")]
    assert warned == ["source_dir='.' (the default) bundles this whole git checkout: 3 files, 0.0 MiB (docs, tests); "
                      "give --source-dir the script's folder, or leave the rest out with .smdistignore"]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    assert not [w for w in sm_dist.plan("train.py", source_dir="src", local=True).warnings if "checkout" in w]
