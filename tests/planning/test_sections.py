"""Settings by section: `checkpoint=sm_dist.Checkpointing(...)` (or a config file's `checkpoint:` mapping) stands for
the flat checkpoint_* settings, and `compute=`, `stopping=`, `data=`, `networking=`, `observability=`, `chaining=`
for theirs, mapped in one place (`planning.settings.flatten`); the plan is the same either way, and a setting given
both ways, or a field a section lacks, is one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import sm_dist
from sm_dist.errors import ConfigError
from sm_dist.planning.settings import flatten


@pytest.fixture
def src(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return tmp_path


def test_a_section_plans_as_its_flat_settings(src: Path) -> None:
    by_section = sm_dist.plan("train.py", source_dir=str(src), local=True, checkpoint=sm_dist.Checkpointing(
        interval_steps=7, keep=3, mode="s3", s3_uri="s3://bkt/ckpt", async_checkpoint=True))
    flat = sm_dist.plan("train.py", source_dir=str(src), local=True, checkpoint_interval_steps=7, checkpoint_keep=3,
                        checkpoint_mode="s3", checkpoint_s3_uri="s3://bkt/ckpt", async_checkpoint=True)
    assert by_section.job_spec.checkpoint == flat.job_spec.checkpoint
    assert (flat.job_spec.checkpoint.interval_steps, flat.job_spec.checkpoint.keep) == (7, 3)
    mapping = sm_dist.plan("train.py", source_dir=str(src), local=True,
                           checkpoint={"interval_steps": 7, "keep": 3, "mode": "s3", "s3_uri": "s3://bkt/ckpt",
                                       "async_checkpoint": True})  # type: ignore[typeddict-item]  # a config file's form
    assert mapping.job_spec.checkpoint == flat.job_spec.checkpoint


def test_given_twice_or_a_field_the_section_lacks_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^checkpoint.interval_steps=7: also given as checkpoint_interval_steps=9: "
                                          "give it once$"):
        flatten({"checkpoint": sm_dist.Checkpointing(interval_steps=7), "checkpoint_interval_steps": 9})
    with pytest.raises(ConfigError, match=r"^checkpoint.interval_step=7: not a field of checkpoint \(did you mean "
                                          "'interval_steps'\\?\\)"):
        flatten({"checkpoint": {"interval_step": 7}})
    with pytest.raises(ConfigError, match=r"^checkpoint.async_save=True: not a field of checkpoint \(did you mean "
                                          "'async_checkpoint'\\?\\)"):  # the field's old name
        flatten({"checkpoint": {"async_save": True}})
    with pytest.raises(ConfigError, match=r"^checkpoint='int': expected sm_dist.Checkpointing"):
        flatten({"checkpoint": 7})
    assert flatten({"checkpoint": None, "seed": 1}) == {"seed": 1}


def test_a_config_files_section_and_a_flag_that_wins_over_it(src: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from sm_dist import cli

    (src / "job.yaml").write_text("checkpoint:\n  interval_steps: 5\n  keep: 4\ninstance_count: 2\n")
    assert cli.main(["fit", "train.py", "--config", str(src / "job.yaml"), "--source-dir", str(src), "--local",
                     "--dry-run", "--json", "--checkpoint-interval-steps", "6"]) == 0
    spec = json.loads(capsys.readouterr().out)["job_spec"]["checkpoint"]
    assert (spec["interval_steps"], spec["keep"]) == (6, 4)


#: One use of each other section, as a user writes it; the plan must be the same as with its flat settings.
OTHER_SECTIONS: dict[str, Any] = {
    "compute": sm_dist.Compute(instance_type="ml.g5.2xlarge", instance_count=2, volume_size_gb=60, keep_alive_s=600,
                               volume_kms_key="arn:aws:kms:us-east-1:123456789012:key/k"),
    "stopping": sm_dist.StoppingCondition(max_runtime_s=1800, max_cost_usd=40.0),
    "data": sm_dist.Data(inputs={"train": "s3://bkt/train"}, output_s3_uri="s3://bkt/out", output_compression="none"),
    "networking": sm_dist.Networking(subnets=["subnet-1"], security_group_ids=["sg-1"],
                                     encrypt_inter_container_traffic=True),
    "observability": sm_dist.Observability(metrics=["loss", "acc"], tensorboard=True),
    "chaining": sm_dist.Chaining(chain=True, max_links=4, retry_attempts=2),
}


@pytest.mark.parametrize("key", sorted(OTHER_SECTIONS))
def test_each_section_plans_as_its_flat_settings(src: Path, key: str) -> None:
    section = OTHER_SECTIONS[key]
    flat = {name: value for name, value in dataclasses.asdict(section).items() if value is not None}
    common: dict[str, Any] = {"source_dir": str(src), "local": True, "job_name": "sections-1",
                              "checkpoint_s3_uri": "s3://bkt/ckpt"}
    by_section = sm_dist.plan("train.py", **common, **{key: section}).to_dict()
    assert by_section == sm_dist.plan("train.py", **common, **flat).to_dict()
    assert by_section != sm_dist.plan("train.py", **common).to_dict()  # the section was not left out
