"""The part of a plan that needs no AWS: the strategy, the job spec, the code bundle (`plan_code`).

`sm_dist.planning.build.make_plan` calls it with the locations it resolved; `sm_dist.build_bundle`
calls it alone (no AWS: the catalog's prices). The job's checkpoint settings are built from the
LaunchConfig here only (`_checkpointing`): the job spec carries them to the runtime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from sm_dist.contract.checkpoint import DEFAULT_KEEP, CheckpointSettings, parse_mode
from sm_dist.contract.container import CHECKPOINT_LOCAL_PATH, CODE_DIR
from sm_dist.errors import ConfigError
from sm_dist.jobspec import JobSpec
from sm_dist.planning import bundle as bundle_mod
from sm_dist.planning import preflight, wheels
from sm_dist.planning import request as request_mod
from sm_dist.planning.config import LaunchConfig
from sm_dist.planning.sizing import Sizing, choose_strategy
from sm_dist.vocab import Strategy

if TYPE_CHECKING:
    from sm_dist.catalog import Instance
    from sm_dist.catalog.images import ImageRef

#: Variables the job always gets: the code channel on PYTHONPATH, unbuffered logs.
BASE_ENVIRONMENT = {"PYTHONPATH": CODE_DIR, "PYTHONUNBUFFERED": "1"}


def _checkpointing(config: LaunchConfig, entry: str, infra_base: str | None, job_name: str,
                   default_base: str | None) -> tuple[CheckpointSettings, list[str]]:
    """The job's checkpoint settings, built from the LaunchConfig here only (checkpoint_keep=None: DEFAULT_KEEP). A multi-instance job without a URI (none given, no infra
    stack) checkpoints under `default_base` (the job's output location): every host's shards
    must meet in one place for a restart to resume."""
    uri = config.checkpoint_s3_uri or (request_mod.s3_join(infra_base, job_name) if infra_base else None)
    warnings = []
    # (spot without a URI is refused below with the fix, on one instance or many, as documented)
    if uri is None and default_base and config.instance_count > 1 and config.checkpoint_mode == "auto" and not config.spot:
        uri = request_mod.s3_join(default_base, job_name, "checkpoints")
        warnings.append(f"no checkpoint_s3_uri: a job on {config.instance_count} instances checkpoints to {uri} "
                        "(pass checkpoint_s3_uri= to choose, or checkpoint_mode='off')")
    # Without default_base (a local plan, a bundle) hosts' folders are not refused: local mode
    # syncs each emulated host's folder to its own S3 endpoint, so they do resume there.
    mode, mode_warnings = preflight.check_checkpointing(
        config.spot, config.checkpoint_mode, uri, instance_count=config.instance_count if default_base else 1,
        network_isolation=config.network_isolation, vpc=bool(config.subnets), own_script=_own_script(config, entry))
    return CheckpointSettings(
        mode=parse_mode(mode), uri=uri if mode != "off" else None,
        local_path=CHECKPOINT_LOCAL_PATH if mode in ("local", "sagemaker-sync") else None,
        interval_steps=config.checkpoint_interval_steps, async_checkpoint=config.async_checkpoint,
        keep=DEFAULT_KEEP if config.checkpoint_keep is None else config.checkpoint_keep,
    ), warnings + mode_warnings


_IMPORTS_SM_DIST = re.compile(rb"^\s*(?:from|import)\s+sm_dist\b", re.MULTILINE)


def _own_script(config: LaunchConfig, resolved: str) -> bool:
    """A script that checkpoints by itself: from the user's source dir and never importing sm_dist
    (a function entry, sm_dist's entrypoints and scripts using sm_dist's checkpointer write to S3
    directly). `resolved`: the entry as `bundle.resolve_entry` gave it."""
    if config.entry_is_function:
        return False
    if resolved.startswith(bundle_mod.ENTRYPOINTS_IN_BUNDLE + "/"):
        return False
    try:
        return _IMPORTS_SM_DIST.search((_source(config) / resolved).read_bytes()) is None
    except OSError:
        return True


@dataclass(frozen=True)
class CodePlan:
    """The part of a plan that needs no AWS: strategy, job spec, bundle."""

    sizing: Sizing
    spec: JobSpec
    bundle: bundle_mod.Bundle
    instance: Instance | None
    warnings: tuple[str, ...]


def plan_code(config: LaunchConfig, region: str, job_name: str, entry: str, inst: Instance | None,
              image: ImageRef | None, checkpoint_base: str | None = None, default_checkpoint_base: str | None = None,
              checkpoint_name: str | None = None) -> CodePlan:
    """Check the config (checkpointing, estimator) and list the bundle. No AWS call; `preflight.check_texts` ran before.

    `entry`, `inst` and `image`: the entry as the job spec holds it, the instance type's catalog row and the
    job's image of sm_dist's table (None: image_uri=), as the caller resolved, looked up and checked them
    (`bundle.resolve_entry`, `preflight.check_instance`, `request.job_image`), once.

    `checkpoint_base`: the infra stack's checkpoint prefix; `default_checkpoint_base`: where a
    multi-instance job without one checkpoints (the output location; None: not planned here);
    `checkpoint_name`: the folder under either (default: the job's name; a chain's: the run's)."""
    warnings = [] if inst else [f"{config.instance_type} is not in sm_dist's catalog: no price, no memory check"]
    checkpoint, ckpt_warnings = _checkpointing(config, entry, checkpoint_base, checkpoint_name or job_name,
                                               default_checkpoint_base)
    # the estimate prices the checkpoints where they will go: the disk (SageMaker uploads) or S3
    storage = "local" if checkpoint.mode.value in ("local", "sagemaker-sync") else "s3"
    sizing = choose_strategy(config, region, storage) if inst else _unchecked(config)
    warnings += preflight.check_topology(sizing.strategy, config.instance_count, config.nproc_per_node)
    warnings += preflight.check_isolated_restarts(config.network_isolation, config.instance_count,
                                                  config.max_restarts, checkpoint.mode)
    if checkpoint.interval_steps is None and checkpoint.mode.value != "off" and sizing.checkpoint_interval_steps:
        # none given: the estimate's Young/Daly interval, when it priced the run
        checkpoint = replace(checkpoint, interval_steps=sizing.checkpoint_interval_steps)
        sizing = replace(sizing, interval_defaulted=True)
    spec = JobSpec(
        entry=entry,
        strategy=sizing.strategy, precision=config.precision, seed=config.seed,
        nproc_per_node=1 if sizing.strategy is Strategy.DP else config.nproc_per_node,
        max_restarts=config.max_restarts, hang_timeout_s=config.hang_timeout_s, checkpoint=checkpoint, job_name=job_name,
        hyperparameters=dict(config.hyperparameters), args=tuple(config.args),
    )
    bundle = bundle_mod.collect_bundle(config.source_dir, spec.to_json(), config.ignore_patterns)
    platform = wheels.image_platform(image) if bundle.requirements is not None or bundle.wheels else None
    if bundle.requirements is not None and not bundle.wheels and config.network_isolation:
        raise ConfigError("network_isolation", True, "the container cannot pip-install requirements.txt without "
                          f"network; vendor the wheels into source_dir: {wheels.download_command(platform)}")
    wheels.check_wheels(bundle, platform)
    if inst and inst.region != region:
        warnings.append(f"prices are {inst.region}'s ({inst.price_date}); {region} may differ")
    return CodePlan(sizing, spec, bundle, inst, (*warnings, *sizing.warnings, *ckpt_warnings, *bundle.warnings,
                                                 *bundle_mod.checkout_warning(config.source_dir, bundle)))


def _unchecked(config: LaunchConfig) -> Sizing:
    if config.strategy == "auto":
        raise ConfigError("strategy", "auto", f"{config.instance_type} is not in sm_dist's catalog; name a strategy")
    return Sizing(Strategy(config.strategy), None, "as given")


def _source(config: LaunchConfig) -> Path:
    return Path(config.source_dir).resolve()


__all__ = ["BASE_ENVIRONMENT", "CodePlan", "plan_code"]
